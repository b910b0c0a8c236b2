"""Lineage, run-owned staging and validity-aware retention on real files, without Spark.

The process-level proofs (rewinds and savepoints SIGKILLed at every step of their restore) are the rewind
chains in ``test_chaos.py``; these pin the rules they rest on.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import pytest

from spark_checkpoint_runtime.layout import (
    CheckpointMetadata,
    DamagedCheckpoint,
    JobFolder,
    Lineage,
    StagedOutput,
)
from spark_checkpoint_runtime.retention import apply_job_retention, plan_job_retention, plan_retention
from spark_checkpoint_runtime.sinks import ParquetSink
from tests.support.helpers import checkpoint_metadata, write_checkpoint


def test_lineage_merges_ranges_and_answers_membership():
    history = Lineage.of([(8, 9), (1, 5), (6, 6)])
    assert history.ranges == ((1, 6), (8, 9))
    assert [history.contains(i) for i in (0, 1, 6, 7, 8, 9, 10)] == [False, True, True, False, True, True, False]
    assert history.with_range(10, 12).describe() == "1-6, 8-12"
    assert history.highest == 9 and Lineage().highest == 0


def test_metadata_without_lineage_means_every_id_up_to_its_own():
    assert Lineage.parse(None, 7).ranges == ((1, 7),)


@pytest.mark.parametrize(
    ("lineage", "staged"),
    [
        ([[1, math.inf]], None),
        ([[5, 1]], None),
        ([[1, 3]], None),  # does not hold the snapshot's own id (7)
        ("1-7", None),
        ([[1, 7]], {"checkpoint_id": 7, "run_id": "../x", "batches": [1]}),
        ([[1, 7]], {"checkpoint_id": 7, "run_id": "r", "batches": [True]}),
        ([[1, 7]], {"checkpoint_id": 7, "run_id": "r"}),
    ],
)
def test_a_damaged_history_or_staged_record_makes_the_snapshot_damaged(lineage, staged):
    meta = checkpoint_metadata(7, [])
    meta.lineage, meta.staged_output = lineage, staged
    with pytest.raises(DamagedCheckpoint):
        CheckpointMetadata.from_json(meta.to_json(), location="chk-7")  # json writes inf as Infinity


def _stage(sink: ParquetSink, run_id: str, batch_id: int, name: str = "part-00000-x.parquet") -> Path:
    folder = Path(sink._staged_batch_path(run_id, batch_id))
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_bytes(f"{run_id}/{batch_id}".encode())
    return folder / name


def _published(output: Path) -> list[str]:
    return sorted(p.name for p in output.iterdir() if p.is_file())


def test_commit_publishes_exactly_the_named_batches_of_the_named_run(tmp_path: Path):
    sink = ParquetSink(str(tmp_path / "out"))
    _stage(sink, "holder", 5)
    _stage(sink, "holder", 6)
    _stage(sink, "zombie", 5)  # a run that lost the job and woke up: its late write for the same batch
    staged = StagedOutput(7, "holder", (5,))
    sink.commit(staged)
    sink.commit(staged)  # repeated after a crash: nothing twice
    assert _published(tmp_path / "out") == ["c7-b5-part-00000-x.parquet"]
    assert sink.staged_batches() == {"holder": [6], "zombie": [5]}


def test_recovery_publishes_what_the_snapshot_names_aborts_the_rest_and_sets_aside_other_histories(tmp_path):
    output = tmp_path / "out"
    sink = ParquetSink(str(output))
    for name in ("c2-b1-part-a", "c3-b2-part-a", "c4-b3-part-a", "c6-b3-part-a"):
        output.mkdir(exist_ok=True)
        (output / name).write_bytes(b"x")
    _stage(sink, "run-a", 4)  # named by the restored checkpoint: its commit was cut short
    _stage(sink, "run-a", 5)  # staged after it: recomputed by the replay
    _stage(sink, "zombie", 4)
    # Set aside by an earlier rewind: checkpoint 8 is in the restored history again, checkpoint 5 is not.
    earlier = output / "_rolled_back" / "restore-6"
    earlier.mkdir(parents=True)
    (earlier / "c8-b4-part-b").write_bytes(b"x")
    (earlier / "c5-b4-part-b").write_bytes(b"x")
    # The restored history: ids 1-3, then 7-8 (4 and 6 belong to an abandoned branch).
    sink.recover(StagedOutput(3, "run-a", (4,)), Lineage.of([(1, 3), (7, 8)]))
    assert _published(output) == ["c2-b1-part-a", "c3-b2-part-a", "c3-b4-part-00000-x.parquet", "c8-b4-part-b"]
    assert sorted(p.name for p in earlier.iterdir()) == ["c5-b4-part-b"]
    assert sorted(p.name for p in (output / "_rolled_back" / "restore-8").iterdir()) == [
        "c4-b3-part-a",
        "c6-b3-part-a",
    ]
    assert sink.staged_batches() == {}, "every other staged batch was aborted, the zombie's included"
    aborted = output / "_aborted"
    assert sorted(str(p.relative_to(aborted)) for p in aborted.rglob("part-*")) == [
        "run-a/batch-5/part-00000-x.parquet",
        "zombie/batch-4/part-00000-x.parquet",
    ], "set aside, not deleted: another snapshot may still name them"
    # A later restore from a snapshot that names run-a's batch 5 (a savepoint whose commit was cut short)
    # still publishes it.
    sink.commit(StagedOutput(9, "run-a", (5,)))
    assert "c9-b5-part-00000-x.parquet" in _published(output)
    assert sink.highest_published_id() == 9
    assert sink.published_ids() == {2, 3, 8, 9}, "set-aside output is not published"


def _damaged_listing(storage: JobFolder, gone: str) -> dict[str, int]:
    listing = storage.job_files()
    del listing[gone]
    return listing


def test_retention_keeps_the_newest_valid_checkpoints_not_the_newest_parseable(tmp_path: Path):
    storage = JobFolder(str(tmp_path), "j")
    metas = {1: write_checkpoint(storage, 1, ["a"])}
    for checkpoint_id in (2, 3, 4):
        metas[checkpoint_id] = write_checkpoint(storage, checkpoint_id, ["a", f"b{checkpoint_id}"] + ["x"])
    # "x" (uploaded by chk-2, reused by 3 and 4) went missing behind the job's back.
    gone = next(f.path for f in metas[2].files if f.target == "x")
    for checkpoint_id in (3, 4):
        metas[checkpoint_id].files = [f if f.target != "x" else metas[2].files[2] for f in metas[checkpoint_id].files]
    listing = _damaged_listing(storage, gone)
    plan = plan_retention(metas, listing, 2, older_than=5)
    assert plan.keep == [1], "the only valid checkpoint is kept, whatever its age"
    assert plan.delete_checkpoints == [], "damaged checkpoints newer than the newest valid one stay for a look"
    assert set(plan.damaged) == {2, 3, 4} and plan.missing == {gone}
    # No valid checkpoint at all: nothing is deleted.
    assert plan_retention({4: metas[4]}, listing, 2, older_than=5).delete_checkpoints == []


def test_the_operators_retention_counts_only_valid_checkpoints(tmp_path: Path):
    storage = JobFolder(str(tmp_path), "j")
    for checkpoint_id in (1, 2, 3):
        write_checkpoint(storage, checkpoint_id, [f"s{checkpoint_id}"])
    (Path(storage.job_path) / "shared" / "r1" / "s3").unlink()
    plan = plan_job_retention(storage, num_retained=1, now=time.time())
    assert plan.kept_checkpoints == [2], "chk-3 lists a missing file: the newest valid one is chk-2"
    assert plan.delete_checkpoints == [1]


def test_a_shared_file_a_newer_metadata_lists_is_never_an_orphan(tmp_path: Path):
    storage = JobFolder(str(tmp_path), "j")
    write_checkpoint(storage, 1, ["old"])
    write_checkpoint(storage, 2, ["new"])
    plan = plan_job_retention(storage, num_retained=1, orphan_grace=0.0, now=time.time() + 10)
    old = storage.checkpoints.shared_relative_file("r1", "old")
    assert plan.delete_shared == [old]
    # Between planning and deleting, a running job completes chk-3, which references "old" again (a restored
    # file keeps its old modification time).
    meta = storage.checkpoints.read(1)
    meta.id = 3
    meta.lineage = [[1, 3]]
    storage.checkpoints.write_metadata(meta)
    apply_job_retention(storage, plan)
    assert storage.file_size(old) == 10
    assert json.loads(Path(storage.checkpoints.path(3), "_metadata").read_text())["id"] == 3


def test_ids_stay_above_set_aside_output_and_keep_adopts_only_what_is_published(tmp_path: Path):
    from spark_checkpoint_runtime.options import parse_options
    from spark_checkpoint_runtime.run.plan import fresh_start_history

    output = tmp_path / "out"
    (output / "_rolled_back" / "restore-3").mkdir(parents=True)
    for name in ("c1-b0-part-a", "c2-b1-part-a", "_rolled_back/restore-3/c7-b4-part-a"):
        (output / name).write_bytes(b"x")
    sink = ParquetSink(str(output))
    assert sink.highest_published_id() == 7, "an id used by set-aside output is never used again"
    options = parse_options(
        ["--job-name", "j", "--checkpoint-root", str(tmp_path), "--pipeline", "m:f"] + ["--existing-output", "keep"]
    )
    kept = fresh_start_history(options, sink, sink.highest_published_id(), "r1")
    assert kept.ranges == ((1, 2),), "keep adopts what is published, not what an earlier restore set aside"
