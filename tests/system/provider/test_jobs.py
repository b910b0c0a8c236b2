"""The provider end to end: real Airflow (dag.test on SQLite), real spark-submit, real files."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import urllib.request
from pathlib import Path

import psutil
import pytest

from tests.support.airflow_env import PLANTED_SECRET, Later, load_dag, task_states, timed_on_kill, xcom
from tests.support.helpers import Landing, completed_checkpoints, final_counts, job_args, published_rows, start_module

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def _conf(tmp_path: Path, landing: Landing) -> dict[str, str]:
    return {"root": str(tmp_path / "root"), "landing": str(landing.path), "output": str(tmp_path / "out")}


def _submit_line(output: str, task_id: str) -> str:
    """The spark-submit command SparkSubmitHook logged for ``task_id`` (its run key names the task)."""
    lines = [line for line in output.splitlines() if "Spark-Submit cmd" in line and f".{task_id}." in line]
    assert len(lines) == 1, f"{len(lines)} spark-submit commands logged for {task_id}"
    return lines[0]


def _landed_ids(landing: Landing) -> list[int]:
    return sorted(json.loads(line)["id"] for f in landing.path.glob("*.json") for line in f.read_text().splitlines())


def test_two_available_now_runs_a_deferrable_sensor_and_retention(tmp_path: Path, landing: Landing, capfd):
    landing.add_files(4)
    run = load_dag("back_to_back").test(run_conf=_conf(tmp_path, landing))
    output = capfd.readouterr()
    states = task_states(run)
    assert set(states.values()) == {"success"}, states
    first, second = xcom(run, "first_run"), xcom(run, "second_run")
    assert second["restored_from"]["id"] == first["checkpoint_id"]
    assert first["rows"] == 40 and second["rows"] == 30
    assert xcom(run, "wait_for_first_checkpoint")["checkpoint_id"] == first["checkpoint_id"]
    # checkpoint_id and checkpoint_path have XCom keys of their own (what run.output["checkpoint_id"] pulls).
    assert xcom(run, "first_run", "checkpoint_id") == first["checkpoint_id"]
    assert xcom(run, "first_run", "checkpoint_path") == first["checkpoint_path"]
    assert xcom(run, "wait_for_first_checkpoint", "checkpoint_id") == first["checkpoint_id"]
    # The task's "Checkpoint history" link: the job folder's URL, recorded as the task starts.
    assert xcom(run, "first_run", "_link_CheckpointHistoryLink") == f"file://{tmp_path}/root/orders"
    assert not xcom(run, "first_run", "_link_SparkUILink"), "spark.ui.enabled=false: no Spark UI to link"
    # OpenLineage: the task is the Spark job's parent, in the confs spark-submit got (as SparkSubmitOperator does).
    assert "spark.openlineage.parentJobName=back_to_back.first_run" in _submit_line(
        output.out + output.err, "first_run"
    )
    assert "spark.openlineage.parentJobName" not in _submit_line(output.out + output.err, "second_run")
    assert first["checkpoints_completed_count"] == len(first["checkpoints_completed"]) >= 1
    # Exactly once: every key's largest running count equals its number of input rows.
    expected: dict[str, int] = {}
    for f in landing.path.glob("*.json"):
        for line in f.read_text().splitlines():
            key = json.loads(line)["key"]
            expected[key] = expected.get(key, 0) + 1
    largest = final_counts(tmp_path / "out")
    assert largest == expected
    report = xcom(run, "retention")
    remaining = completed_checkpoints(tmp_path / "root", "orders")
    # XCom holds counts only; the full report (every path) is stored beside the job and named in it.
    assert report["kept"]["checkpoints"] == len(remaining) == 2 and report["deleted"]["checkpoints"] == 0
    full = json.loads(Path(report["report_path"].removeprefix("file://")).read_text())
    assert full["kept"]["checkpoints"] == remaining
    assert sorted(p.name for p in (tmp_path / "root" / "orders").glob("chk-*")) == [f"chk-{i}" for i in remaining]
    # The storage connection's options (with a planted secret) reached the runtime but nowhere visible.
    assert "spark-submit" in output.out + output.err and "planted_secret" in output.out + output.err
    assert PLANTED_SECRET not in output.out + output.err
    for path in (tmp_path / "root").rglob("*"):
        assert not path.is_file() or PLANTED_SECRET.encode() not in path.read_bytes(), path
    assert PLANTED_SECRET not in json.dumps([first, second, report])


def test_deferrable_sensor_waits_in_the_trigger_for_a_new_checkpoint(tmp_path: Path, landing: Landing):
    landing.add_files(2)
    root = tmp_path / "root"
    args = job_args("orders", root, tmp_path / "work", landing, sink=f"parquet:{tmp_path / 'out'}")
    # The job starts only once the sensor has deferred, so its checkpoint can only arrive through the trigger.
    job = Later(_sensor_deferred, lambda: start_module(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    job.start()
    run = load_dag("deferred_wait").test(run_conf={**_conf(tmp_path, landing), "after": 0})
    assert job.error is None, job.error
    assert task_states(run) == {"wait": "success"}
    found = xcom(run, "wait")
    assert found["checkpoint_id"] >= 1 and found["checkpoint_path"].startswith("file://")


def _sensor_deferred() -> bool:
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session

    # dag.test runs the trigger inline right after the task defers; the deferral leaves next_method set.
    with create_session() as session:
        query = session.query(TaskInstance).filter(TaskInstance.dag_id == "deferred_wait")
        return query.filter(TaskInstance.next_method == "execute_complete").count() > 0


def _kill_job_processes(root: Path) -> int:
    """SIGKILL spark-submit's JVM and the Python driver of the job writing under ``root``."""
    victims = [
        p
        for p in psutil.process_iter(["cmdline"])
        if str(root) in " ".join(p.info["cmdline"] or []) and p.pid != os.getpid()
    ]
    for process in victims:
        process.send_signal(signal.SIGKILL)
    return len(victims)


def test_task_killed_mid_job_is_retried_and_restores_from_latest(tmp_path: Path, landing: Landing):
    landing.add_files(40)
    root = tmp_path / "root"
    killer = Later(lambda: len(completed_checkpoints(root, "orders")) >= 2, lambda: _kill_job_processes(root))
    killer.start()
    run = load_dag("killed_and_retried").test(run_conf=_conf(tmp_path, landing))
    assert killer.error is None, killer.error
    states = task_states(run)
    assert states == {"stream": "success", "drain": "success"}, states
    stream = xcom(run, "stream")
    assert stream["restored_from"] is not None, "the retry restored from a checkpoint of the killed try"
    assert stream["run_key"].endswith("try2")
    ids = sorted(row["id"] for row in published_rows(tmp_path / "out"))
    assert ids == _landed_ids(landing), "nothing lost, nothing twice"


def test_killed_task_stops_the_job_gracefully_through_on_kill(tmp_path: Path, landing: Landing, monkeypatch):
    """SIGTERM to the task process (what Airflow 3's supervisor sends, SIGKILL following about 5 s later) runs
    the operator's on_kill through the task runner's handler: it asks for the stop and returns at once; the job
    finishes its batch, checkpoints, commits and exits 0, and spark-submit does not outlive the task."""
    landing.add_files(6)
    root = tmp_path / "root"
    took = timed_on_kill(monkeypatch)

    spark_ui: list[tuple[str, str]] = []

    def terminate_task() -> None:
        # First the running driver's Spark UI, on the port the operator pinned for the task's link.
        command = next(
            " ".join(p.info["cmdline"])
            for p in psutil.process_iter(["cmdline"])
            if "spark.ui.port=" in " ".join(p.info["cmdline"] or []) and str(root) in " ".join(p.info["cmdline"])
        )
        port = re.search(r"spark\.ui\.port=(\d+)", command).group(1)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/jobs/", timeout=10) as page:
            spark_ui.append((port, page.read().decode(errors="replace")))
        handler = signal.getsignal(signal.SIGTERM)
        assert getattr(handler, "__name__", "") == "_on_term", f"the task runner's handler is not installed: {handler}"
        os.kill(os.getpid(), signal.SIGTERM)

    killer = Later(lambda: len(completed_checkpoints(root, "orders")) >= 1, terminate_task)
    killer.start()
    run = load_dag("graceful_stop").test(run_conf=_conf(tmp_path, landing))
    assert killer.error is None, killer.error
    requests = sorted(p.name for p in (root / "orders" / "_control" / "requests").glob("*.json"))
    assert len(requests) == 1 and requests[0].startswith("stop-graceful_stop.stream."), requests
    assert task_states(run) == {"stream": "success"}
    port, page = spark_ui[0]
    assert "Spark Jobs" in page, page[:500]
    assert xcom(run, "stream", "_link_SparkUILink") == f"http://{socket.gethostname()}:{port}"
    result = xcom(run, "stream")
    assert result["status"] == "cancelled"
    assert result["checkpoint_id"] == completed_checkpoints(root, "orders")[-1]
    assert not list((tmp_path / "out" / "_staging").rglob("part-*")), "everything processed was committed"
    assert took and took[0] < 2.0, f"on_kill must return at once, took {took}"
    alive = [
        p.info["pid"] for p in psutil.process_iter(["pid", "cmdline"]) if str(root) in " ".join(p.info["cmdline"] or [])
    ]
    assert not alive, f"spark-submit outlived the task: {alive}"


def test_allow_fresh_start_never_starts_fresh_over_damaged_checkpoints(tmp_path: Path, landing: Landing, capfd):
    """Damaged checkpoints are not "no checkpoint": the run fails (the runtime exits 3) and names each one."""
    from spark_checkpoint_runtime.layout import JobFolder
    from tests.support.helpers import write_checkpoint

    storage = JobFolder(str(tmp_path / "root"), "orders")
    for checkpoint_id in (1, 2):
        write_checkpoint(storage, checkpoint_id, ["state"])
    (tmp_path / "root" / "orders" / "shared" / "r1" / "state").unlink()
    landing.add_files(1)
    run = load_dag("fresh_start_over_damage").test(run_conf=_conf(tmp_path, landing))
    output = capfd.readouterr()
    tries = {ti.task_id: (str(ti.state), ti.try_number) for ti in run.get_task_instances()}
    assert tries == {"restore": ("failed", 1)}, "a refused restore is definitive: no retry is spent on it"
    text = output.out + output.err
    assert "failed (exit 3)" in text and "has no valid checkpoint (chk-2: missing" in text and "chk-1: missing" in text
    assert not (tmp_path / "out").exists(), "nothing was published"
