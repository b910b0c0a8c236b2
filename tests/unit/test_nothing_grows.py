"""Nothing a job leaves behind grows with the number of its runs (issue 28): each kind of leftover has a
retention rule. The 50-run soak (tests/system/test_soak.py) shows the bound on a real job."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from spark_checkpoint_runtime.layout import ControlChannel, JobFolder
from spark_checkpoint_runtime.sinks import ParquetSink
from spark_checkpoint_runtime.working_copy import WorkingCopy


def _age(path: Path, seconds: float) -> None:
    then = time.time() - seconds
    for item in [path, *path.rglob("*")]:
        os.utime(item, (then, then))


def test_heartbeats_of_runs_that_died_are_pruned(tmp_path: Path):
    control = ControlChannel(JobFolder(str(tmp_path), "j"))
    control.heartbeat("killed-long-ago", None)
    control.heartbeat("alive", None)
    _age(tmp_path / "j" / "_control" / "alive" / "killed-long-ago.json", 8 * 86400)
    assert control.prune(7 * 86400) == 1
    assert [beat["run_id"] for beat in control.live_runs()] == ["alive"]


def test_deleting_shared_files_removes_the_folders_it_empties(tmp_path: Path):
    storage = JobFolder(str(tmp_path), "j")
    for relative in ("shared/run-1/state/0/0/1.delta", "shared/run-1/state/0/1/1.delta", "shared/run-2/a"):
        (tmp_path / "j" / relative).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "j" / relative).write_bytes(b"x")
    storage.delete_job_files(["shared/run-1/state/0/0/1.delta", "shared/run-1/state/0/1/1.delta"])
    assert sorted(p.name for p in (tmp_path / "j" / "shared").iterdir()) == ["run-2"]


def test_output_set_aside_longer_ago_than_the_retention_is_deleted(tmp_path: Path):
    out = tmp_path / "out"
    for folder in ("_aborted/r1/batch-3", "_aborted/r2/batch-9", "_rolled_back/restore-4", "_rolled_back/restore-9"):
        (out / folder).mkdir(parents=True)
        (out / folder / "c1-b0-part-0.parquet").write_bytes(b"rows")
    (out / "c5-b2-part-0.parquet").write_bytes(b"published")
    for old in ("_aborted/r1", "_rolled_back/restore-4"):
        _age(out / old, 8 * 86400)
    confirmed = []  # the run confirms its lease once before the first delete, never when nothing is due
    assert ParquetSink(str(out)).prune(1000 * 86400, before_delete=lambda: confirmed.append(True)) == 0
    assert confirmed == []
    assert ParquetSink(str(out)).prune(7 * 86400, before_delete=lambda: confirmed.append(True)) == 2
    assert confirmed == [True]
    assert not (out / "_aborted" / "r1").exists() and not (out / "_rolled_back" / "restore-4").exists()
    assert (out / "_aborted" / "r2" / "batch-9").exists() and (out / "_rolled_back" / "restore-9").exists()
    assert (out / "c5-b2-part-0.parquet").read_bytes() == b"published", "published output is never pruned"


def test_a_run_removes_the_working_folders_its_killed_predecessors_left(tmp_path: Path):
    owner = f"file://{tmp_path}/root/j"
    killed = WorkingCopy(str(tmp_path / "work"), "j", "run-1")
    killed.create(owner=owner)
    other_root = WorkingCopy(str(tmp_path / "work"), "j", "run-2")  # same job name, another checkpoint root
    other_root.create(owner=f"file://{tmp_path}/elsewhere/j")
    legacy = tmp_path / "work" / "j" / "run-0"  # from before owner files: not ours to judge
    legacy.mkdir(parents=True)
    current = WorkingCopy(str(tmp_path / "work"), "j", "run-3")
    current.create(owner=owner)
    assert current.remove_abandoned() == 1
    assert sorted(p.name for p in (tmp_path / "work" / "j").iterdir()) == ["run-0", "run-2", "run-3"]
    assert json.loads((tmp_path / "work" / "j" / "run-3" / "owner.json").read_text()) == {"job": owner}


def test_a_checkpoint_deleted_by_listed_files_leaves_no_folder_where_folders_are_real(tmp_path: Path):
    """Retention deletes an old checkpoint on an object store by the files its listing showed. Azure with a
    hierarchical namespace has real folders, which would stay behind empty, one per checkpoint: they go too,
    as do the folders of shared files retention deletes. (A local disk posing as ``abfs``: the one store kind
    this machine cannot run.)"""
    from fsspec.implementations.local import LocalFileSystem

    from spark_checkpoint_runtime.layout.store import is_object_store

    class FoldersLikeAzure(LocalFileSystem):
        protocol = ("abfs", "az")

    storage = JobFolder(str(tmp_path), "j")
    storage.fs = FoldersLikeAzure()
    assert is_object_store(storage.fs)
    folder = tmp_path / "j" / "chk-3"
    (folder / "commits").mkdir(parents=True)
    for name in ("_metadata", "commits/0"):
        (folder / name).write_bytes(b"x")
    storage.checkpoints.discard([3], ["chk-3/_metadata", "chk-3/commits/0"])
    assert not folder.exists()
    (tmp_path / "j" / "shared" / "run-1" / "state").mkdir(parents=True)
    (tmp_path / "j" / "shared" / "run-1" / "state" / "1.delta").write_bytes(b"x")
    storage.delete_job_files(["shared/run-1/state/1.delta"])
    assert not (tmp_path / "j" / "shared").exists()
