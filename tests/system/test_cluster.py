"""The runtime on a real Spark standalone cluster: a Master and two Workers in their own JVMs on loopback
(``scripts/spark-cluster.sh``), the driver in client deploy mode, executors on the workers.

The working folder is a local path every executor can reach (they share this machine: it stands in for a
shared filesystem). A crash chain (running counts, exact and published once) SIGKILLs the driver's process
group mid-stream, as on local Spark; one run loses an executor JVM mid-stream (Spark retries its
tasks) and then a whole Worker (the job goes on with the other), and must keep checkpointing and stay
exact. Under a real Airflow, ``restore_automation`` watches its job on the cluster, kills it when its frozen
driver stalls, and restores it.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest

from spark_checkpoint_runtime.layout import ControlChannel, JobFolder, LeaseFiles, key_from
from tests.support.helpers import (
    REPO,
    Landing,
    batches_published_twice,
    counts_published_twice,
    final_counts,
    job_args,
    spark_submit,
    wait_for,
)
from tests.support.local_airflow import LocalAirflow, free_port
from tests.support.local_cluster import standalone_cluster
from tests.system.test_chaos import RANDOM, SEED, _assert_exactly_once, run_chain

# One pytest worker runs this module's tests one after another: two clusters, an Airflow and a driver on two
# cores at once starved the executor-loss and frozen-driver tests in CI; the other worker goes on with the rest.
pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.xdist_group("cluster")]


class Cluster(str):
    """The master URL of a running standalone cluster, with the folder that holds its state."""

    state: Path

    def processes(self, pattern: str) -> list[psutil.Process]:
        """This cluster's JVMs whose command line has ``pattern`` (another test's cluster may be running too)."""
        found = []
        for process in psutil.process_iter(["cmdline"]):
            command = " ".join(process.info["cmdline"] or [])
            if pattern not in command:
                continue
            try:
                mine = str(self.state) in command or process.cwd().startswith(str(self.state))
            except psutil.Error:
                mine = False
            if mine:
                found.append(process)
        # A JVM forking a Python worker leaves, until exec, a child with the JVM's command line: not a JVM of ours.
        pids = {process.pid for process in found}
        return [process for process in found if _parent_pid(process) not in pids]


def _parent_pid(process: psutil.Process) -> int | None:
    try:
        return process.ppid()
    except psutil.Error:
        return None


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Cluster:
    """A standalone cluster for this module; its master URL."""
    state = tmp_path_factory.mktemp("spark-cluster")
    with standalone_cluster(state) as master:
        assert master.startswith("spark://127.0.0.1:"), master
        running = Cluster(master)
        running.state = state
        yield running
    assert not [p for p in psutil.process_iter(["cmdline"]) if str(state) in " ".join(p.info["cmdline"] or [])]


def test_stateful_counts_exact_and_published_once_through_driver_kills_on_the_cluster(
    cluster: str, tmp_path: Path, landing: Landing
):
    """The driver's process group is SIGKILLed at random, before a checkpoint's _metadata and while it uploads;
    each run restores from the latest checkpoint. Every count is exact and no batch is published twice (the
    stateless pipeline's chains run on local Spark, in test_chaos: on a cluster the difference is where the
    tasks write, which this chain covers)."""
    rng = random.Random(SEED + 41)
    output = run_chain(
        tmp_path,
        landing,
        "cluster-stateful",
        [RANDOM, "before-metadata@1", "upload@2", RANDOM],
        rng,
        master=cluster,
        pipeline="examples.pipelines:running_counts",
        output_mode="update",
    )
    assert final_counts(output) == landing.counts_by_key(), f"running counts differ (seed {SEED + 41})"
    twice = counts_published_twice(output)
    assert not twice, f"{len(twice)} running counts published twice (seed {SEED + 41}): {twice[:5]}"
    republished = batches_published_twice(output)
    assert not republished, f"batches under two checkpoints (seed {SEED + 41}): {republished}"


PIPELINES = {
    "stateless": {"pipeline": "examples.pipelines:events", "output_mode": "append"},
    "stateful": {"pipeline": "examples.pipelines:running_counts", "output_mode": "update"},
}


# Rows in the one file whose parsing an executor is killed in the middle of: a few seconds of one task's work.
BIG_FILE_ROWS = 400_000


def _executor_running_a_task(
    ui_port: int, executors: Callable[[], list[psutil.Process]], timeout: float, job: subprocess.Popen
) -> psutil.Process | None:
    """The executor JVM that Spark's own status API (the driver's UI on ``ui_port``) reports running a task of
    the job, polled until ``timeout``; None when no task was seen running (the file went through between two
    polls). Spark's word, not a CPU sample: a JVM busy compiling or collecting garbage looked like one at work."""
    base = f"http://127.0.0.1:{ui_port}/api/v1/applications"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and job.poll() is None:
        try:
            with urllib.request.urlopen(base, timeout=5) as answer:
                app = json.load(answer)[0]["id"]
            with urllib.request.urlopen(f"{base}/{app}/executors", timeout=5) as answer:
                active = {e["id"] for e in json.load(answer) if e["id"] != "driver" and e["activeTasks"] > 0}
        except (OSError, ValueError, LookupError):
            active = set()  # the UI is not up yet, or the driver is between two answers: ask again
        for process in executors():
            try:
                command = process.cmdline()
            except psutil.Error:
                continue
            if "--executor-id" in command and command[command.index("--executor-id") + 1] in active:
                return process
        time.sleep(0.1)
    return None


def _cluster_pids(state: Path) -> list[int]:
    return [int(pidfile.read_text()) for pidfile in state.glob("*.pid")]


@pytest.mark.parametrize("kind", sorted(PIPELINES))
def test_output_stays_exact_when_an_executor_dies_mid_batch_and_then_a_worker(
    cluster: Cluster, kind: str, tmp_path: Path, landing: Landing
):
    """On a cluster of its own (a Worker dies here), beside the module's: an executor JVM is SIGKILLed while
    a task of the job runs on it (Spark logs the lost task and retries it), then a whole Worker; the job keeps
    checkpointing on what is left, and the output stays exact (stateless: every row once; stateful: every
    count). Stopping this cluster leaves the module's running."""
    state = tmp_path / "own-cluster"
    root, output, log = tmp_path / "root", tmp_path / "out", tmp_path / "job.log"
    storage = JobFolder(str(root), f"cluster-{kind}")
    landing.add_files(3)
    settings = {"sink": f"parquet:{output}", "trigger": "continuous", "batch_interval": "200ms"}
    args = job_args(f"cluster-{kind}", root, tmp_path / "work", landing, **settings, **PIPELINES[kind])
    with standalone_cluster(state) as master:
        own = Cluster(master)
        own.state = state
        status = subprocess.run(
            ["bash", str(REPO / "scripts" / "spark-cluster.sh"), "status"],
            env={**os.environ, "SPARK_CLUSTER_DIR": str(state)},
            capture_output=True,
            text=True,
        )
        assert status.returncode == 0 and master in status.stdout and "worker-2" in status.stdout, status.stdout
        pids = _cluster_pids(state)
        ui_port = free_port()
        job = spark_submit(args, log, master=master, conf={"spark.ui.enabled": "true", "spark.ui.port": str(ui_port)})

        def checkpoints() -> int:
            return max((m.id for m in storage.checkpoints.completed()), default=0)

        def progressed(after: int, what: str) -> int:
            def more() -> bool:
                landing.add_file()
                time.sleep(1)
                return checkpoints() >= after + 2

            wait_for(more, 300, what, job)
            return checkpoints()

        def lost_tasks() -> int:
            return log.read_text(errors="replace").count("Lost task")

        def lost_executors() -> int:
            return log.read_text(errors="replace").count("Lost executor")

        def two_executors() -> list[psutil.Process]:
            executors = own.processes("CoarseGrainedExecutorBackend")
            return executors if len(executors) == 2 else []

        try:
            seen = progressed(0, "checkpoints on the cluster")
            # Kill an executor while it runs a task: Spark logs "Lost task ... ExecutorLostFailure" and retries
            # it. Small batches take milliseconds, so a kill on a timer mostly fell between tasks under load: one
            # big file keeps a task parsing for seconds, and the executor Spark reports running it is killed.
            for _ in range(4):
                wait_for(two_executors, 120, "both executors (one relaunched after a kill)", job)
                tasks = lost_tasks()
                landing.add_file(rows=BIG_FILE_ROWS)
                busy = _executor_running_a_task(ui_port, two_executors, 120, job)
                if busy is None:
                    continue  # the file was parsed before a sample saw it: try again with the next one
                lost = lost_executors()
                busy.send_signal(signal.SIGKILL)
                # Under load the driver may hear of the loss late: wait for it before counting lost tasks.
                deadline = time.monotonic() + 90
                while lost_executors() <= lost and time.monotonic() < deadline and job.poll() is None:
                    time.sleep(0.5)
                time.sleep(3)
                if lost_tasks() > tasks:
                    break
            assert lost_tasks() > 0, "no executor died with a task of the job running"
            seen = progressed(seen, "checkpoints after an executor died")
            worker = own.processes("org.apache.spark.deploy.worker.Worker")[0]
            for process in [worker, *worker.children(recursive=True)]:
                process.send_signal(signal.SIGKILL)  # a whole Worker and its executor gone: the other carries on
            progressed(seen, "checkpoints after a worker died")
            ControlChannel(storage).request("stop-cluster-test", "stop")
            assert job.wait(timeout=180) == 0, log.read_text(errors="replace")[-4000:]
        finally:
            if job.poll() is None:
                os.killpg(job.pid, signal.SIGKILL)
        drain = [a if a != "continuous" else "available-now" for a in args]
        assert spark_submit(drain, log, master=master).wait(timeout=300) == 0, log.read_text(errors="replace")[-4000:]
    assert not [pid for pid in pids if psutil.pid_exists(pid) and psutil.Process(pid).status() != "zombie"], (
        "stop left a JVM of this cluster running"
    )
    assert cluster.processes("org.apache.spark.deploy.worker.Worker"), "stopping one cluster stopped another"
    if kind == "stateless":
        _assert_exactly_once(output, landing)
    else:
        assert final_counts(output) == landing.counts_by_key(), "every event counted once through both losses"


def test_restore_automation_stops_a_frozen_driver_and_restores_the_job(cluster: Cluster, tmp_path: Path):
    """The example DAG under a real Airflow (scheduler, triggerer, DAG processor, API server), its job on the
    cluster: the health watch, beside the running job, sees the checkpoints stall when the driver is frozen
    (SIGSTOP); the stop is not answered, so the job task kills the driver; the DAG restores from the latest
    checkpoint on the cluster and every event is counted exactly once."""
    dags, demo = tmp_path / "dags", tmp_path / "demo"
    dags.mkdir()
    for name in ("restore_automation.py", "example_settings.py"):  # not scheduled_streaming: it runs hourly
        (dags / name).symlink_to(REPO / "dags" / name)
    landing = Landing(demo / "landing")
    landing.add_files(3)
    storage = JobFolder(str(demo / "checkpoints"), "event-counts")
    host, port = cluster.rsplit(":", 1)
    spark = json.dumps({"conn_type": "spark", "host": host, "port": int(port)})
    airflow = LocalAirflow(
        tmp_path / "airflow-home", dags, {"CHECKPOINT_DEMO_HOME": str(demo), "AIRFLOW_CONN_SPARK_DEFAULT": spark}
    )
    frozen: list[psutil.Process] = []
    try:
        airflow.start()
        parsed = "SELECT count(*) FROM dag WHERE dag_id = 'restore_automation'"
        airflow.wait_for(lambda: airflow.query(parsed)[0][0] == 1, 180, "the DAG to be parsed")
        # 60 s, not less: with two pytest workers on two cores a healthy job's checkpoints were once 20 s apart,
        # and the watch rightly judged it stalled before the driver was frozen.
        conf = {"max_age": "60s", "checkpoint_interval": "1s", "stop_timeout": "10s"}
        triggered = airflow.airflow("dags", "trigger", "restore_automation", "--conf", json.dumps(conf))
        assert triggered.returncode == 0, triggered.stderr[-2000:]
        run_id = airflow.wait_for(lambda: airflow.dag_runs("restore_automation"), 60, "the run")[-1][0]
        watching = (
            "SELECT t.classpath FROM task_instance ti JOIN trigger t ON t.id = ti.trigger_id "
            "WHERE ti.dag_id = 'restore_automation' AND ti.run_id = ? AND ti.task_id = 'watch_health'"
        )
        airflow.wait_for(
            lambda: airflow.task_states("restore_automation", run_id).get("first_checkpoint") == "success", 300, "chk"
        )

        # On a busy machine the watch may still be starting when the first checkpoint lands: wait for it to defer
        # (120 s was not enough once, with the soak and the UI tests beside it on two cores).
        def deferred() -> bool:
            watch = airflow.task_states("restore_automation", run_id).get("watch_health")
            assert watch not in ("failed", "success"), f"the health watch ended ({watch}) before the driver froze"
            return bool(airflow.query(watching, run_id))

        airflow.wait_for(deferred, 300, "the health watch to defer")
        assert airflow.query(watching, run_id) == [
            ("airflow_checkpoint_provider.triggers.health.RunningJobHealthTrigger",)
        ]

        # Freeze the driver: the Python process named in the lease and spark-submit's JVM above it.
        grant = LeaseFiles(storage).unreleased_grant()
        driver = psutil.Process(grant["pid"])
        submit = driver.parent()
        assert "org.apache.spark.deploy.SparkSubmit" in " ".join(submit.cmdline())
        frozen = [submit, driver]
        for process in frozen:
            process.send_signal(signal.SIGSTOP)
        last_before = max(m.id for m in storage.checkpoints.completed())
        landing.add_files(2)  # arrive while the job is frozen: the restore counts them

        state, tasks = airflow.finished_run("restore_automation", run_id, 420)
        assert tasks == {
            "run_job": "failed",  # killed by its own task on request
            "first_checkpoint": "success",
            "watch_health": "failed",  # stalled while the job ran
            "stop_stalled_job": "success",
            "restore_from_latest": "success",
        }, (tasks, airflow.log_tail("scheduler"))
        assert state == "success"
        assert not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in frozen), "the driver was killed"
        stopped = airflow.xcom("restore_automation", run_id, "stop_stalled_job")
        assert stopped["outcome"] == "killed" and stopped["run_key"] == grant["run_key"], stopped
        report = ControlChannel(storage).run_report(grant["run_key"])
        assert report["status"] == "killed" and "its checkpoints stalled" in report["error"], report
        newest = storage.checkpoints.completed()[-1]
        assert newest.restored_from["id"] >= last_before, newest.restored_from
    finally:
        for process in frozen:
            try:
                process.kill()
            except psutil.NoSuchProcess:
                pass
        airflow.stop()
    # The frozen run's last checkpoint, then the restore: every event counted exactly once.
    assert final_counts(demo / "output") == landing.counts_by_key()


def _drivers(cluster: Cluster) -> dict[str, str]:
    """The master's drivers (cluster deploy mode) and their states, from its UI's JSON."""
    ui = (cluster.state / "master-ui").read_text().strip()
    with urllib.request.urlopen(f"{ui}/json/", timeout=10) as answer:
        state = json.load(answer)
    return {d["id"]: d["state"] for d in state.get("activedrivers", []) + state.get("completeddrivers", [])}


def test_cluster_deploy_mode_runs_the_driver_on_a_worker_kills_it_through_the_master_and_restores(
    cluster: Cluster, tmp_path: Path, landing: Landing, airflow_db, monkeypatch
):
    """The job operator with a Spark connection in cluster deploy mode on the standalone master: each driver
    runs on a worker (``PythonRunner`` over the launcher jar). A kill request kills try 1's driver through the
    master; try 2 restores from the latest checkpoint; stopping its task (SIGTERM, ``on_kill`` within Airflow's
    5 s) stops its driver gracefully. The deferrable operator does the same with its worker slot freed: the
    triggerer follows the driver and serves the kill request of try 1; try 2 restores, is frozen (SIGSTOP), and
    the triggerer kills it when its heartbeat stays unchanged for the lease timeout; try 3 restores. Every
    count is exact."""
    from tests.support.airflow_env import PLANTED_SECRET, Later, load_dag, task_states, timed_on_kill, xcom

    host, port = cluster.rsplit(":", 1)
    rest = int((cluster.state / "master-rest-port").read_text())
    spark_cluster = {"conn_type": "spark", "host": host, "port": int(port), "extra": {"deploy-mode": "cluster"}}
    spark_cluster["extra"]["rest-port"] = rest
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_CLUSTER", json.dumps(spark_cluster))
    took = timed_on_kill(monkeypatch)
    before = set(_drivers(cluster))
    root, work = tmp_path / "root", tmp_path / "work"
    storage = JobFolder(str(root), "orders")
    landing.add_files(4)
    first_try: dict[str, str] = {}

    def kill_try_one() -> None:
        grant = LeaseFiles(storage).unreleased_grant()
        first_try["run_key"] = grant["run_key"]
        ControlChannel(storage).request_kill(grant["run_key"], "the test asks")
        first_try["newest"] = max(_completed(storage))

    def second_try_checkpointed() -> bool:
        grant = LeaseFiles(storage).unreleased_grant()
        newest = max(_completed(storage), default=0)
        return bool(grant and grant["run_key"] != first_try["run_key"] and newest > first_try["newest"])

    def stop_task() -> None:
        landing.add_files(2)  # arrive while try 2 runs: it or the deferred task counts them
        first_try["stopped"] = max(_completed(storage))
        os.kill(os.getpid(), signal.SIGTERM)

    def deferred_try_one_checkpointed() -> bool:
        grant = LeaseFiles(storage).unreleased_grant()
        return bool(grant and ".deferred." in grant["run_key"] and max(_completed(storage)) > first_try["stopped"])

    def kill_deferred_try_one() -> None:
        grant = LeaseFiles(storage).unreleased_grant()
        assert grant is not None, "the deferred try's run ended before the kill"
        ControlChannel(storage).request_kill(grant["run_key"], "the test asks")
        first_try["deferred_killed"] = max(_completed(storage))

    def deferred_try_two_checkpointed() -> bool:
        grant = LeaseFiles(storage).unreleased_grant()
        newest = max(_completed(storage))
        key = grant["run_key"] if grant else ""
        return ".deferred." in key and key.endswith(".try2") and newest > first_try["deferred_killed"]

    def freeze_deferred_try_two() -> None:
        # The driver's Python process (the lease names it), not its JVM: the master still says RUNNING.
        grant = LeaseFiles(storage).unreleased_grant()
        frozen.append(psutil.Process(grant["pid"]))
        frozen[0].send_signal(signal.SIGSTOP)
        first_try["frozen"] = grant["run_key"]

    killer = Later(lambda: len(_completed(storage)) >= 2 and LeaseFiles(storage).unreleased_grant(), kill_try_one)
    killer.start()
    stopper = Later(lambda: killer.done.is_set() and second_try_checkpointed(), stop_task, timeout=400)
    stopper.start()
    deferred_killer = Later(
        lambda: stopper.done.is_set() and "stopped" in first_try and deferred_try_one_checkpointed(),
        kill_deferred_try_one,
        timeout=600,
    )
    deferred_killer.start()
    frozen: list[psutil.Process] = []
    freezer = Later(
        lambda: deferred_killer.done.is_set() and "deferred_killed" in first_try and deferred_try_two_checkpointed(),
        freeze_deferred_try_two,
        timeout=800,
    )
    freezer.start()
    conf = {"root": str(root), "landing": str(landing.path), "output": str(tmp_path / "out"), "work": str(work)}
    try:
        run = load_dag("on_the_cluster").test(run_conf=conf)
    finally:
        for process in frozen:  # its JVM is gone: the frozen Python would stay forever
            with contextlib.suppress(psutil.NoSuchProcess):
                process.kill()
    assert not [t.error for t in (killer, stopper, deferred_killer, freezer) if t.error is not None]
    states = task_states(run)
    assert states == {"stream": "success", "deferred": "success", "incompatible": "failed"}, states
    assert run.get_task_instance("incompatible").try_number == 1, "a refused upgrade spends no retry"
    # Each killed (the deferred task twice: on request, then for its frozen heartbeat), then restored from the
    # latest checkpoint.
    for task, last_try in (("stream", "try2"), ("deferred", "try3")):
        assert xcom(run, task)["run_key"].endswith(last_try) and xcom(run, task)["restored_from"] is not None
    hung = ControlChannel(storage).run_report(first_try["frozen"])
    assert hung["status"] == "killed" and "heartbeat did not change" in hung["error"], hung
    assert len(took) == 1 and took[0] < 5, took

    # The master's kill is SIGTERM to the driver's JVM (SIGKILL 10 s later), which the runtime takes as a
    # graceful stop: so a killed driver ends FINISHED (KILLED if its stop outlasts those 10 s).
    drivers = {d: state for d, state in _drivers(cluster).items() if d not in before}
    assert len(drivers) == 6 and list(drivers.values()).count("FAILED") == 1, drivers
    assert {s for s in drivers.values() if s != "FAILED"} <= {"FINISHED", "KILLED"}, drivers
    assert ControlChannel(storage).run_report(first_try["run_key"]) is not None
    ran = [p for p in cluster.state.glob("worker-*/driver-*") if p.name in drivers]
    assert len(ran) == 6, "each driver ran in a worker's driver folder"
    refused = ControlChannel(storage).run_report(key_from(f"on_the_cluster.incompatible.{run.run_id}.-1.try1"))
    assert refused["exit_code"] == 3 and refused["error"], refused
    assert not list(work.glob("checkpointed-job-*.jar")), "the launcher jars are removed after their runs"
    # The driver's command, logs and copy of the launcher, and every executor's files, as the workers keep them.
    for path in (p for p in cluster.state.glob("worker-*/**/*") if p.is_file()):
        assert PLANTED_SECRET.encode() not in path.read_bytes(), path
    with urllib.request.urlopen(f"{(cluster.state / 'master-ui').read_text().strip()}/json/", timeout=10) as answer:
        assert PLANTED_SECRET not in answer.read().decode()
    assert final_counts(tmp_path / "out") == landing.counts_by_key(), "every event counted once"

    # The delayed kill on_kill started found the driver ended and went.
    def delayed_kills() -> list[psutil.Process]:
        command = "-m airflow_checkpoint_provider.hooks.standalone_driver"
        return [p for p in psutil.process_iter(["cmdline"]) if command in " ".join(p.info["cmdline"] or [])]

    wait_for(lambda: not delayed_kills(), 90, "the delayed kill to end")


def _completed(storage: JobFolder) -> list[int]:
    return [m.id for m in storage.checkpoints.completed()]


DEFERRED_ON_CLUSTER = """
from datetime import datetime

from airflow.sdk import DAG

from airflow_checkpoint_provider.operators import CheckpointedStreamingJobOperator

with DAG(dag_id="deferred_on_cluster", schedule=None, start_date=datetime(2026, 1, 1)):
    CheckpointedStreamingJobOperator(
        task_id="stream",
        job_name="orders",
        checkpoint_root={root!r},
        pipeline="examples.pipelines:running_counts",
        sink="parquet:{output}",
        output_mode="update",
        trigger="continuous",
        batch_interval="500ms",
        max_duration="10min",
        checkpoint_interval="1s",
        stop_timeout="30s",
        conf={{"spark.example.landing": {landing!r}, "spark.sql.shuffle.partitions": "2", "spark.ui.enabled": "false"}},
        py_files=[{examples!r}],
        conn_id="spark_cluster",
        working_dir={work!r},
        deferrable=True,
        driver_poll_interval=1,
    )
"""


def test_a_deferred_driver_is_followed_by_a_real_triggerer_and_stopped_when_its_task_is_cleared(
    cluster: Cluster, tmp_path: Path, landing: Landing
):
    """Under a real scheduler and triggerer: the deferrable job operator frees its slot (the task is
    ``deferred`` and ``ClusterDriverTrigger`` runs in the triggerer) while its driver checkpoints on the
    cluster; clearing the task calls the trigger's ``on_kill``, which asks the job to stop: the driver stops
    gracefully on the cluster and writes its run report. (The cleared task then runs again: its driver is
    killed at the end.)"""
    root, dags = tmp_path / "root", tmp_path / "dags"
    dags.mkdir()
    (dags / "deferred_on_cluster.py").write_text(
        DEFERRED_ON_CLUSTER.format(
            root=str(root),
            output=tmp_path / "out",
            landing=str(landing.path),
            examples=str(REPO / "examples"),
            work=str(tmp_path / "work"),
        )
    )
    host, port = cluster.rsplit(":", 1)
    rest = int((cluster.state / "master-rest-port").read_text())
    connection = {"conn_type": "spark", "host": host, "port": int(port), "extra": {"deploy-mode": "cluster"}}
    connection["extra"]["rest-port"] = rest
    airflow = LocalAirflow(tmp_path / "airflow-home", dags, {"AIRFLOW_CONN_SPARK_CLUSTER": json.dumps(connection)})
    storage = JobFolder(str(root), "orders")
    landing.add_files(3)
    before = set(_drivers(cluster))
    try:
        airflow.start()
        parsed = "SELECT count(*) FROM dag WHERE dag_id = 'deferred_on_cluster'"
        airflow.wait_for(lambda: airflow.query(parsed)[0][0] == 1, 180, "the DAG to be parsed")
        assert airflow.airflow("dags", "trigger", "deferred_on_cluster").returncode == 0
        deferred = (
            "SELECT t.classpath FROM task_instance ti JOIN trigger t ON t.id = ti.trigger_id "
            "WHERE ti.dag_id = 'deferred_on_cluster' AND ti.state = 'deferred'"
        )
        found = airflow.wait_for(lambda: airflow.query(deferred), 300, "the task to defer to the triggerer")
        assert found == [("airflow_checkpoint_provider.triggers.driver.ClusterDriverTrigger",)]
        airflow.wait_for(lambda: len(_completed(storage)) >= 2, 240, "checkpoints of the deferred driver")
        [driver] = set(_drivers(cluster)) - before
        assert _drivers(cluster)[driver] == "RUNNING"
        run_key = LeaseFiles(storage).unreleased_grant()["run_key"]

        cleared = airflow.airflow("tasks", "clear", "deferred_on_cluster", "-t", "stream", "-y")
        assert cleared.returncode == 0, cleared.stderr[-2000:]
        airflow.wait_for(lambda: _drivers(cluster)[driver] != "RUNNING", 120, "the driver to stop")
        assert _drivers(cluster)[driver] == "FINISHED", "a graceful stop, asked through the job's _control/"
        assert ControlChannel(storage).run_report(run_key) is not None
        requests = {p.name for p in (root / "orders" / "_control" / "requests").glob("*.json")}
        assert f"{key_from(f'stop-{run_key}')}.json" in requests, requests
    finally:
        airflow.stop()
        for leftover, state in _drivers(cluster).items():  # never leave a driver running on the module's cluster
            if state in ("SUBMITTED", "RUNNING", "RELAUNCHING"):
                urllib.request.urlopen(
                    urllib.request.Request(f"http://127.0.0.1:{rest}/v1/submissions/kill/{leftover}", method="POST"),
                    timeout=10,
                ).close()
