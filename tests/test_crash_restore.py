"""Must-show 1 and 2: real spark-submit processes SIGKILLed at different moments, restored from latest.

Each kill takes down the whole process group (JVM and Python driver). The moments differ: right after
the first checkpoints complete, a few seconds into a restored run (inside batches), and the instant a new
``_metadata`` appears (between a checkpoint's completion and its sink commit). A final available-now run
drains what is left. Exactly-once output must hold every input row once; running counts must be exact.
"""

from __future__ import annotations

import random
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import (
    Landing,
    completed_checkpoints,
    job_args,
    kill_group,
    published_rows,
    spark_submit,
    start_module,
    wait_for,
)

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def _crash_three_times(job: str, tmp_path: Path, landing: Landing, extra: dict[str, str]) -> Path:
    root, work, output, log = tmp_path / "root", tmp_path / "work", tmp_path / "out", tmp_path / "job.log"
    args = job_args(
        job, root, work, landing, sink=f"parquet:{output}", trigger="continuous", batch_interval="100ms", **extra
    )
    rng = random.Random(7)
    landing.add_files(12)

    # Kill 1: once at least two checkpoints have completed (the job is mid-stream).
    process = spark_submit(args, log)
    wait_for(lambda: len(completed_checkpoints(root, job)) >= 2, 180, "two checkpoints", process)
    kill_group(process)
    landing.add_files(4)

    # Kill 2: a random moment inside the restored run's batches.
    process = spark_submit(args, log)
    before = completed_checkpoints(root, job)[-1]
    wait_for(lambda: completed_checkpoints(root, job)[-1] > before, 180, "a checkpoint after restore", process)
    time.sleep(rng.uniform(0.2, 1.5))
    kill_group(process)
    landing.add_files(4)

    # Kill 3: the instant a new _metadata appears, before the sink can publish what it covers.
    process = spark_submit(args, log)
    before = completed_checkpoints(root, job)[-1]
    wait_for(lambda: completed_checkpoints(root, job)[-1] > before, 180, "a checkpoint after restore", process)
    kill_group(process)
    landing.add_files(3)

    # Drain with available-now.
    drain = [a if a != "continuous" else "available-now" for a in args]
    process = spark_submit(drain, log)
    assert process.wait(timeout=300) == 0, log.read_text()[-4000:]
    text = log.read_text()
    assert text.count("restoring job") == 3, "every restart must restore from a checkpoint"
    assert text.count("starts fresh") == 1
    return output


def test_stateless_exactly_once_through_sigkills(tmp_path: Path, landing: Landing):
    output = _crash_three_times("stateless", tmp_path, landing, {})
    ids = sorted(row["id"] for row in published_rows(output))
    expected = sorted(row["id"] for row in landing.rows)
    assert len(ids) == len(expected) == 23 * 10
    assert ids == expected, "every input row exactly once"


def test_stateful_counts_exact_through_sigkills(tmp_path: Path, landing: Landing):
    output = _crash_three_times(
        "stateful",
        tmp_path,
        landing,
        {"pipeline": "examples.pipelines:running_counts", "output_mode": "update"},
    )
    largest: dict[str, int] = {}
    for row in published_rows(output):
        largest[row["key"]] = max(largest.get(row["key"], 0), row["count"])
    assert largest == landing.counts_by_key()


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
    import json

    result = json.loads(stdout.strip().splitlines()[-1].removeprefix("result: "))
    assert result["status"] == "cancelled"
    commits = sorted(int(p.name) for p in (root / "graceful" / f"chk-{result['checkpoint_id']}" / "commits").iterdir())
    assert commits[-1] == result["batch_id"]
    # Everything the query processed is published: the final checkpoint covered the last batch.
    assert len(published_rows(output)) == result["rows"] > 0
    assert not any((output / "_staging").glob("batch-*"))
