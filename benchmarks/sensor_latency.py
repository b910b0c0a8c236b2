"""Sensor latency: from a checkpoint's ``_metadata`` landing to the CheckpointSensor finishing.

    .venv/bin/python -m benchmarks.sensor_latency [--samples 3] [--poke-interval SECONDS]

A real Airflow (temporary AIRFLOW_HOME, SQLite) runs a one-task DAG with ``airflow dags test``: a
CheckpointSensor in poke mode, then the same sensor deferrable (the trigger polls storage). While the sensor
waits, the benchmark writes a complete checkpoint at a random moment; the latency is the task's end time
(from Airflow's metadata database) minus the moment ``_metadata`` was written. By default the sensors run
at their default intervals (``poke_interval`` 60 s for both), so expect about half an interval on average
plus Airflow's own overhead. The checkpoint lands a random time (0 to one interval) after the task
starts waiting. Needs no Spark. Prints a table and writes JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from benchmarks.provenance import write_result

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from spark_checkpoint_runtime.layout import CheckpointMetadata, FileEntry, JobFolder, now_ms  # noqa: E402

JOB = "latency"
DAG_FILE = """
from datetime import datetime
from airflow.sdk import DAG
from airflow_checkpoint_provider.sensors.checkpoint import CheckpointSensor

POKE = {poke!r}
for deferrable in (False, True):
    with DAG(f"latency_{{'deferrable' if deferrable else 'poke'}}", schedule=None, start_date=datetime(2026, 1, 1)):
        CheckpointSensor(
            task_id="wait",
            job_name={job!r},
            checkpoint_root={root!r},
            newer_than="{{{{ dag_run.conf.get('newer_than', 0) }}}}",
            deferrable=deferrable,
            timeout=900,
            **({{}} if POKE is None else {{"poke_interval": POKE}}),
        )
"""


def write_checkpoint(storage: JobFolder, checkpoint_id: int) -> float:
    """A complete small checkpoint through the format module; returns when its ``_metadata`` landed."""
    relative = storage.checkpoints.relative_file(checkpoint_id, "commits/0")
    path = storage.job_file(relative)
    storage.fs.makedirs(os.path.dirname(path), exist_ok=True)
    storage.fs.pipe_file(path, b"v1\n{}")
    stamp = now_ms()
    meta = CheckpointMetadata(
        id=checkpoint_id,
        kind="checkpoint",
        job_name=JOB,
        run_id="bench",
        batch_id=checkpoint_id,
        trigger_timestamp_ms=stamp,
        completion_timestamp_ms=stamp,
        checkpointing_mode="exactly-once",
        files=[FileEntry(relative, "commits/0", 5, False)],
        state_bytes=0,
        bytes_written=5,
    )
    storage.checkpoints.write_metadata(meta)
    return time.time()


def task_times(db: Path, dag_id: str) -> tuple[float, float]:
    """Start and end (epoch seconds) of the newest run's sensor task."""
    with sqlite3.connect(db) as connection:
        start, end = connection.execute(
            "SELECT start_date, end_date FROM task_instance WHERE dag_id = ? ORDER BY end_date DESC LIMIT 1",
            (dag_id,),
        ).fetchone()

    def epoch(value: str) -> float:
        return datetime.fromisoformat(value.replace(" ", "T")).timestamp()

    return epoch(start), epoch(end)


def wait_until_waiting(db: Path, dag_id: str, newer_than: int, process: subprocess.Popen, timeout: float = 300) -> None:
    """Until the sensor task of the newest run is waiting: running (poke mode), deferred, or back in ``queued``
    after it started (``dags test`` runs a deferred task's trigger inline with the task queued, so ``deferred``
    lasts a moment only: a poll can miss it, and did under load)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"airflow dags test {dag_id} exited with {process.returncode} before the sensor waited")
        try:
            with sqlite3.connect(db, timeout=5) as connection:
                (waiting,) = connection.execute(
                    "SELECT COUNT(*) FROM task_instance WHERE dag_id = ? AND (state IN "
                    "('running', 'deferred', 'up_for_reschedule') OR (state = 'queued' AND start_date IS NOT NULL))",
                    (dag_id,),
                ).fetchone()
        except sqlite3.OperationalError:  # the database does not exist yet, or is busy: look again
            waiting = 0
        if waiting:
            return
        time.sleep(0.1)
    raise RuntimeError(f"the sensor of {dag_id} (newer than {newer_than}) never started waiting")


def measure(samples: int, poke_interval: float | None, seed: int = 11) -> dict[str, Any]:
    home = Path(tempfile.mkdtemp(prefix="sensor-latency-"))
    try:
        return _measure(home, samples, poke_interval, random.Random(seed))
    finally:
        shutil.rmtree(home, ignore_errors=True)


def _measure(home: Path, samples: int, poke_interval: float | None, rng: random.Random) -> dict[str, Any]:
    root = home / "checkpoints"
    (home / "dags").mkdir()
    (home / "dags" / "latency.py").write_text(DAG_FILE.format(poke=poke_interval, job=JOB, root=str(root)))
    env = {
        **os.environ,
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGS_FOLDER": str(home / "dags"),
        "PYTHONPATH": str(REPO),
    }
    airflow = str(Path(sys.executable).parent / "airflow")
    subprocess.run([airflow, "db", "migrate"], env=env, check=True, capture_output=True, timeout=600)
    storage = JobFolder(str(root), JOB)
    interval = poke_interval if poke_interval is not None else 60.0
    results: dict[str, Any] = {"poke_interval_seconds": interval, "samples": samples}
    next_id = 1
    for mode in ("poke", "deferrable"):
        latencies = []
        for _ in range(samples):
            newer_than = next_id - 1
            process = subprocess.Popen(
                [airflow, "dags", "test", f"latency_{mode}", "--conf", json.dumps({"newer_than": newer_than})],
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            # Land the checkpoint at a random moment once the sensor is waiting (poking or deferred).
            wait_until_waiting(home / "airflow.db", f"latency_{mode}", newer_than, process)
            time.sleep(rng.uniform(0, interval))
            landed = write_checkpoint(storage, next_id)
            if process.wait(timeout=900) != 0:
                raise RuntimeError(f"airflow dags test latency_{mode} failed")
            _, end = task_times(home / "airflow.db", f"latency_{mode}")
            latencies.append(round(end - landed, 2))
            next_id += 1
        results[mode] = {
            "latencies_seconds": latencies,
            "median_seconds": round(statistics.median(latencies), 2),
            "max_seconds": max(latencies),
        }
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.sensor_latency")
    parser.add_argument("--samples", type=int, default=3)
    parser.add_argument("--poke-interval", type=float, default=None, help="default: the sensors' own (60 s)")
    parser.add_argument("--out", default=str(REPO / "benchmarks" / "sensor_latency.json"))
    args = parser.parse_args(argv)
    results = measure(args.samples, args.poke_interval)
    interval = results["poke_interval_seconds"]
    print(f"\n== sensor latency: _metadata landed -> sensor task done (poke interval {interval} s)")
    print(f"{'mode':<11} {'median s':>9} {'max s':>7}  samples")
    for mode in ("poke", "deferrable"):
        r = results[mode]
        print(f"{mode:<11} {r['median_seconds']:>9} {r['max_seconds']:>7}  {r['latencies_seconds']}")
    write_result(args.out, results)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
