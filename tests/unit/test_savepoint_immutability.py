"""A completed savepoint is immutable, and every caller gets its own trigger id (issue 28, hole 7).

A real coordinator takes snapshots of a working folder laid out as Spark writes it (no Spark needed): a
savepoint asked into a folder that already holds a completed savepoint fails, and that savepoint is left
byte for byte as it was (before, its files were overwritten, then the whole folder was deleted).
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from spark_checkpoint_runtime.layout import JobFolder, SavepointFolder
from spark_checkpoint_runtime.snapshot_targets import SavepointTarget
from tests.support.coordinator import running_coordinator, spark_like_working_folder
from tests.support.helpers import tree_state


def test_a_savepoint_into_a_completed_savepoints_folder_fails_and_leaves_it_untouched(tmp_path: Path):
    storage = JobFolder(str(tmp_path / "root"), "j")
    working = spark_like_working_folder(tmp_path, batch=0)
    with running_coordinator(storage, working) as coordinator:
        first = coordinator.savepoint_now(0, SavepointTarget(SavepointFolder(str(tmp_path / "sp"))))
        assert first.result is not None, first.reason
        before = tree_state(tmp_path / "sp")
        spark_like_working_folder(tmp_path, batch=1)  # a later batch: other state, same file names
        again = coordinator.savepoint_now(1, SavepointTarget(SavepointFolder(str(tmp_path / "sp"))))
    assert tree_state(tmp_path / "sp") == before, "a completed savepoint is never overwritten nor deleted"
    assert again.result is None and "already holds a completed savepoint" in again.reason
    assert SavepointFolder(str(tmp_path / "sp")).read_metadata().id == first.result.id


def test_each_mapped_savepoint_task_and_each_try_asks_with_its_own_trigger_id():
    from airflow_checkpoint_provider.operators import SavepointOperator

    operator = SavepointOperator(task_id="savepoint", job_name="j", checkpoint_root="/tmp/r")

    def trigger_id(map_index: int, try_number: int = 1) -> str:
        ti = SimpleNamespace(
            dag_id="d", task_id="savepoint", run_id="manual__1", map_index=map_index, try_number=try_number
        )
        return operator.trigger_id({"ti": ti})

    assert len({trigger_id(0), trigger_id(1), trigger_id(-1), trigger_id(-1, 2), trigger_id(0, 2)}) == 5
    assert trigger_id(-1) == "d.savepoint.manual__1.try1"
