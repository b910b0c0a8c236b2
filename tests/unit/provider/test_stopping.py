"""The job task's kill watch and the running-job health judgement, over real files and real processes.

Stopping a job under ``dag.test()`` is ``tests/integration/provider/test_stopping.py``; the whole chain under a
real scheduler is in ``tests/system/test_cluster.py`` (a frozen driver, killed) and
``tests/system/test_airflow_scheduler.py`` (a stall whose driver answers the stop).
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import time
from datetime import UTC, datetime
from pathlib import Path

import psutil
import pytest

from airflow_checkpoint_provider.hooks.kill_watch import KillWatch, process_tree_killer
from airflow_checkpoint_provider.triggers.health import RunningJobHealthTrigger, judge_running_job
from spark_checkpoint_runtime.layout import ControlChannel, JobFolder, LeaseFiles, now_ms
from tests.support.helpers import write_checkpoint


def _hold(storage: JobFolder, epoch: int, run_key: str | None, acquired_ms: int | None = None) -> None:
    """A lease grant as a running job writes it."""
    grant = {"epoch": epoch, "run_id": f"run-{epoch}", "run_key": run_key, "acquired_ms": acquired_ms or now_ms()}
    assert LeaseFiles(storage).create(epoch, {**grant, "host": "h", "pid": 1})


def test_the_kill_watch_kills_a_frozen_process_tree_and_reports_it(tmp_path: Path):
    storage = JobFolder(str(tmp_path), "frozen")
    control = ControlChannel(storage)
    # A stand-in for spark-submit with a driver under it, both frozen: SIGKILL still ends them.
    parent = subprocess.Popen(["bash", "-c", "sleep 300 & wait"], start_new_session=True)
    try:
        wait = time.monotonic() + 10
        while not psutil.Process(parent.pid).children() and time.monotonic() < wait:
            time.sleep(0.05)
        tree = [psutil.Process(parent.pid), *psutil.Process(parent.pid).children(recursive=True)]
        assert len(tree) == 2
        for process in tree:
            process.send_signal(signal.SIGSTOP)
        with KillWatch(control, "frozen-key", process_tree_killer(lambda: parent.pid), interval=0.2) as watch:
            time.sleep(0.5)
            assert parent.poll() is None, "no kill request yet: nothing happens"
            control.request_kill("frozen-key", "checkpoints stalled")
            parent.wait(timeout=10)
        assert watch.reason == "checkpoints stalled"
        assert parent.returncode == -signal.SIGKILL, "its exit status is left to its parent"
        assert not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in tree)
        report = control.run_report("frozen-key")
        assert report["status"] == "killed" and report["error"] == "killed by request: checkpoints stalled"
    finally:
        if parent.poll() is None:
            parent.kill()


@pytest.mark.parametrize("how", ["released", "reported", "taken over"])
def test_the_health_judgement_follows_one_run_until_it_ends(tmp_path: Path, how: str):
    storage = JobFolder(str(tmp_path), "job")
    lease = LeaseFiles(storage)
    watch_start = now_ms()
    _hold(storage, 1, "old-key", acquired_ms=watch_start - 60_000)  # a run from before the watch: not this one
    now = time.time()
    assert judge_running_job(storage, watch_start, 30, now).state == "waiting"
    lease.release(1)
    _hold(storage, 2, "new-key", acquired_ms=watch_start + 1000)
    health = judge_running_job(storage, watch_start, 30, watch_start / 1000 + 10)
    assert (health.state, health.details["epoch"], health.details["checkpoint_id"]) == ("running", 2, None)
    stalled = judge_running_job(storage, watch_start, 30, watch_start / 1000 + 40)
    assert stalled.state == "stalled"
    assert "made no progress for 39.0s (since it started, with no checkpoint yet)" in stalled.message
    write_checkpoint(storage, 1, ["state/0/0/1.delta"], completion_ms=watch_start + 35_000)
    health = judge_running_job(storage, watch_start, 30, watch_start / 1000 + 40, epoch=2)
    assert (health.state, health.details["checkpoint_id"]) == ("running", 1)
    stalled = judge_running_job(storage, watch_start, 30, watch_start / 1000 + 70, epoch=2)
    assert stalled.state == "stalled" and "(since chk-1 completed)" in stalled.message
    if how == "released":
        lease.release(2)
    elif how == "reported":  # killed: its task reported for it, the lease was never let go
        ControlChannel(storage).write_run_report("new-key", {"status": "killed"})
    else:
        _hold(storage, 3, "restore-key")
    ended = judge_running_job(storage, watch_start, 30, watch_start / 1000 + 70, epoch=2)
    assert ended.state == "ended" and ended.details["epoch"] == 2, ended
    # The trigger's event says "ended" whatever the run's own status was (killed, cancelled, ...).
    trigger = RunningJobHealthTrigger(
        job_name="job",
        checkpoint_root=str(tmp_path),
        started_after_ms=watch_start,
        window_s=30,
        start_timeout_s=60,
        epoch=2,  # as the sensor hands it over after its first look
    )

    async def first_event():
        async for event in trigger.run():
            return event.payload

    event = asyncio.run(first_event())
    assert event["status"] == "ended" and event["epoch"] == 2, event
    assert (
        event["run_status"] == {"released": "released the job", "reported": "killed", "taken over": "taken over"}[how]
    )


def test_a_watch_that_forgot_its_run_still_follows_the_first_run_since_it_began(tmp_path: Path):
    """Reschedule mode builds a new sensor for every poke, and a restarted triggerer rebuilds the trigger from
    its arguments: the pinned epoch is gone. The run watched is still the first since the watch began, so a
    restore run that took the job after the watched one was taken over is not mistaken for it."""
    from airflow_checkpoint_provider.sensors import RunningJobHealthSensor

    storage = JobFolder(str(tmp_path), "job")
    watch_start = now_ms()
    _hold(storage, 1, "before", acquired_ms=watch_start - 60_000)  # from before the watch
    _hold(storage, 2, "watched", acquired_ms=watch_start + 1_000)
    _hold(storage, 3, "restore", acquired_ms=watch_start + 5_000)  # took the job over from run 2

    def poke_once() -> object:
        sensor = RunningJobHealthSensor(  # a fresh instance, as each rescheduled poke gets
            task_id="watch",
            job_name="job",
            checkpoint_root=str(tmp_path),
            started_after=datetime.fromtimestamp(watch_start / 1000, UTC).isoformat(),
            checkpoint_interval="10s",
            deferrable=False,
            mode="reschedule",
        )
        return sensor.poke({})

    result = poke_once()
    assert result.is_done and result.xcom_value["epoch"] == 2, result.xcom_value
    assert result.xcom_value["run_status"] == "taken over"
    ended = judge_running_job(storage, watch_start, 30, time.time())
    assert (ended.state, ended.details["run_id"]) == ("ended", "run-2")
    # Before the watch began nothing counted; with only run 1, the watch still waits.
    only_old = JobFolder(str(tmp_path), "other")
    _hold(only_old, 1, "before", acquired_ms=watch_start - 60_000)
    assert judge_running_job(only_old, watch_start, 30, time.time()).state == "waiting"
