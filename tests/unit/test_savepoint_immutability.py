"""A completed savepoint is immutable, and every caller gets its own trigger id (issue 28, hole 7).

A real coordinator takes snapshots of a working folder laid out as Spark writes it (no Spark needed): a
savepoint asked into a folder that already holds a completed savepoint fails, and that savepoint is left
byte for byte as it was (before, its files were overwritten, then the whole folder was deleted).
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from types import SimpleNamespace

from spark_checkpoint_runtime.checkpoint_policy import CheckpointConfig
from spark_checkpoint_runtime.coordinator import CheckpointCoordinator
from spark_checkpoint_runtime.layout import JobFolder, SavepointFolder
from spark_checkpoint_runtime.snapshot import StoredFiles
from spark_checkpoint_runtime.snapshot_targets import SavepointTarget
from spark_checkpoint_runtime.working_copy import WorkingCopy

PINNED = '{"batchWatermarkMs":0,"conf":{"spark.sql.shuffle.partitions":"2"}}'


def _working_folder(tmp_path: Path, batch: int) -> WorkingCopy:
    working = WorkingCopy(str(tmp_path / "work"), "j", "run-1")
    if not Path(working.file_path("metadata")).exists():
        working.create()
    files = {"metadata": b"{}"}
    for b in range(batch + 1):
        files[f"offsets/{b}"] = f"v1\n{PINNED}\n{{}}".encode()
        files[f"commits/{b}"] = b"v1\n{}"
        files.update({f"state/0/{p}/{b + 1}.delta": bytes([p, b]) * 10 for p in range(2)})
    for target, data in files.items():
        Path(working.file_path(target)).parent.mkdir(parents=True, exist_ok=True)
        Path(working.file_path(target)).write_bytes(data)
    return working


def _tree(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.rglob("*") if p.is_file()
    }


def _coordinator(storage: JobFolder, working: WorkingCopy) -> CheckpointCoordinator:
    return CheckpointCoordinator(
        storage,
        working,
        CheckpointConfig(interval=3600.0),
        run_id="run-1",
        next_id=1,
        stored=StoredFiles(),
        fingerprint={"operators": []},
        restored_from=None,
        spark_version="test",
        on_completed=lambda meta: None,
    )


def test_a_savepoint_into_a_completed_savepoints_folder_fails_and_leaves_it_untouched(tmp_path: Path):
    storage = JobFolder(str(tmp_path / "root"), "j")
    working = _working_folder(tmp_path, batch=0)
    coordinator = _coordinator(storage, working)
    coordinator.start()
    try:
        first = coordinator.savepoint_now(0, SavepointTarget(SavepointFolder(str(tmp_path / "sp"))))
        assert first.result is not None, first.reason
        before = _tree(tmp_path / "sp")
        _working_folder(tmp_path, batch=1)  # a later batch: other state, same file names
        again = coordinator.savepoint_now(1, SavepointTarget(SavepointFolder(str(tmp_path / "sp"))))
    finally:
        coordinator.shutdown()
    assert _tree(tmp_path / "sp") == before, "a completed savepoint is never overwritten nor deleted"
    assert again.result is None and "already holds a completed savepoint" in again.reason
    assert SavepointFolder(str(tmp_path / "sp")).read_metadata().id == first.result.id


def test_each_mapped_savepoint_task_asks_with_its_own_trigger_id():
    from airflow_checkpoint_provider.operators import SavepointOperator

    operator = SavepointOperator(task_id="savepoint", job_name="j", checkpoint_root="/tmp/r")

    def trigger_id(map_index: int) -> str:
        ti = SimpleNamespace(dag_id="d", task_id="savepoint", run_id="manual__1", map_index=map_index)
        return operator.trigger_id({"ti": ti})

    assert len({trigger_id(0), trigger_id(1), trigger_id(-1)}) == 3
    assert trigger_id(-1) == "d.savepoint.manual__1", "an unmapped task keeps the id it always had"
