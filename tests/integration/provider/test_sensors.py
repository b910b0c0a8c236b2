"""CheckpointSensor (poke, reschedule, timeout, soft_fail) and CheckpointHealthSensor under dag.test()
with a real Airflow on SQLite, over checkpoints written to real files by the format module."""

from __future__ import annotations

import os
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest

from spark_checkpoint_runtime.layout import JobFolder, now_ms
from tests.support.airflow_env import load_dag, task_states, xcom
from tests.support.helpers import VENV_BIN, write_checkpoint


def test_airflow_providers_list_shows_the_provider():
    result = subprocess.run(
        [str(VENV_BIN / "airflow"), "providers", "list"], capture_output=True, text=True, timeout=300, env=os.environ
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "airflow-checkpoint-provider" in result.stdout


@pytest.mark.parametrize("mode", ["poke", "reschedule"])
def test_sensor_returns_the_checkpoint_it_found(tmp_path: Path, mode):
    storage = JobFolder(str(tmp_path), "orders")
    write_checkpoint(storage, 4, ["state/0/0/1.delta"])
    write_checkpoint(storage, 5, ["state/0/0/1.delta"])
    run = load_dag(f"sensor_found_{mode}").test(run_conf={"root": str(tmp_path)})
    assert task_states(run) == {"wait": "success"}
    found = xcom(run, "wait")
    assert found["checkpoint_id"] == 5 and found["checkpoint_path"].endswith("/orders/chk-5")


@pytest.mark.parametrize(("soft_fail", "state"), [(False, "failed"), (True, "skipped")])
def test_sensor_timeout_fails_or_soft_fails(tmp_path: Path, soft_fail, state):
    write_checkpoint(JobFolder(str(tmp_path), "orders"), 1, [])
    run = load_dag(f"sensor_timeout_{soft_fail}").test(run_conf={"root": str(tmp_path)})
    assert task_states(run) == {"wait": state}


def test_health_sensor_fails_on_stalled_checkpoints_and_passes_on_fresh_ones(tmp_path: Path):
    write_checkpoint(JobFolder(str(tmp_path), "stalled"), 3, [], completion_ms=now_ms() - 30 * 60 * 1000)
    write_checkpoint(JobFolder(str(tmp_path), "healthy"), 3, [])
    run = load_dag("health_checks").test(run_conf={"root": str(tmp_path)})
    assert task_states(run) == {"stalled": "failed", "healthy": "success", "tight_max_age": "failed"}
    assert xcom(run, "healthy")["window_seconds"] == 1200


# dag.test runs a trigger inline without its timeout, so the deferrable sensor is only run where it finds one.
@pytest.mark.parametrize(
    ("offset_ms", "deferrable", "state"), [(-1000, False, "success"), (-1000, True, "success"), (1000, False, "failed")]
)
def test_sensor_counts_only_a_checkpoint_completed_after_the_given_moment(tmp_path: Path, offset_ms, deferrable, state):
    completed = now_ms() - 60_000
    write_checkpoint(JobFolder(str(tmp_path), "orders"), 7, [], completion_ms=completed)
    after = datetime.fromtimestamp((completed + offset_ms) / 1000, tz=UTC).isoformat()
    dag_id = f"sensor_completed_after_{deferrable}".lower()
    run = load_dag(dag_id).test(run_conf={"root": str(tmp_path), "after": after})
    assert task_states(run) == {"wait": state}
    if state == "success":
        assert xcom(run, "wait")["checkpoint_id"] == 7
