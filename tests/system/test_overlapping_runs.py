"""Two runs of one job at once, with real processes: an Airflow retry beside a zombie run.

Run A holds the job. A second run fails at once (exit 4) naming A. Then A is frozen with SIGSTOP (a paused
VM, a stalled worker); once it has been silent past ``--lease-timeout`` a new run takes the job over and
drains the input. A is woken with SIGCONT: it finds the newer lease epoch and exits without writing a
``_metadata`` or publishing a row. The output holds every row exactly once.
"""

from __future__ import annotations

import os
import signal
import time
from collections import Counter
from pathlib import Path

import pytest

from spark_checkpoint_runtime.layout import JobFolder, LeaseFiles
from tests.support import figures
from tests.support.helpers import (
    Landing,
    completed_checkpoints,
    job_args,
    published_rows,
    run_module,
    spark_submit,
    wait_for,
)

pytestmark = [pytest.mark.spark, pytest.mark.slow]

LEASE_TIMEOUT = 6.0


def counted_files(root: Path, output: Path) -> dict[str, bytes]:
    """What counts for readers and restores: every ``_metadata`` and every published output file."""
    found = {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("_metadata")}
    found.update({f"out/{p.name}": b"" for p in output.glob("c*-b*-part*")})
    return found


def test_a_second_run_fails_fast_and_a_zombie_is_taken_over_and_cannot_write(tmp_path: Path, landing: Landing):
    root, work, output, log = tmp_path / "root", tmp_path / "work", tmp_path / "out", tmp_path / "job.log"
    job = "overlap"
    base = {"sink": f"parquet:{output}", "lease_timeout": f"{LEASE_TIMEOUT:g}s"}
    continuous = job_args(job, root, work, landing, trigger="continuous", batch_interval="200ms", **base)
    landing.add_files(4)

    zombie = spark_submit(continuous, log)
    try:
        wait_for(lambda: len(completed_checkpoints(root, job)) >= 1, 180, "A's first checkpoint", zombie)
        holder = LeaseFiles(JobFolder(str(root), job)).read(1)
        assert holder is not None

        # An overlapping run (an Airflow retry) fails fast, names A, and writes nothing.
        started = time.monotonic()
        second = run_module(job_args(job, root, work, landing, **base), timeout=120)
        assert second.returncode == 4, second.stderr[-2000:]
        assert f"held by run {holder['run_id']}" in second.stderr
        assert time.monotonic() - started < 30, "it fails before starting Spark"
        assert LeaseFiles(JobFolder(str(root), job)).listing().latest == 1
        figures.add("overlapping runs refused")

        # A freezes. After the lease timeout a new run takes over and drains everything.
        os.killpg(zombie.pid, signal.SIGSTOP)
        writers = {meta.run_id for meta in JobFolder(str(root), job).checkpoints.completed()}
        assert writers == {holder["run_id"]}, "only A wrote checkpoints: the refused run wrote nothing"
        assert not (root / job / "_control" / "clock").exists() or not any(
            (root / job / "_control" / "clock").iterdir()
        )
        time.sleep(LEASE_TIMEOUT + 1)
        landing.add_files(3)
        drain = job_args(job, root, work, landing, trigger="available-now", **base)
        taker = spark_submit(drain, log)
        assert taker.wait(timeout=300) == 0, log.read_text(errors="replace")[-4000:]
        text = log.read_text(errors="replace")
        assert f"taking over job 'overlap' from run {holder['run_id']}" in text
        assert LeaseFiles(JobFolder(str(root), job)).listing().latest == 2
        figures.add("lease takeovers")
        after_taker = counted_files(root, output)

        # A wakes up: it must notice and stop without adding a _metadata or publishing output.
        os.killpg(zombie.pid, signal.SIGCONT)
        assert zombie.wait(timeout=120) == 1
        text = log.read_text(errors="replace")
        assert f"run {holder['run_id']} lost job 'overlap' to run" in text
        assert counted_files(root, output) == after_taker, "the zombie wrote after losing the job"
    finally:
        if zombie.poll() is None:
            os.killpg(zombie.pid, signal.SIGKILL)
            zombie.wait()

    published = Counter(row["id"] for row in published_rows(output))
    expected = {row["id"] for row in landing.rows}
    duplicated = sum(n - 1 for n in published.values() if n > 1)
    figures.record_rows(len(expected), len(expected - set(published)), duplicated, "exactly-once")
    assert set(published) == expected and duplicated == 0
