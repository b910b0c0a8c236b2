"""What a job costs on S3, in requests by kind, against a loopback S3 server that counts them (moto).

    .venv/bin/python -m benchmarks.request_cost [--idle-seconds 180] [--checkpoints 20] [--shared-files 1000]
        [--age 100]

Storage-only operations (no Spark), on a job of ``--checkpoints`` small checkpoints plus
``--shared-files`` files of an old run in ``shared/``: a sensor poke when nothing is new, a poke that finds
a new checkpoint, resolving ``latest`` for a restore, and a retention run keeping 3. Then a real running
job (``python -m spark_checkpoint_runtime``, continuous, small stateful count, checkpoint root on S3,
defaults otherwise): requests per idle minute (no data arriving) scaled to a day, requests per checkpoint
while a file arrives every 3 s for 30 s (less the idle rate over the same time), one savepoint, and how
long a savepoint request and a stop request, each made at a random moment, wait for their answer (the
benchmark's own reads and requests, which watch the job, are not counted). Last,
a checkpoint's cost as the job ages: requests per checkpoint of a second job (1 s interval, 100
retained) while young, and again after ``--age`` more checkpoints, when 100 are retained.
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
from spark_checkpoint_runtime.layout import (  # noqa: E402
    CheckpointMetadata,
    ControlChannel,
    FileEntry,
    JobFolder,
    find_completed_checkpoint,
    now_ms,
)
from spark_checkpoint_runtime.retention import apply_job_retention, plan_job_retention  # noqa: E402
from tests.support.landing import Landing  # noqa: E402


def write_checkpoint(storage: JobFolder, checkpoint_id: int) -> None:
    """A small complete checkpoint: one owned file and one shared state file of its own."""
    owned = storage.checkpoints.relative_file(checkpoint_id, "commits/0")
    shared = storage.checkpoints.shared_relative_file("r1", f"state/0/0/{checkpoint_id}.delta")
    for relative, data in ((owned, b"v1\n{}"), (shared, b"s" * 64)):
        storage.fs.pipe_file(storage.job_file(relative), data)
    stamp = now_ms()
    files = [FileEntry(owned, "commits/0", 5, False), FileEntry(shared, f"state/0/0/{checkpoint_id}.delta", 64, True)]
    storage.checkpoints.write_metadata(
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
    storage = JobFolder(f"s3://{server.bucket}/storage-ops", "orders", server.options)
    for checkpoint_id in range(1, checkpoints + 1):
        write_checkpoint(storage, checkpoint_id)
    for n in range(shared_files):
        storage.fs.pipe_file(storage.job_file(storage.checkpoints.shared_relative_file("old-run", f"f{n}")), b"x")
    measured = {}

    def count(name: str, operation) -> None:
        server.reset()
        operation()
        measured[name] = server.snapshot()

    count("sensor poke, nothing new", lambda: find_completed_checkpoint(storage, newer_than=checkpoints))
    count("sensor poke, a new checkpoint", lambda: find_completed_checkpoint(storage, newer_than=checkpoints - 1))
    count("restore: resolve latest", storage.checkpoints.latest_valid)
    count(
        f"retention run ({checkpoints} checkpoints, keep 3)",
        lambda: apply_job_retention(
            storage, plan_job_retention(storage, num_retained=3, orphan_grace=0, now=time.time())
        ),
    )
    return measured


class RunningJob:
    """A real continuous job (small stateful count) with its checkpoint root on the counting S3 server."""

    def __init__(self, server: CountingS3Server, folder: Path, name: str, *options: str):
        root = f"s3://{server.bucket}/{name}"
        # Watching the job (newest checkpoint, answers) is the benchmark's cost, not the job's: not counted.
        self.storage = JobFolder(root, "counts", server.uncounted_options)
        self.landing = Landing(folder / "landing")
        self.landing.add_files(2)
        self.log_path = folder / "job.log"
        spec = folder / "spec.json"
        spec.write_text(json.dumps({"storage_options": server.options}))
        command = [
            sys.executable, "-m", "spark_checkpoint_runtime", "--job-name", "counts", "--checkpoint-root", root,
            "--working-dir", str(folder / "work"), "--pipeline", "examples.pipelines:running_counts",
            "--output-mode", "update", "--sink", f"parquet:{folder / 'out'}", "--trigger", "continuous",
            "--spec", str(spec), "--conf", f"spark.example.landing={self.landing.path}",
            "--conf", "spark.sql.shuffle.partitions=2", "--conf", "spark.ui.enabled=false", *options,
        ]  # fmt: skip
        # The caller's PYTHONPATH stays behind the repository: a benchmark of a work tree runs its runtime.
        path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
        env = {**os.environ, "PYTHONPATH": path, "PYSPARK_PYTHON": sys.executable}
        self._log = open(self.log_path, "wb")  # noqa: SIM115 - closed in stop()
        self.process = subprocess.Popen(command, cwd=REPO, env=env, stdout=self._log, stderr=subprocess.STDOUT)

    def newest(self) -> int:
        return max((m.id for m in self.storage.checkpoints.completed()), default=0)

    def feed_until(
        self, checkpoint_id: int, every: float, timeout: float = 3 * 3600, seen: dict[int, Any] | None = None
    ) -> int:
        """Land a file every ``every`` seconds until checkpoint ``checkpoint_id`` has completed (the job ages: a
        batch, and a checkpoint, for each file). Each completed checkpoint's ``_metadata`` goes into ``seen`` as
        it is found (retention keeps only the newest few). Returns the newest checkpoint id seen."""
        deadline = time.monotonic() + timeout
        newest = self.newest()
        while newest < checkpoint_id:
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(
                    f"checkpoint {checkpoint_id}: the job exited {self.process.returncode} or fell behind; "
                    f"see {self.log_path}"
                )
            self.landing.add_file()
            time.sleep(every)
            completed = self.storage.checkpoints.completed()
            newest = max((m.id for m in completed), default=0)
            if seen is not None:
                seen.update((m.id, m) for m in completed if m.kind == "checkpoint")
        return newest

    def wait(self, condition, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{what}: job exited {self.process.returncode} or timed out; see {self.log_path}")
            time.sleep(0.5)

    def started(self) -> None:
        """Wait for its first checkpoints and a drained backlog: from here no data arrives unless added."""
        self.wait(lambda: self.newest() >= 2 and ControlChannel(self.storage).live_runs(), 300, "first checkpoints")
        time.sleep(5)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=120)
        self._log.close()


def _idle_rate(server: CountingS3Server, seconds: float) -> dict[str, float]:
    """Requests per second by kind while nothing arrives."""
    server.reset()
    started = time.monotonic()
    time.sleep(seconds)
    counts = server.snapshot()
    elapsed = time.monotonic() - started
    return {kind: count / elapsed for kind, count in counts.items()}


def _checkpoints_while_fed(
    job: RunningJob,
    server: CountingS3Server,
    idle: dict[str, float],
    files: int,
    every: float,
    settle: float,
    metadata: dict[int, Any] | None = None,
) -> dict[str, Any]:
    """Feed ``files`` files ``every`` seconds apart, then wait until no checkpoint has completed for ``settle``
    seconds; requests per checkpoint completed meanwhile (counted, not inferred from ids: a declined checkpoint
    skips one), net of idle. ``metadata`` receives each of those checkpoints' ``_metadata`` as it is found:
    retention keeps only the newest few, so reading them afterwards would miss the rest.
    """
    before, started = job.newest(), time.monotonic()
    seen: set[int] = set()

    def look() -> int:
        completed = [m for m in job.storage.checkpoints.completed() if m.kind == "checkpoint" and m.id > before]
        seen.update(m.id for m in completed)
        if metadata is not None:
            metadata.update((m.id, m) for m in completed)
        return max(seen, default=before)

    server.reset()
    for _ in range(files):
        job.landing.add_file()
        time.sleep(every)
        look()
    # Then until no checkpoint has completed for longer than the interval: the job is idle again, so no
    # checkpoint is half counted when the window closes.
    changed, newest = time.monotonic(), look()
    while time.monotonic() - changed < settle:
        if job.process.poll() is not None or time.monotonic() - changed > 120:
            raise RuntimeError(f"the job exited {job.process.returncode} or kept checkpointing; see {job.log_path}")
        time.sleep(1)
        if look() != newest:
            changed, newest = time.monotonic(), look()
    if not seen:
        raise RuntimeError(f"no checkpoint completed while data arrived; see {job.log_path}")
    busy, elapsed, made = server.snapshot(), time.monotonic() - started, len(seen)
    net = {kind: (count - idle[kind] * elapsed) / made for kind, count in busy.items()}
    return {
        "checkpoints": made,
        "first_id": before + 1,
        "retained": len(job.storage.checkpoints.ids()),
        "seconds": round(elapsed, 1),
        "requests": busy,
        "per_checkpoint": round(net["total"], 1),
        "per_checkpoint_by_kind": {kind: round(value, 1) for kind, value in net.items() if kind != "total"},
    }


def checkpoint_cost_by_age(server: CountingS3Server, folder: Path, age: int) -> dict[str, Any]:
    """Requests per checkpoint when the job is young (few checkpoints retained) and after ``age`` more
    checkpoints (with 100 retained): a 1 s interval, a file every 2 s, the same small state both times."""
    job = RunningJob(server, folder, "aging", "--checkpoint-interval", "1s", "--num-retained", "100")
    try:
        job.started()
        idle = _idle_rate(server, 30)
        young = _checkpoints_while_fed(job, server, idle, 10, 2, settle=4)
        job.feed_until(job.newest() + age, every=0.7)  # age the job: a batch, and a checkpoint, about every second
        time.sleep(5)
        old = _checkpoints_while_fed(job, server, idle, 10, 2, settle=4)
    finally:
        job.stop()
    return {"young": young, f"after {age} more checkpoints": old}


def running_job(server: CountingS3Server, idle_seconds: float, folder: Path) -> dict[str, Any]:
    job = RunningJob(server, folder, "running")
    storage, wait = job.storage, job.wait

    try:
        job.started()
        server.reset()
        started = time.monotonic()
        time.sleep(idle_seconds)
        idle = server.snapshot()
        elapsed = time.monotonic() - started
        idle_rates = {kind: count / elapsed for kind, count in idle.items()}
        idle_rate = idle_rates["total"]

        # Data keeps arriving for a while: batches, and checkpoints at the default interval.
        busy = _checkpoints_while_fed(job, server, idle_rates, 10, 3, settle=12)  # the default 10 s interval

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
        job.process.wait(timeout=120)
    finally:
        job.stop()
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
        "checkpoints_while_busy": {k: busy[k] for k in ("checkpoints", "seconds", "requests")},
        "requests_per_checkpoint_net_of_idle": busy["per_checkpoint"],
        "savepoint": {"requests": savepoint, "net_of_idle": round(savepoint_net, 1)},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--idle-seconds", type=float, default=180)
    parser.add_argument("--checkpoints", type=int, default=20)
    parser.add_argument("--shared-files", type=int, default=1000)
    parser.add_argument("--skip-job", action="store_true", help="storage operations only (no Spark)")
    parser.add_argument("--age", type=int, default=100, help="checkpoints between the young and the old measure")
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
            with tempfile.TemporaryDirectory(prefix="request-cost-age-") as folder:
                result["running_job"]["checkpoint_by_age"] = checkpoint_cost_by_age(server, Path(folder), args.age)
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
        for name, aged in job["checkpoint_by_age"].items():
            print(
                f"per checkpoint, {name} (from chk-{aged['first_id']}, {aged['retained']} retained): "
                f"{aged['per_checkpoint']} ({aged['per_checkpoint_by_kind']})"
            )
    write_result(args.out, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
