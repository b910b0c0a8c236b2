"""Checkpoints at the scale users run: 4 to 200+ shuffle partitions with the checkpoint root on S3.

    .venv/bin/python -m benchmarks.scale [--partitions 4,50,200,1000] [--latency-ms 15] [--files 30] [--every 3]
    .venv/bin/python -m benchmarks.scale --partitions 200 --queries count,dedup,join --stores hdfs,rocksdb \
        --merging auto --out benchmarks/scale_queries.json

A real continuous job (``python -m spark_checkpoint_runtime``, by default a stateful running count on the
HDFS-backed store; ``--queries`` adds dropDuplicates and a stream-stream join, whose four state stores per
partition write four times the files, and ``--stores`` RocksDB; a 10 s checkpoint interval) checkpoints to a
loopback S3 server (moto) that counts requests by kind
and makes each one wait ``--latency-ms`` first, as a real region does. For each partition count the job
runs twice, with file merging off and on (``--file-merging off|auto``), one after the other in this
process (from ``--merging-only-from`` partitions on only with merging: without it such a job falls
behind), while a file lands every ``--every`` seconds. Per checkpoint: requests by kind (net of the idle
job's polls and heartbeats), the files and bytes it wrote, its duration (p50, p95, max from ``_metadata``),
and what its requests would cost a month at S3's published prices with a checkpoint every 10 s.
Prints a table, writes JSON (every run kept).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.provenance import write_result  # noqa: E402
from benchmarks.request_cost import RunningJob, _checkpoints_while_fed, _idle_rate  # noqa: E402
from benchmarks.s3_requests import CountingS3Server  # noqa: E402

# S3 Standard request prices (us-east-1), USD per 1,000 requests: PUT, COPY, POST, LIST at one price; GET
# and HEAD at another; DELETE is free (a batched delete is a POST).
PRICE_PER_1000 = {"PUT": 0.005, "COPY": 0.005, "LIST": 0.005, "DELETE_BATCH": 0.005, "GET": 0.0004, "HEAD": 0.0004}
CHECKPOINTS_PER_MONTH = 6 * 60 * 24 * 30  # one every 10 s
INTERVAL_SECONDS = 10


def monthly_cost(per_checkpoint_by_kind: dict[str, float]) -> float:
    """USD a month for the requests of one checkpoint every 10 s."""
    per_checkpoint = sum(
        max(0.0, n) * PRICE_PER_1000.get(kind, 0.0) / 1000 for kind, n in per_checkpoint_by_kind.items()
    )
    return round(per_checkpoint * CHECKPOINTS_PER_MONTH, 2)


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def new_files(meta, previous) -> tuple[int, int]:
    """Objects a checkpoint wrote (a segment counts once) and the files in them, against the one before it."""
    known = {(f.path, f.offset) for f in previous.files} if previous is not None else set()
    fresh = [f for f in meta.files if (f.path, f.offset) not in known]
    return len({f.path for f in fresh}), len(fresh)


def timing(metas: list) -> dict[str, dict[str, Any]]:
    """Each checkpoint's duration from its ``_metadata`` (p50, p95, max and all), and the seconds between one
    checkpoint's trigger and the next's while data arrived (p50, max): a job that keeps up triggers one every
    interval, or after every batch when a batch takes longer than the interval."""
    durations = [m.durations_ms.get("total", 0) / 1000 for m in metas]
    triggers = [m.trigger_timestamp_ms / 1000 for m in metas]
    gaps = [later - earlier for earlier, later in zip(triggers, triggers[1:], strict=False)]
    return {
        "checkpoint_seconds": {
            "p50": round(statistics.median(durations), 2) if durations else None,
            "p95": round(percentile(durations, 0.95), 2) if durations else None,
            "max": round(max(durations), 2) if durations else None,
            "all": [round(d, 2) for d in durations],
        },
        "trigger_gap_seconds": {
            "p50": round(statistics.median(gaps), 2) if gaps else None,
            "max": round(max(gaps), 2) if gaps else None,
        },
    }


# Query name -> (pipeline, output mode): the stateful operators users run most.
QUERIES = {
    "count": ("examples.pipelines:running_counts", "update"),
    "dedup": ("examples.pipelines:distinct_pairs", "append"),
    "join": ("examples.pipelines:joined_events", "append"),
}
PROVIDERS = {"rocksdb": "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"}


def one_run(
    server: CountingS3Server,
    folder: Path,
    partitions: int,
    merging: str,
    files: int,
    every: float,
    query: str = "count",
    store: str = "hdfs",
) -> dict:
    name = f"p{partitions}-{merging}-{query}-{store}"
    pipeline, mode = QUERIES[query]
    provider = (
        ("--conf", f"spark.sql.streaming.stateStore.providerClass={PROVIDERS[store]}") if store in PROVIDERS else ()
    )
    job = RunningJob(
        server, folder / name, name,
        "--conf", f"spark.sql.shuffle.partitions={partitions}", "--file-merging", merging,
        "--checkpoint-interval", f"{INTERVAL_SECONDS}s", "--pipeline", pipeline, "--output-mode", mode, *provider,
    )  # fmt: skip
    metas: dict = {}
    try:
        job.started()
        idle = _idle_rate(server, 20)
        busy = _checkpoints_while_fed(job, server, idle, files, every, settle=14, metadata=metas)
    finally:
        job.stop()
    ids = sorted(metas)
    written = [new_files(metas[i], metas.get(i - 1)) for i in ids[1:]]
    return {
        "partitions": partitions,
        "query": query,
        "store": store,
        "file_merging": merging,
        "checkpoints": busy["checkpoints"],
        "requests_per_checkpoint": busy["per_checkpoint"],
        "requests_per_checkpoint_by_kind": busy["per_checkpoint_by_kind"],
        "objects_written_per_checkpoint": statistics.median(w[0] for w in written) if written else None,
        "files_per_checkpoint": statistics.median(w[1] for w in written) if written else None,
        **timing([metas[i] for i in ids]),
        "interval_seconds": INTERVAL_SECONDS,
        "batches_covered": (metas[ids[-1]].batch_id - metas[ids[0]].batch_id + 1) if ids else 0,
        "monthly_request_cost_usd": monthly_cost(busy["per_checkpoint_by_kind"]),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", default="4,50,200,1000", help="comma-separated shuffle partition counts")
    parser.add_argument(
        "--merging-only-from",
        type=int,
        default=1000,
        help="from this partition count on, run with file merging only (unmerged, such a job falls behind)",
    )
    parser.add_argument("--queries", default="count", help=f"comma-separated, of {', '.join(QUERIES)}")
    parser.add_argument("--stores", default="hdfs", help="comma-separated state stores: hdfs, rocksdb")
    parser.add_argument("--merging", help="only this file merging mode (default: off, then auto)")
    parser.add_argument("--latency-ms", type=float, default=15.0, help="wait before each S3 request (default 15)")
    parser.add_argument(
        "--files", type=int, default=30, help="files landed while measuring (default 30: 90 s, several checkpoints)"
    )
    parser.add_argument("--every", type=float, default=3.0, help="seconds between landed files (default 3)")
    parser.add_argument("--out", default=str(REPO / "benchmarks" / "scale.json"))
    args = parser.parse_args(argv)
    argv = list(sys.argv[1:] if argv is None else argv)
    runs = []
    server = CountingS3Server(latency=args.latency_ms / 1000).start()
    try:
        with tempfile.TemporaryDirectory(prefix="bench-scale-") as folder:
            for partitions in [int(p) for p in args.partitions.split(",")]:
                modes = ("auto",) if partitions >= args.merging_only_from else ("off", "auto")
                for query in args.queries.split(","):
                    for store in args.stores.split(","):
                        for merging in (args.merging,) if args.merging else modes:
                            try:
                                run = one_run(
                                    server, Path(folder), partitions, merging, args.files, args.every, query, store
                                )
                            except RuntimeError as exc:  # kept as a finding: a job that did not keep up
                                run = {"partitions": partitions, "query": query, "store": store,
                                       "file_merging": merging, "checkpoints": 0, "failed": str(exc)}  # fmt: skip
                            runs.append(run)
                            print(json.dumps({k: v for k, v in run.items() if k != "checkpoint_seconds"}), flush=True)
                            # Written after every run: a later failure loses none of them.
                            write_result(args.out, {"latency_ms": args.latency_ms, "runs": runs, "argv": argv})
    finally:
        server.stop()
    print("\n| partitions | file merging | requests/checkpoint | objects written | checkpoint p50 / p95 / max s "
          "| $ per month (10 s) |\n|---|---|---|---|---|---|")  # fmt: skip
    for run in runs:
        if run.get("failed"):
            print(f"| {run['partitions']} | {run['file_merging']} | failed: {run['failed']} |")
            continue
        seconds = run["checkpoint_seconds"]
        print(
            f"| {run['partitions']} | {run['file_merging']} | {run['requests_per_checkpoint']} "
            f"| {run['objects_written_per_checkpoint']} | {seconds['p50']} / {seconds['p95']} / {seconds['max']} "
            f"| {run['monthly_request_cost_usd']} |"
        )
    write_result(args.out, {"latency_ms": args.latency_ms, "runs": runs, "argv": argv})
    return 0


if __name__ == "__main__":
    sys.exit(main())
