"""A graceful stop of a real process: SIGTERM finishes the batch, checkpoints, commits and exits 0.

Kills (SIGKILL at chosen and random points) are in ``test_chaos.py``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from spark_checkpoint_runtime.layout import ControlChannel, JobFolder
from tests.support.helpers import (
    Landing,
    completed_checkpoints,
    job_args,
    published_rows,
    spark_submit,
    start_module,
    wait_for,
)

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def test_continuous_sigterm_finishes_batch_checkpoints_and_exits_zero(tmp_path: Path, landing: Landing):
    """SIGTERM to the driver: finish the batch in flight, final checkpoint, commit, exit 0."""
    root, work, output = tmp_path / "root", tmp_path / "work", tmp_path / "out"
    landing.add_files(30)
    args = job_args(
        "graceful",
        root,
        work,
        landing,
        sink=f"parquet:{output}",
        trigger="continuous",
        batch_interval="200ms",
        checkpoint_interval="5s",
    )
    process = start_module(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    wait_for(lambda: completed_checkpoints(root, "graceful"), 180, "first checkpoint", process)
    process.send_signal(signal.SIGTERM)
    stdout, stderr = process.communicate(timeout=120)
    assert process.returncode == 0, stderr[-3000:]
    assert "stop requested" in stderr
    result = json.loads(stdout.strip().splitlines()[-1].removeprefix("result: "))
    assert result["status"] == "cancelled"
    commits = sorted(int(p.name) for p in (root / "graceful" / f"chk-{result['checkpoint_id']}" / "commits").iterdir())
    assert commits[-1] == result["batch_id"]
    # Everything the query processed is published: the final checkpoint covered the last batch.
    assert len(published_rows(output)) == result["rows"] > 0
    assert not any((output / "_staging").glob("batch-*"))


@pytest.mark.parametrize(
    "how", ["SIGTERM to the process group", "SIGINT to the process group", "SIGTERM to the spark-submit JVM alone"]
)
def test_a_supervisors_stop_signal_stops_spark_submit_gracefully(tmp_path: Path, landing: Landing, how: str):
    """systemd (group SIGTERM), Ctrl-C (group SIGINT), Kubernetes/docker/YARN (SIGTERM to the first process, the
    spark-submit JVM): each finishes the batch in flight, takes a final checkpoint, commits and exits 0."""
    root, output, log = tmp_path / "root", tmp_path / "out", tmp_path / "job.log"
    landing.add_files(30)
    args = job_args(
        "supervised",
        root,
        tmp_path / "work",
        landing,
        sink=f"parquet:{output}",
        trigger="continuous",
        batch_interval="200ms",
        checkpoint_interval="5s",
        stop_timeout="60s",
    )
    process = spark_submit(args, log)
    wait_for(lambda: completed_checkpoints(root, "supervised"), 180, "first checkpoint", process)
    if how.endswith("JVM alone"):
        os.kill(process.pid, signal.SIGTERM)  # spark-submit execs the JVM: its pid is the Popen's
    else:
        os.killpg(process.pid, signal.SIGINT if how.startswith("SIGINT") else signal.SIGTERM)
    assert process.wait(timeout=120) == 0, log.read_text(errors="replace")[-4000:]
    text = log.read_text(errors="replace")
    assert "stopping gracefully" in text
    result = json.loads(
        next(line for line in text.splitlines() if line.startswith("result: ")).removeprefix("result: ")
    )
    assert result["status"] == "cancelled"
    final = root / "supervised" / f"chk-{result['checkpoint_id']}"
    assert sorted(int(p.name) for p in (final / "commits").iterdir())[-1] == result["batch_id"], "final checkpoint"
    published = [row["id"] for row in published_rows(output)]
    assert len(published) == len(set(published)) == result["rows"] > 0, "everything processed is committed, once"
    assert not list((output / "_staging").rglob("part-*"))


def test_a_stop_that_outlasts_the_stop_timeout_exits_non_zero_and_publishes_nothing_more(
    tmp_path: Path, landing: Landing
):
    """A batch still running past --stop-timeout: the run ends with exit 1 by its own deadline, nothing after
    its last completed checkpoint is published, and the next run restores and publishes every row once. The
    deadline holds whatever asked for the stop: a signal, or the run's own --max-duration."""
    root, output, log = tmp_path / "root", tmp_path / "out", tmp_path / "job.log"
    landing.add_files(1, rows=4)
    base = job_args(
        "slow",
        root,
        tmp_path / "work",
        landing,
        pipeline="examples.pipelines:slow_events",
        sink=f"parquet:{output}",
        trigger="continuous",
        checkpoint_interval="1ms",
        stop_timeout="3s",
    )
    process = spark_submit([*base, "--conf", "spark.example.slowMsPerRow=4000", "--run-key", "slow-try-1"], log)
    # The first checkpoint publishes the first file's 4 rows right after its _metadata: wait for both.
    wait_for(lambda: completed_checkpoints(root, "slow") and len(published_rows(output)) == 4, 240, "chk 1", process)
    published_before = sorted(row["id"] for row in published_rows(output))
    landing.add_files(1, rows=4)  # the next batch: 2 rows per partition, 8 s at least
    time.sleep(4)  # it is running now
    started = time.monotonic()
    os.kill(process.pid, signal.SIGTERM)
    assert process.wait(timeout=60) == 1, log.read_text(errors="replace")[-3000:]
    assert time.monotonic() - started < 20, "the runtime's own deadline ended the run"
    assert "did not stop within --stop-timeout 3s" in log.read_text(errors="replace")
    # The run report says why (an Airflow task reads it; without it the exit looks like a kill or a crash).
    report = ControlChannel(JobFolder(str(root), "slow")).run_report("slow-try-1")
    assert report and report["status"] == "failed" and "did not stop within --stop-timeout 3s" in report["error"]
    assert sorted(row["id"] for row in published_rows(output)) == published_before, "nothing more published"
    # A stop the run asks of itself (--max-duration; a _control stop request takes the same path) is bounded
    # the same way: try 2 restores, replays the batch, overruns its duration inside it, and ends by its deadline.
    slower = ["--conf", "spark.example.slowMsPerRow=10000", "--max-duration", "8s", "--run-key", "slow-try-2"]
    process = spark_submit([*base, *slower], log)
    assert process.wait(timeout=180) == 1, log.read_text(errors="replace")[-3000:]
    assert "did not stop within --stop-timeout 3s after --max-duration" in log.read_text(errors="replace")
    report = ControlChannel(JobFolder(str(root), "slow")).run_report("slow-try-2")
    assert report and "did not stop within --stop-timeout 3s after --max-duration" in report["error"], report
    assert sorted(row["id"] for row in published_rows(output)) == published_before, "nothing more published"
    drain = [a if a != "continuous" else "available-now" for a in base]
    assert spark_submit(drain, log).wait(timeout=300) == 0, log.read_text(errors="replace")[-3000:]
    published = [row["id"] for row in published_rows(output)]
    assert sorted(published) == sorted(row["id"] for row in landing.rows)
