"""The local attack surface and secrets: links out of the job folder, the working folder, conf values that
are secrets, storage options smuggled through runtime options, fenced deletes."""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

import pytest

from spark_checkpoint_runtime.layout import JobFolder, LeaseFiles, SavepointFolder
from spark_checkpoint_runtime.lease import JobLease
from spark_checkpoint_runtime.options import parse_options, redacted
from spark_checkpoint_runtime.retention import apply_job_retention, plan_job_retention
from spark_checkpoint_runtime.working_copy import WorkingCopy
from tests.support.helpers import checkpoint_metadata, write_checkpoint

BASE = ["--job-name", "j", "--checkpoint-root", "/tmp/r", "--pipeline", "m:f"]


def test_retention_never_follows_a_link_out_of_the_job_folder(tmp_path: Path):
    storage = JobFolder(str(tmp_path / "root"), "j")
    write_checkpoint(storage, 1, ["a"])
    write_checkpoint(storage, 2, ["b"])
    orphan = Path(storage.checkpoints.path(7))
    orphan.mkdir()
    (orphan / "leftover").write_text("an abandoned upload")
    plan = plan_job_retention(storage, num_retained=1, orphan_grace=0.0, now=time.time() + 10)
    assert storage.checkpoints.shared_relative_file("r1", "a") in plan.delete_shared and 7 in plan.delete_orphan_folders
    # Between planning and deleting, shared/ and chk-7 become links to a folder outside the job folder that
    # holds files at the very paths retention is about to delete.
    victim = tmp_path / "elsewhere"
    (victim / "r1").mkdir(parents=True)
    (victim / "r1" / "a").write_text("not the job's")
    (victim / "leftover").write_text("not the job's either")
    os.rename(storage.checkpoints.shared_path, tmp_path / "real-shared")
    os.symlink(victim, storage.checkpoints.shared_path)
    os.rename(orphan, tmp_path / "real-chk-7")
    os.symlink(victim, orphan)
    apply_job_retention(storage, plan)
    assert (victim / "r1" / "a").read_text() == "not the job's"
    assert (victim / "leftover").read_text() == "not the job's either"


def test_the_working_folder_is_private_and_unpredictable(tmp_path: Path):
    first, second = WorkingCopy(None, "j", "run-1"), WorkingCopy(None, "j", "run-1")
    for working in (first, second):
        working.create()
        assert stat.S_IMODE(os.stat(working.run_path).st_mode) == 0o700
    assert first.run_path != second.run_path, "the same job and run id still get different folders"
    given = WorkingCopy(str(tmp_path / "work"), "j", "run-2")
    given.create()
    assert stat.S_IMODE(os.stat(given.run_path).st_mode) == 0o700
    for working in (first, second, given):
        working.remove()


def test_confs_that_name_a_secret_are_masked_in_what_is_logged():
    options = parse_options(
        [*BASE, "--conf", "spark.hadoop.fs.s3a.secret.key=PLANTED-1", "--conf", "my.db.password=PLANTED-2"]
        + ["--conf", "spark.sql.shuffle.partitions=4", "--conf", "x.api_token=PLANTED-3"]
    )
    shown = str(redacted(options))
    assert "PLANTED" not in shown and "'spark.sql.shuffle.partitions': '4'" in shown


def test_a_claimed_savepoint_loses_only_the_files_its_metadata_lists(tmp_path: Path):
    folder = SavepointFolder(str(tmp_path / "sp"))
    listed = tmp_path / "sp" / "state" / "0" / "1.delta"
    listed.parent.mkdir(parents=True)
    listed.write_bytes(b"x" * 4)
    (tmp_path / "sp" / "notes.txt").write_text("someone's own file next to the savepoint")
    from spark_checkpoint_runtime.layout import FileEntry

    meta = checkpoint_metadata(3, [FileEntry("state/0/1.delta", "state/0/1.delta", 4, False)])
    meta.kind = "savepoint"
    folder.write_metadata(meta)
    folder.discard_listed(folder.read_metadata())
    assert not listed.exists() and not (tmp_path / "sp" / "_metadata").exists()
    assert (tmp_path / "sp" / "notes.txt").exists()


def test_externalized_retention_deletes_nothing_once_another_run_holds_the_job(tmp_path: Path):
    from spark_checkpoint_runtime.run.fence import RunFence
    from spark_checkpoint_runtime.run.finish import externalized_retention

    storage = JobFolder(str(tmp_path), "j")
    write_checkpoint(storage, 1, ["a"])
    lease = JobLease(storage, "r1", None, 30.0)
    lease.acquire()
    LeaseFiles(storage).create(2, {"run_id": "r2", "acquired_ms": 1, "epoch": 2})  # a takeover
    options = parse_options([*BASE, "--externalized-retention", "delete-on-cancellation"])
    externalized_retention(storage, RunFence(lease), options, "cancelled")
    assert storage.checkpoints.ids() == [1]
    lease.release()


@pytest.mark.parametrize("key", ["storage_options", "spec"])
def test_runtime_options_cannot_carry_storage_options(key):
    from airflow.sdk.exceptions import AirflowException

    from airflow_checkpoint_provider.operators import CheckpointedStreamingJobOperator

    operator = CheckpointedStreamingJobOperator(
        task_id="t", job_name="j", checkpoint_root="/tmp/r", pipeline="m:f", runtime_options={key: {"key": "x"}}
    )
    with pytest.raises(AirflowException, match="never on spark-submit's command line"):
        operator.runtime_values("latest", "k")


class OptionsSink:
    """A user sink that takes the job's storage options (credentials for the same store)."""

    def __init__(self, storage_options=None):
        self.storage_options = storage_options

    def write(self, batch_id, df, run_id): ...

    def commit(self, staged): ...

    def recover(self, staged, lineage): ...


def test_a_user_sink_receives_the_jobs_storage_options():
    from spark_checkpoint_runtime.sinks import load_sink

    sink = load_sink("tests.unit.test_local_surface:OptionsSink", {"key": "id", "secret": "s"})
    assert sink.storage_options == {"key": "id", "secret": "s"}
