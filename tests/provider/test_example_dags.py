"""Every example DAG runs green under dag.test() (real Airflow, local Spark, real files)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import Landing, completed_checkpoints, published_rows
from tests.provider.conftest import load_dag, task_states, xcom

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def test_scheduled_streaming(tmp_path: Path, landing: Landing):
    landing.add_files(3)
    conf = {
        "job_name": "counts",
        "checkpoint_root": str(tmp_path / "root"),
        "landing": str(landing.path),
        "output": str(tmp_path / "out"),
        "num_retained": 2,
    }
    run = load_dag("scheduled_streaming").test(run_conf=conf)
    assert set(task_states(run).values()) == {"success"}, task_states(run)
    job = xcom(run, "run_job")
    assert job["rows"] == 30 and job["status"] == "finished"
    assert xcom(run, "confirm_checkpoint")["checkpoint_id"] == job["checkpoint_id"]
    assert len(completed_checkpoints(tmp_path / "root", "counts")) <= 2
    largest: dict[str, int] = {}
    for row in published_rows(tmp_path / "out"):
        largest[row["key"]] = max(largest.get(row["key"], 0), row["count"])
    assert largest == landing.counts_by_key()


@pytest.mark.parametrize(("max_age", "restored"), [("10min", False), ("1ms", True)])
def test_restore_automation(tmp_path: Path, landing: Landing, max_age: str, restored: bool):
    landing.add_files(8)
    conf = {
        "job_name": "stream",
        "checkpoint_root": str(tmp_path / "root"),
        "landing": str(landing.path),
        "output": str(tmp_path / "out"),
        "max_duration": "12s",
        "checkpoint_interval": "1s",
        "max_age": max_age,
    }
    run = load_dag("restore_automation").test(run_conf=conf)
    states = task_states(run)
    assert str(run.state) == "success", states
    if restored:  # checkpoints "stalled" against a 1ms window: the health check fails, restore runs
        assert states == {"run_job": "success", "check_health": "failed", "restore_from_latest": "success"}
        assert xcom(run, "restore_from_latest")["restored_from"]["id"] == xcom(run, "run_job")["checkpoint_id"]
    else:
        assert states == {"run_job": "success", "check_health": "success", "restore_from_latest": "skipped"}
    ids = sorted(row["id"] for row in published_rows(tmp_path / "out"))
    assert len(ids) == len(set(ids)), "no row published twice"
