"""A job's checkpoints over its life: no growth over 1,000 checkpoints, and storage bounded by live state.

    .venv/bin/python -m benchmarks.long_run [--partitions 200] [--checkpoints 1000] [--window 20] \
        [--samples 20,100,250,500,750,1000] [--latency-ms 15] [--working-dir /dev/shm]

A real continuous job (``python -m spark_checkpoint_runtime``, the stateful running count on the HDFS-backed
store, file merging on, the default retention) checkpoints every second to the loopback S3 server that
counts requests and makes each wait ``--latency-ms``, while a file lands about every second, until it has
made ``--checkpoints`` checkpoints: one per batch, so the job ages as fast as its batches run. Spark's own
working folder and the output live under ``--working-dir`` (a RAM disk by default: a 200-partition batch
on this machine's disk takes seconds, and what ages here is the checkpoint store, not that disk).

At each sample, over the next ``--window`` checkpoints: requests per checkpoint by kind (everything the job
sent, its polls and heartbeats included, so a constant), each checkpoint's duration from ``_metadata``
(p50, p95, max), then the bytes stored under the job's folder against the live bytes, those the retained
checkpoints reference (file merging's compaction must keep the first proportional to the second), and the
resident memory of the job's Python driver and its JVM. Writes ``benchmarks/long_run.json``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.processes import jvms_under  # noqa: E402
from benchmarks.provenance import write_result  # noqa: E402
from benchmarks.request_cost import RunningJob  # noqa: E402
from benchmarks.s3_requests import CountingS3Server  # noqa: E402
from benchmarks.scale import timing  # noqa: E402
from spark_checkpoint_runtime.layout.names import SEGMENTS_DIR  # noqa: E402

FEED_EVERY = 1.0  # seconds between landed files: more than a batch consumes, so batches run back to back


def stored_and_live(job: RunningJob) -> dict[str, int]:
    """Bytes under the job's folder, the bytes the retained checkpoints reference (a range counted once), and
    the segments those ranges lie in (compaction leaves a segment alone until its dead bytes reach a floor)."""
    storage = job.storage
    stored = storage.job_files()
    live: dict[tuple[str, int | None], int] = {}
    for meta in storage.checkpoints.completed():
        for entry in meta.files:
            live[(entry.path, entry.offset)] = entry.size
    return {
        "stored_bytes": sum(stored.values()),
        "live_bytes": sum(live.values()),
        "segments_referenced": len({path for path, offset in live if offset is not None}),
        "segments_stored": sum(1 for path in stored if SEGMENTS_DIR in path.split("/")),
    }


def resident_mib(job: RunningJob) -> dict[str, float]:
    """Resident memory of the job's driver (Python) and of its JVM."""
    import psutil

    driver = psutil.Process(job.process.pid)
    jvm = jvms_under(driver)
    return {
        "driver_python_mib": round(driver.memory_info().rss / 2**20, 1),
        "jvm_mib": round(sum(c.memory_info().rss for c in jvm) / 2**20, 1),
    }


def measure_window(job: RunningJob, server: CountingS3Server, window: int) -> dict[str, Any]:
    """The next ``window`` checkpoints: requests, durations, trigger gaps; then storage and memory."""
    first = job.newest() + 1
    last = first + window - 1
    seen: dict[int, Any] = {}
    server.reset()
    started = time.monotonic()
    newest = job.feed_until(last, FEED_EVERY, timeout=window * 120, seen=seen)
    counts, elapsed = server.snapshot(), time.monotonic() - started
    completed = newest - first + 1  # by id: requests are divided by every checkpoint made meanwhile
    return {
        "first_id": first,
        "checkpoints": completed,
        "seconds": round(elapsed, 1),
        "requests_per_checkpoint": round(counts["total"] / completed, 1),
        "requests_per_checkpoint_by_kind": {
            kind: round(n / completed, 1) for kind, n in counts.items() if kind != "total" and n
        },
        **timing([seen[i] for i in sorted(seen) if first <= i <= last]),
        **stored_and_live(job),
        **resident_mib(job),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=200)
    parser.add_argument("--checkpoints", type=int, default=1000, help="checkpoints the job makes in all")
    parser.add_argument("--window", type=int, default=20, help="checkpoints measured at each sample")
    parser.add_argument("--samples", default="20,100,250,500,750", help="checkpoint ids where a window starts")
    parser.add_argument("--latency-ms", type=float, default=15.0)
    parser.add_argument("--working-dir", default="/dev/shm", help="where Spark's working folder lives")
    parser.add_argument("--out", default=str(REPO / "benchmarks" / "long_run.json"))
    args = parser.parse_args(argv)
    argv = list(sys.argv[1:] if argv is None else argv)
    samples = sorted({int(s) for s in args.samples.split(",")} | {args.checkpoints - args.window + 1})
    server = CountingS3Server(latency=args.latency_ms / 1000).start()
    windows: list[dict[str, Any]] = []
    started = time.monotonic()
    try:
        with tempfile.TemporaryDirectory(prefix="bench-long-run-", dir=args.working_dir) as folder:
            job = RunningJob(
                server, Path(folder), "long-run",
                "--conf", f"spark.sql.shuffle.partitions={args.partitions}", "--checkpoint-interval", "1s",
                "--file-merging", "auto",
            )  # fmt: skip
            try:
                job.started()
                for sample in samples:
                    job.feed_until(sample - 1, FEED_EVERY)
                    windows.append(measure_window(job, server, args.window))
                    print(windows[-1], flush=True)
                    write_result(args.out, result(args, argv, windows, started))
            finally:
                job.stop()
    finally:
        server.stop()
    write_result(args.out, result(args, argv, windows, started))
    return 0


def result(args: argparse.Namespace, argv: list[str], windows: list[dict[str, Any]], started: float) -> dict:
    return {
        "partitions": args.partitions,
        "checkpoints": args.checkpoints,
        "interval_seconds": 1,
        "latency_ms": args.latency_ms,
        "working_dir": args.working_dir,
        "minutes": round((time.monotonic() - started) / 60, 1),
        "windows": windows,
        "argv": argv,
    }


if __name__ == "__main__":
    sys.exit(main())
