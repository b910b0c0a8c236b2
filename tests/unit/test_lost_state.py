"""Never a silent start from empty state (issue 28, holes 2 and 5): retention keeps damaged checkpoints while
nothing valid is left, a job that completed checkpoints before refuses to start empty unless told to, and
sink recovery moves nothing without a confirmed lease."""

from __future__ import annotations

import posixpath
import shutil
import time
from pathlib import Path

import pytest

from spark_checkpoint_runtime.errors import LeaseLost
from spark_checkpoint_runtime.layout import JobFolder, LeaseFiles, Lineage, NoValidCheckpoint
from spark_checkpoint_runtime.lease import JobLease
from spark_checkpoint_runtime.restore import resolve_restore_point
from spark_checkpoint_runtime.retention import apply_job_retention, plan_job_retention
from spark_checkpoint_runtime.run.fence import RunFence
from spark_checkpoint_runtime.run.output import recover_output, restore_working_copy
from spark_checkpoint_runtime.run.plan import RunPlan
from spark_checkpoint_runtime.run.state import RunState
from spark_checkpoint_runtime.sinks import ParquetSink
from tests.support.helpers import write_checkpoint


def test_retention_keeps_every_damaged_checkpoint_while_none_is_valid(tmp_path: Path):
    storage = JobFolder(str(tmp_path), "j")
    for checkpoint_id in (1, 2, 3):
        write_checkpoint(storage, checkpoint_id, [f"state/0/0/{checkpoint_id}.delta"], completion_ms=1_000)
    shutil.rmtree(tmp_path / "j" / "shared")  # a lifecycle rule took every state file
    plan = plan_job_retention(storage, num_retained=1, orphan_grace=0, now=time.time() + 86_400)
    assert plan.delete_checkpoints == [] and plan.delete_orphan_folders == []
    apply_job_retention(storage, plan)
    assert storage.checkpoints.ids() == [1, 2, 3]
    with pytest.raises(NoValidCheckpoint, match="has no valid checkpoint"):
        resolve_restore_point(storage, "latest")


def test_a_job_that_completed_checkpoints_refuses_to_start_empty_unless_told(tmp_path: Path):
    storage = JobFolder(str(tmp_path), "j")
    assert resolve_restore_point(storage, "latest") is None, "a new job starts fresh"
    storage.ids.mark_completed(4, "r1")
    with pytest.raises(NoValidCheckpoint) as refused:
        resolve_restore_point(storage, "latest")
    message = str(refused.value)
    assert "has completed checkpoints before (its first was chk-4, by run r1)" in message
    assert "--restore-from none to start from empty state on purpose" in message
    assert resolve_restore_point(storage, "none") is None, "told explicitly: a fresh start"


def test_sink_recovery_moves_nothing_once_the_lease_is_lost(tmp_path: Path):
    storage = JobFolder(str(tmp_path / "root"), "j")
    lease = JobLease(storage, "r1", None, 30.0)
    lease.acquire()
    LeaseFiles(storage).create(lease.epoch + 1, {"run_id": "r2", "acquired_ms": 1, "epoch": lease.epoch + 1})
    output = tmp_path / "out"
    staged = output / "_staging" / "r0" / "batch-3"
    staged.mkdir(parents=True)
    (staged / "part-0.parquet").write_bytes(b"rows")
    plan = RunPlan(point=None, restored_operators=None, history=Lineage(), rewind=False, next_id=1)
    try:
        with pytest.raises(LeaseLost):
            recover_output(plan, None, ParquetSink(str(output)), RunState("r1"), RunFence(lease))
    finally:
        lease.release()
    assert (staged / "part-0.parquet").read_bytes() == b"rows", "the run that lost the job moved nothing"


def test_checkpoints_deleted_between_resolve_and_settle_are_refused_not_restored(tmp_path: Path):
    """``--restore-from latest`` is settled again once the run holds the lease. A run that held the job in
    between and discarded its checkpoints (``--externalized-retention``) leaves nothing to restore: the run is
    refused as lost state, never continued from the point it resolved before."""
    from spark_checkpoint_runtime.options import options_from_mapping
    from spark_checkpoint_runtime.retention import apply_externalized_retention
    from spark_checkpoint_runtime.run.plan import RunPlanner

    storage = JobFolder(str(tmp_path / "root"), "j")
    for checkpoint_id in (1, 2):
        write_checkpoint(storage, checkpoint_id, [f"state/0/0/{checkpoint_id}.delta"])
    storage.ids.mark_completed(1, "r1")
    options = options_from_mapping(
        {"job_name": "j", "checkpoint_root": str(tmp_path / "root"), "pipeline": "m:f", "sink": "parquet:out"}
    )
    sink = ParquetSink(str(tmp_path / "out"))
    planner = RunPlanner(storage, options, "r2")
    assert planner.resolve().metadata.id == 2
    assert planner.settle({}, None, sink).point.metadata.id == 2  # nothing changed: the point stands
    apply_externalized_retention(storage, "delete-on-cancellation", "finished")
    with pytest.raises(NoValidCheckpoint, match="has no checkpoint left"):
        planner.settle({}, None, sink)

    def settle_after_its_metadata_went(checkpoint_id: int, refusal: str) -> None:
        """Resolve a new checkpoint, lose its _metadata (a discard cut short after it), then settle."""
        write_checkpoint(storage, checkpoint_id, [f"state/0/0/{checkpoint_id}.delta"])
        planner = RunPlanner(storage, options, f"r{checkpoint_id}")
        assert planner.resolve().metadata.id == checkpoint_id
        (tmp_path / "root" / "j" / f"chk-{checkpoint_id}" / "_metadata").unlink()
        with pytest.raises(NoValidCheckpoint, match=refusal):
            planner.settle({}, None, sink)

    settle_after_its_metadata_went(3, "has no checkpoint left")  # the files stay: still nothing to restore
    # A job without the completed record (checkpoints copied in, or written before the record existed).
    shutil.rmtree(tmp_path / "root" / "j" / "_ids")
    settle_after_its_metadata_went(4, "chk-4 was discarded after this run resolved it")


@pytest.mark.parametrize("merged", [False, True], ids=["file", "segment range"])
def test_a_file_deleted_while_the_run_restores_fails_the_run_with_what_to_do(tmp_path: Path, merged: bool):
    """A restore point validated when resolved whose file is deleted before it is copied: the run fails with a
    reason a person can act on (a retryable failure: the retry validates again), never with a bare storage
    error and never by continuing from part of the state."""
    from spark_checkpoint_runtime.errors import JobFailed
    from spark_checkpoint_runtime.layout import FileEntry
    from spark_checkpoint_runtime.working_copy import WorkingCopy
    from tests.support.helpers import checkpoint_metadata

    storage = JobFolder(str(tmp_path / "root"), "j")
    if merged:  # two files packed into one segment object, restored by ranged reads
        segment = storage.checkpoints.shared_relative_file("r1", "segment-1")
        storage.fs.makedirs(posixpath.dirname(storage.job_file(segment)), exist_ok=True)
        storage.fs.pipe_file(storage.job_file(segment), b"a" * 10 + b"b" * 10)
        files = [FileEntry(segment, f"state/0/0/{n}.delta", 10, True, offset=10 * (n - 1)) for n in (1, 2)]
        storage.checkpoints.write_metadata(checkpoint_metadata(1, files, job="j"))
    else:
        write_checkpoint(storage, 1, ["state/0/0/1.delta"])
    point = resolve_restore_point(storage, "latest")
    assert point is not None and point.metadata.id == 1
    gone = next(entry for entry in point.metadata.files if entry.shared)
    storage.fs.rm(storage.job_file(gone.path))  # by hand, after the run resolved its restore point
    plan = RunPlan(point=point, restored_operators=None, history=Lineage(), rewind=False, next_id=2)
    working = WorkingCopy(str(tmp_path / "work"), "j", "r2")
    working.create(owner=storage.url_of(storage.job_path))
    with pytest.raises(JobFailed) as failed:
        restore_working_copy(plan, working, "j")
    message = str(failed.value)
    assert message.startswith(f"{point.url}: a file its _metadata names went missing"), message
    assert gone.path.split("/")[-1] in message, "it names the file"
    assert "Run again: the restore point is validated anew" in message
    with pytest.raises(NoValidCheckpoint):  # and the retry's resolve refuses the damaged point
        resolve_restore_point(storage, "latest")


def test_pruning_set_aside_output_confirms_the_lease_before_any_delete(tmp_path: Path):
    """The Parquet sink confirms only when something is due; a sink written to the older ``prune(older_than_s)``
    protocol is confirmed before the call, and a run that lost the job prunes nothing with either."""
    from spark_checkpoint_runtime.run.output import prune_set_aside

    storage = JobFolder(str(tmp_path / "root"), "j")
    lease = JobLease(storage, "r1", None, 30.0)
    lease.acquire()
    calls: list[float] = []

    class OlderSink:
        def prune(self, older_than_s: float) -> int:
            calls.append(older_than_s)
            return 0

    try:
        prune_set_aside(OlderSink(), RunFence(lease), 60.0)
        assert calls == [60.0]
        LeaseFiles(storage).create(lease.epoch + 1, {"run_id": "r2", "acquired_ms": 1, "epoch": lease.epoch + 1})
        with pytest.raises(LeaseLost):
            prune_set_aside(OlderSink(), RunFence(lease), 60.0)
        assert calls == [60.0], "the older sink was not called once the lease was lost"
        aside = tmp_path / "out" / "_aborted" / "r0" / "batch-1"
        aside.mkdir(parents=True)
        (aside / "part-0.parquet").write_bytes(b"rows")
        with pytest.raises(LeaseLost):  # due at once (retention 0 s): the confirm before the delete fails
            prune_set_aside(ParquetSink(str(tmp_path / "out")), RunFence(lease), -1.0)
        assert (aside / "part-0.parquet").read_bytes() == b"rows"
    finally:
        lease.release()
