"""Storage that fails part-way (``faulty://``, real files behind an fsspec filesystem that fails on purpose).

A failed checkpoint never counts as complete; failures count against ``--tolerable-failed-checkpoints`` and
past it the job fails with the reason; whatever happens, the next run restores and the output holds every
row exactly once.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from spark_checkpoint_runtime.errors import JobFailed
from spark_checkpoint_runtime.layout import JobFolder
from tests.support import figures
from tests.support.faulty_fs import FaultPlan, install
from tests.support.helpers import Landing, final_counts, published_rows, run_job

pytestmark = pytest.mark.spark


def faulty_root(tmp_path: Path) -> str:
    return f"faulty://{tmp_path / 'root'}"


def assert_exactly_once(tmp_path: Path, landing: Landing) -> None:
    published = Counter(row["id"] for row in published_rows(tmp_path / "out"))
    expected = {row["id"] for row in landing.rows}
    duplicated = sum(n - 1 for n in published.values() if n > 1)
    figures.record_rows(len(expected), len(expected - set(published)), duplicated, "exactly-once")
    assert set(published) == expected and duplicated == 0


def completed_ids(tmp_path: Path, job: str) -> list[int]:
    return [m.id for m in JobFolder(str(tmp_path / "root"), job).checkpoints.completed()]


@pytest.mark.parametrize(
    ("operation", "plan"),
    [
        ("write", FaultPlan(fail={"write": 1}, pass_first={"write": 4})),
        ("rename", FaultPlan(fail={"rename": 1}, pass_first={"rename": 1})),
    ],
)
def test_a_failed_checkpoint_is_tolerated_and_never_complete(spark, tmp_path, landing, operation, plan):
    install(plan)
    landing.add_files(6)
    result = run_job(
        spark, "tolerated", tmp_path, landing, checkpoint_root=faulty_root(tmp_path), tolerable_failed_checkpoints="1"
    )
    figures.add("storage faults injected", plan.injected)
    assert plan.injected == 1, f"the {operation} fault was not reached"
    assert result["status"] == "finished"
    completed = result["checkpoints_completed"]
    # The failed id was skipped: ids increase but one is missing, and no _metadata exists for it.
    failed = sorted(set(range(1, completed[-1] + 1)) - set(completed))
    assert failed, f"expected a gap for the failed checkpoint in {completed}"
    assert not any((tmp_path / "root" / "tolerated" / f"chk-{i}" / "_metadata").exists() for i in failed)
    assert_exactly_once(tmp_path, landing)


def test_failures_past_tolerance_fail_the_job_and_lose_nothing(spark, tmp_path, landing):
    plan = install(FaultPlan(fail={"write": 50}, only=r"/chk-([2-9]|\d\d+)/"))  # checkpoint 1 succeeds
    landing.add_files(6)
    with pytest.raises(JobFailed, match="tolerable"):
        run_job(
            spark,
            "intolerable",
            tmp_path,
            landing,
            checkpoint_root=faulty_root(tmp_path),
            tolerable_failed_checkpoints="1",
        )
    figures.add("storage faults injected", plan.injected)
    before = completed_ids(tmp_path, "intolerable")
    assert before, "the checkpoint before the faults stays"
    install(FaultPlan())  # storage is healthy again: the next run restores and finishes
    landing.add_files(2)
    result = run_job(spark, "intolerable", tmp_path, landing, checkpoint_root=faulty_root(tmp_path))
    assert result["restored_from"]["id"] == before[-1]
    assert_exactly_once(tmp_path, landing)


def test_failed_retention_deletes_leave_garbage_not_damage(spark, tmp_path, landing):
    plan = install(FaultPlan(fail={"delete": 3}))
    landing.add_files(6)
    stateful = {"pipeline": "examples.pipelines:running_counts", "output_mode": "update", "num_retained": "1"}
    result = run_job(spark, "undeletable", tmp_path, landing, checkpoint_root=faulty_root(tmp_path), **stateful)
    figures.add("storage faults injected", plan.injected)
    assert plan.injected == 3 and result["status"] == "finished"
    storage = JobFolder(str(tmp_path / "root"), "undeletable")
    latest = storage.checkpoints.latest_valid()
    assert latest is not None and latest.metadata.id == result["checkpoint_id"]
    landing.add_files(1)
    again = run_job(spark, "undeletable", tmp_path, landing, checkpoint_root=faulty_root(tmp_path), **stateful)
    assert again["restored_from"]["id"] == result["checkpoint_id"]
    assert [p.name for p in (tmp_path / "root" / "undeletable").glob("chk-*")] == [f"chk-{again['checkpoint_id']}"]
    assert final_counts(tmp_path / "out") == landing.counts_by_key()


def test_slow_writes_past_the_timeout_fail_checkpoints_with_the_reason(spark, tmp_path, landing):
    plan = install(FaultPlan(slow_write_seconds=1.5, only="/shared/"))
    landing.add_files(3)
    stateful = {"pipeline": "examples.pipelines:running_counts", "output_mode": "update"}
    with pytest.raises(JobFailed, match=r"expired after 1\.0s.*exceed --tolerable-failed-checkpoints 0"):
        run_job(
            spark, "slow", tmp_path, landing, checkpoint_root=faulty_root(tmp_path), checkpoint_timeout="1s", **stateful
        )
    figures.add("storage faults injected", plan.injected)
    assert completed_ids(tmp_path, "slow") == [], "an expired checkpoint never completes"
    install(FaultPlan())
    result = run_job(spark, "slow", tmp_path, landing, checkpoint_root=faulty_root(tmp_path), **stateful)
    assert result["restored_from"] is None and result["status"] == "finished"
    assert final_counts(tmp_path / "out") == landing.counts_by_key(), (
        "nothing was published before a checkpoint completed"
    )
