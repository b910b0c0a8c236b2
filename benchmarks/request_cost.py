"""What a job costs on S3, in requests by kind, against a loopback S3 server that counts them (moto).

    .venv/bin/python -m benchmarks.request_cost [--idle-seconds 180] [--checkpoints 20] [--shared-files 1000]

Storage-only operations (no Spark), on a job of ``--checkpoints`` small checkpoints plus
``--shared-files`` files of an old run in ``shared/``: a sensor poke when nothing is new, a poke that finds
a new checkpoint, resolving ``latest`` for a restore, and a retention run keeping 3. Then a real running
job (``python -m spark_checkpoint_runtime``, continuous, small stateful count, checkpoint root on S3,
defaults otherwise): requests per idle minute (no data arriving) scaled to a day, requests per checkpoint
while a file arrives every 3 s for 30 s (less the idle rate over the same time), one savepoint, and how
long a savepoint request and a stop request, each made at a random moment, wait for their answer.
Prints a table, writes JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from airflow_checkpoint_provider.hooks.kill_watch import KILL_POLL_SECONDS  # noqa: E402
from benchmarks.provenance import write_result  # noqa: E402
from benchmarks.s3_requests import CountingS3Server  # noqa: E402
from examples.landing import Landing  # noqa: E402
from spark_checkpoint_runtime.layout import (  # noqa: E402
    CheckpointMetadata,
    CheckpointStorage,
    ControlChannel,
    FileEntry,
    find_completed_checkpoint,
    now_ms,
)
from spark_checkpoint_runtime.retention import apply_job_retention, plan_job_retention  # noqa: E402


def write_checkpoint(storage: CheckpointStorage, checkpoint_id: int) -> None:
    """A small complete checkpoint: one owned file and one shared state file of its own."""
    owned = storage.checkpoint_relative_file(checkpoint_id, "commits/0")
    shared = storage.shared_relative_file("r1", f"state/0/0/{checkpoint_id}.delta")
    for relative, data in ((owned, b"v1\n{}"), (shared, b"s" * 64)):
        storage.fs.pipe_file(storage.job_file(relative), data)
    stamp = now_ms()
    files = [FileEntry(owned, "commits/0", 5, False), FileEntry(shared, f"state/0/0/{checkpoint_id}.delta", 64, True)]
    storage.write_checkpoint_metadata(
        CheckpointMetadata(
            checkpoint_id,
            "checkpoint",
            storage.job_name,
            "r1",
            checkpoint_id,
            stamp,
            stamp,
            "exactly-once",
            files,
            64,
            69,
        )  # fmt: skip
    )


def storage_operations(server: CountingS3Server, checkpoints: int, shared_files: int) -> dict[str, dict[str, int]]:
    storage = CheckpointStorage(f"s3://{server.bucket}/storage-ops", "orders", server.options)
    for checkpoint_id in range(1, checkpoints + 1):
        write_checkpoint(storage, checkpoint_id)
    for n in range(shared_files):
        storage.fs.pipe_file(storage.job_file(storage.shared_relative_file("old-run", f"f{n}")), b"x")
    measured = {}

    def count(name: str, operation) -> None:
        server.reset()
        operation()
        measured[name] = server.snapshot()

    count("sensor poke, nothing new", lambda: find_completed_checkpoint(storage, newer_than=checkpoints))
    count("sensor poke, a new checkpoint", lambda: find_completed_checkpoint(storage, newer_than=checkpoints - 1))
    count("restore: resolve latest", storage.latest_valid_checkpoint)
    count(
        f"retention run ({checkpoints} checkpoints, keep 3)",
        lambda: apply_job_retention(
            storage, plan_job_retention(storage, num_retained=3, orphan_grace=0, now=time.time())
        ),
    )
    return measured


def running_job(server: CountingS3Server, idle_seconds: float, folder: Path) -> dict[str, Any]:
    root = f"s3://{server.bucket}/running"
    storage = CheckpointStorage(root, "counts", server.options)
    landing = Landing(folder / "landing")
    landing.add_files(2)
    spec = folder / "spec.json"
    spec.write_text(json.dumps({"storage_options": server.options}))
    command = [
        sys.executable, "-m", "spark_checkpoint_runtime", "--job-name", "counts", "--checkpoint-root", root,
        "--working-dir", str(folder / "work"), "--pipeline", "examples.pipelines:running_counts",
        "--output-mode", "update", "--sink", f"parquet:{folder / 'out'}", "--trigger", "continuous",
        "--spec", str(spec), "--conf", f"spark.example.landing={landing.path}",
        "--conf", "spark.sql.shuffle.partitions=2", "--conf", "spark.ui.enabled=false",
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(REPO), "PYSPARK_PYTHON": sys.executable}
    log = open(folder / "job.log", "wb")  # noqa: SIM115 - closed below
    job = subprocess.Popen(command, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT)

    def newest() -> int:
        return max((m.id for m in storage.completed_checkpoints()), default=0)

    def wait(condition, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            if job.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{what}: job exited {job.returncode} or timed out; see {folder / 'job.log'}")
            time.sleep(0.5)

    try:
        wait(lambda: newest() >= 2 and ControlChannel(storage).live_runs(), 300, "first checkpoints")
        time.sleep(5)  # the backlog is drained: from here no data arrives
        server.reset()
        started = time.monotonic()
        time.sleep(idle_seconds)
        idle = server.snapshot()
        idle_rate = idle["total"] / (time.monotonic() - started)

        before, started = newest(), time.monotonic()
        server.reset()
        for _ in range(10):  # data keeps arriving for a while: batches, and checkpoints at the default interval
            landing.add_file()
            time.sleep(3)
        wait(lambda: newest() > before, 120, "a checkpoint of the new data")
        busy, elapsed, made = server.snapshot(), time.monotonic() - started, newest() - before
        per_checkpoint = (busy["total"] - idle_rate * elapsed) / made

        time.sleep(random.uniform(0, 9))  # the request lands anywhere between two of the job's polls
        server.reset()
        started = time.monotonic()
        control = ControlChannel(storage)
        control.request_savepoint("bench-savepoint")
        wait(lambda: control.response("bench-savepoint") is not None, 60, "the savepoint's answer")
        savepoint_answered = time.monotonic() - started
        wait(lambda: (control.response("bench-savepoint") or {}).get("status") == "completed", 120, "savepoint")
        savepoint = server.snapshot()
        savepoint_net = savepoint["total"] - idle_rate * (time.monotonic() - started)

        time.sleep(random.uniform(0, 9))
        started = time.monotonic()
        control.request("bench-stop", "stop")
        wait(lambda: control.response("bench-stop") is not None, 60, "the stop's answer")
        stop_answered = time.monotonic() - started
        job.wait(timeout=120)
    finally:
        if job.poll() is None:
            job.terminate()
            job.wait(timeout=120)
        log.close()
    kill_watch = round(86400 / KILL_POLL_SECONDS)
    return {
        "idle": {
            "seconds": idle_seconds,
            "requests": idle,
            "per_day": round(idle_rate * 86400),
            # Beside it in Airflow, the job task reads its kill request (one small GET) every KILL_POLL_SECONDS.
            "job_task_kill_watch_per_day": kill_watch,
            "per_day_with_job_task": round(idle_rate * 86400) + kill_watch,
        },
        "answered_seconds": {"savepoint": round(savepoint_answered, 2), "stop": round(stop_answered, 2)},
        "checkpoints_while_busy": {"checkpoints": made, "seconds": round(elapsed, 1), "requests": busy},
        "requests_per_checkpoint_net_of_idle": round(per_checkpoint, 1),
        "savepoint": {"requests": savepoint, "net_of_idle": round(savepoint_net, 1)},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--idle-seconds", type=float, default=180)
    parser.add_argument("--checkpoints", type=int, default=20)
    parser.add_argument("--shared-files", type=int, default=1000)
    parser.add_argument("--skip-job", action="store_true", help="storage operations only (no Spark)")
    parser.add_argument("--out", default=str(REPO / "benchmarks" / "request_cost.json"))
    args = parser.parse_args(argv)
    import logging

    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # no line per request
    server = CountingS3Server().start()
    try:
        result: dict[str, Any] = {"storage": storage_operations(server, args.checkpoints, args.shared_files)}
        if not args.skip_job:
            with tempfile.TemporaryDirectory(prefix="request-cost-") as folder:
                result["running_job"] = running_job(server, args.idle_seconds, Path(folder))
    finally:
        server.stop()
    for name, counts in result["storage"].items():
        kinds = ", ".join(f"{k} {v}" for k, v in counts.items() if v and k != "total")
        print(f"{name:<40} {counts['total']:>5} requests ({kinds})")
    if "running_job" in result:
        job = result["running_job"]
        print(
            f"idle running job: {job['idle']['per_day']} requests/day ({job['idle']['requests']}); with its Airflow "
            f"task's kill watch {job['idle']['per_day_with_job_task']}"
        )
        print(f"requests answered after (s): {job['answered_seconds']}")
        print(f"per checkpoint while data arrives (net of idle): {job['requests_per_checkpoint_net_of_idle']}")
        print(f"one savepoint (net of idle): {job['savepoint']['net_of_idle']} ({job['savepoint']['requests']})")
    write_result(args.out, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
