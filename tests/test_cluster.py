"""The runtime on a real Spark standalone cluster: a Master and two Workers in their own JVMs on loopback
(``scripts/spark-cluster.sh``), the driver in client deploy mode, executors on the workers.

The working folder is a local path every executor can reach (they share this machine: it stands in for a
shared filesystem). Crash chains SIGKILL the driver's process group mid-stream, as on local Spark; one
run loses an executor JVM mid-stream (Spark retries its tasks) and then a whole Worker (the job goes on with
the other), and must keep checkpointing and stay exact.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import time
from pathlib import Path

import psutil
import pytest

from spark_checkpoint_runtime.layout import CheckpointStorage, ControlChannel
from tests.conftest import REPO, Landing, final_counts, job_args, spark_submit, wait_for
from tests.test_chaos import RANDOM, SEED, _assert_exactly_once, run_chain

pytestmark = [pytest.mark.spark, pytest.mark.slow]


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
    env = {**os.environ, "SPARK_CLUSTER_DIR": str(state)}
    script = str(REPO / "scripts" / "spark-cluster.sh")
    started = subprocess.run(["bash", script, "start"], env=env, capture_output=True, text=True, timeout=300)
    assert started.returncode == 0, started.stdout + started.stderr
    master = started.stdout.strip().splitlines()[-1]
    assert master.startswith("spark://127.0.0.1:"), master
    running = Cluster(master)
    running.state = state
    yield running
    subprocess.run(["bash", script, "stop"], env=env, capture_output=True, timeout=120)
    assert not [p for p in psutil.process_iter(["cmdline"]) if str(state) in " ".join(p.info["cmdline"] or [])]


def test_stateless_exactly_once_through_driver_kills_on_the_cluster(cluster: str, tmp_path: Path, landing: Landing):
    rng = random.Random(SEED + 40)
    output = run_chain(
        tmp_path, landing, "cluster-stateless", [RANDOM, "before-metadata@1", RANDOM], rng, master=cluster
    )
    _assert_exactly_once(output, landing)


def test_counts_stay_exact_when_an_executor_and_then_a_worker_die(cluster: Cluster, tmp_path: Path, landing: Landing):
    root, output, log = tmp_path / "root", tmp_path / "out", tmp_path / "job.log"
    storage = CheckpointStorage(str(root), "cluster-counts")
    landing.add_files(3)
    args = job_args(
        "cluster-counts",
        root,
        tmp_path / "work",
        landing,
        pipeline="examples.pipelines:running_counts",
        output_mode="update",
        sink=f"parquet:{output}",
        trigger="continuous",
        batch_interval="500ms",
        checkpoint_interval="1s",
    )
    job = spark_submit(args, log, master=cluster)

    def checkpoints() -> int:
        return max((m.id for m in storage.completed_checkpoints()), default=0)

    def progressed(after: int, what: str) -> int:
        def more() -> bool:
            landing.add_file()
            time.sleep(1)
            return checkpoints() >= after + 2

        wait_for(more, 300, what, job)
        return checkpoints()

    try:
        seen = progressed(0, "checkpoints on the cluster")
        executors = cluster.processes("CoarseGrainedExecutorBackend")
        assert len(executors) == 2, "one executor per worker"
        executors[0].send_signal(signal.SIGKILL)  # mid-stream: Spark retries its tasks, the worker relaunches it
        seen = progressed(seen, "checkpoints after an executor died")
        worker = cluster.processes("org.apache.spark.deploy.worker.Worker")[0]
        for process in [worker, *worker.children(recursive=True)]:
            process.send_signal(signal.SIGKILL)  # a whole Worker and its executor gone: the other carries on
        progressed(seen, "checkpoints after a worker died")
        ControlChannel(storage).request("stop-cluster-test", "stop")
        assert job.wait(timeout=180) == 0, log.read_text(errors="replace")[-4000:]
    finally:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
    drain = [a if a != "continuous" else "available-now" for a in args]
    assert spark_submit(drain, log, master=cluster).wait(timeout=300) == 0, log.read_text(errors="replace")[-4000:]
    assert final_counts(output) == landing.counts_by_key(), "every event counted once through both losses"
