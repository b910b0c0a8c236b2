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


def test_completed_after_refuses_what_is_not_a_moment():
    from airflow.sdk.exceptions import AirflowException

    from airflow_checkpoint_provider.sensors.checkpoint import parse_instant_ms

    assert parse_instant_ms("2026-01-01 00:00:00+00:00") == parse_instant_ms("2026-01-01T00:00:00") == 1767225600000
    assert parse_instant_ms("") is None and parse_instant_ms(None) is None
    with pytest.raises(AirflowException, match="is not a date and time"):
        parse_instant_ms("yesterday")


def test_checkpoint_trigger_fires_only_for_a_checkpoint_completed_after_the_moment(tmp_path: Path):
    """The trigger as the triggerer runs it: in an event loop, storage read in threads, real files."""
    import asyncio

    from airflow_checkpoint_provider.triggers.checkpoint import CheckpointTrigger

    storage = JobFolder(str(tmp_path), "orders")
    write_checkpoint(storage, 3, [], completion_ms=now_ms() - 60_000)
    trigger = CheckpointTrigger(
        job_name="orders", checkpoint_root=str(tmp_path), completed_after_ms=now_ms() - 1000, poke_interval=0.2
    )
    _, kwargs = trigger.serialize()
    assert kwargs["completed_after_ms"] == trigger.completed_after_ms  # survives the trip to the triggerer

    async def first_event():
        events = trigger.run()
        waiting = asyncio.ensure_future(anext(events))
        await asyncio.sleep(1)
        assert not waiting.done(), "checkpoint 3 completed before the moment: it does not count"
        await asyncio.to_thread(write_checkpoint, storage, 4, [])
        return await asyncio.wait_for(waiting, 10)

    event = asyncio.run(first_event())
    assert event.payload["status"] == "success" and event.payload["checkpoint"]["checkpoint_id"] == 4


def test_commit_watch_passes_over_an_abandoned_checkpoint_and_waits_at_one_in_progress(tmp_path: Path):
    """``CheckpointCommitTrigger``'s scan: one event per commit, none lost behind a folder a crash left."""
    import pickle

    from airflow_checkpoint_provider.triggers.commits import new_commits
    from spark_checkpoint_runtime.layout import DamagedCheckpoint
    from tests.support.helpers import checkpoint_metadata

    storage = JobFolder(str(tmp_path), "orders")

    def complete(checkpoint_id: int, published: bool) -> None:
        meta = checkpoint_metadata(checkpoint_id, [], job="orders")
        if published:  # its completion published the output staged by its batch
            meta.staged_output = {"checkpoint_id": checkpoint_id, "run_id": "r1", "batches": [checkpoint_id * 10]}
        storage.checkpoints.write_metadata(meta)

    complete(1, True)
    complete(2, True)
    (tmp_path / "orders" / "chk-3").mkdir()  # a crashed run's folder, never completed
    complete(4, True)
    complete(5, False)  # a checkpoint that published nothing (no new rows)
    (tmp_path / "orders" / "chk-6").mkdir()  # in progress: nothing completed after it yet
    commits, seen = new_commits(storage, 1)
    assert seen == 5, "passed over chk-3 (chk-4 completed after it), stopped at chk-6"
    assert [(c["checkpoint_id"], c["batches"]) for c in commits] == [(2, [20]), (4, [40])]
    assert new_commits(storage, seen) == ([], 5), "nothing new: the same place"
    complete(6, True)
    assert [c["checkpoint_id"] for c in new_commits(storage, seen)[0]] == [6], "picked up once it completed"
    # The pages' reader process sends these across processes.
    damaged = pickle.loads(pickle.dumps(DamagedCheckpoint("chk-3", "no _metadata")))
    assert (damaged.location, damaged.reason) == ("chk-3", "no _metadata")
