"""Benchmarks against plain Spark Structured Streaming, measured in the same run on the same machine.

    .venv/bin/python -m benchmarks.run [--scale small|medium] [--rounds N] [--out benchmarks/results.json]

One local SparkSession runs everything. Plain Spark and our runtime alternate (A B A B ...) over the same
input, each time in fresh folders:

- ``overhead``: available-now over a fixed input, stateless (plain: Spark's exactly-once file sink; ours:
  the two-phase Parquet sink) and stateful (a running count per key in update mode; plain writes each
  batch with foreachBatch, Spark's usual way for update mode). Wall time and rows/s, ratio ours/plain.
- ``checkpoint_cost``: for the stateful runs, our checkpoint's synchronous part (capture) and its
  asynchronous upload, against Spark's own ``walCommit`` + ``commitOffsets`` per batch; and, after a
  batch that changes 1 % of the keys, bytes written against total state bytes.
- ``restore``: one more batch after a restart, ours (restore from the latest checkpoint into a fresh
  working folder) against plain Spark (restart from its intact checkpoint folder).

Prints a table per benchmark and writes everything to a JSON file.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks import pipelines  # noqa: E402
from examples.landing import Landing  # noqa: E402

SCALES = {
    # files, rows per file, distinct keys
    "tiny": (4, 200, 100),
    "small": (12, 20_000, 20_000),
    "medium": (24, 50_000, 200_000),
}


def make_session() -> Any:
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("checkpoint-benchmarks")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def landing_for(base: Path, scale: str) -> Landing:
    files, rows, keys = SCALES[scale]
    landing = Landing(base / "landing", keys=[f"key-{n}" for n in range(keys)])
    landing.add_files(files, rows=rows)
    return landing


def _source(spark: Any, landing: Path, stateful: bool, per_trigger: int = 4) -> Any:
    spark.conf.set("spark.benchmark.landing", str(landing))
    spark.conf.set("spark.benchmark.maxFilesPerTrigger", str(per_trigger))
    return pipelines.stateful(spark) if stateful else pipelines.stateless(spark)


def run_plain(spark: Any, landing: Path, work: Path, stateful: bool) -> dict[str, Any]:
    """Plain Spark: native checkpoint folder, exactly-once file sink (or foreachBatch for update mode)."""
    out, checkpoint = work / "out", work / "spark-checkpoint"
    writer = _source(spark, landing, stateful).writeStream.option("checkpointLocation", str(checkpoint))
    if stateful:
        writer = writer.outputMode("update").foreachBatch(
            lambda df, batch: df.write.mode("append").parquet(str(out / f"batch={batch}"))
        )
    else:
        writer = writer.format("parquet").option("path", str(out))
    started = time.perf_counter()
    query = writer.trigger(availableNow=True).start()
    query.awaitTermination()
    elapsed = time.perf_counter() - started
    progress = query.recentProgress
    rows = sum(p.numInputRows for p in progress)
    spark_commit_ms = [
        (p.durationMs.get("walCommit", 0) + p.durationMs.get("commitOffsets", 0)) for p in progress if p.numInputRows
    ]
    return {"seconds": elapsed, "rows": rows, "batches": len(progress), "spark_commit_ms": spark_commit_ms}


def run_ours(
    spark: Any,
    landing: Path,
    work: Path,
    stateful: bool,
    *,
    interval: str = "10s",
    restore: str = "latest",
    trigger: str = "available-now",
    max_duration: str | None = None,
    per_trigger: int = 4,
) -> dict[str, Any]:
    """Our runtime in the same session: checkpoints to a local root, two-phase Parquet sink."""
    from runtime.options import options_from_mapping
    from runtime.streaming_job import StreamingJob

    options = options_from_mapping(
        {
            "job_name": "bench",
            "checkpoint_root": str(work / "root"),
            "working_dir": str(work / "work"),
            "pipeline": "benchmarks.pipelines:stateful" if stateful else "benchmarks.pipelines:stateless",
            "sink": f"parquet:{work / 'out'}",
            "output_mode": "update" if stateful else "append",
            "checkpoint_interval": interval,
            "restore_from": restore,
            "trigger": trigger,
            **({"max_duration": max_duration} if max_duration else {}),
            "conf": {"spark.benchmark.landing": str(landing), "spark.benchmark.maxFilesPerTrigger": str(per_trigger)},
        }
    )
    started = time.perf_counter()
    result = StreamingJob(options, spark).run()
    elapsed = time.perf_counter() - started
    metas = [json.loads(p.read_text()) for p in sorted((work / "root" / "bench").glob("chk-*/_metadata"))]
    return {"seconds": elapsed, "rows": result["rows"], "batches": result["batches"], "checkpoints": metas}


def overhead(spark: Any, base: Path, scale: str, rounds: int) -> dict[str, Any]:
    """A B A B over the same input: plain Spark, then ours, ``rounds`` times, stateless and stateful."""
    landing = landing_for(base, scale)
    # Warm-up, discarded: the first queries in a JVM pay for class loading and JIT compilation.
    run_plain(spark, landing.path, base / "warm-plain", True)
    run_ours(spark, landing.path, base / "warm-ours", True)
    report: dict[str, Any] = {}
    for stateful in (False, True):
        name = "stateful" if stateful else "stateless"
        plain, ours = [], []
        for number in range(rounds):
            a = base / f"{name}-plain-{number}"
            plain.append(run_plain(spark, landing.path, a, stateful))
            b = base / f"{name}-ours-{number}"
            ours.append(run_ours(spark, landing.path, b, stateful))
            shutil.rmtree(a, ignore_errors=True)
            if number < rounds - 1:
                shutil.rmtree(b, ignore_errors=True)
        plain_s = statistics.median(r["seconds"] for r in plain)
        ours_s = statistics.median(r["seconds"] for r in ours)
        rows = ours[0]["rows"]
        checkpoints = [c for r in ours for c in r["checkpoints"]]
        report[name] = {
            "rows": rows,
            "plain_seconds": round(plain_s, 3),
            "ours_seconds": round(ours_s, 3),
            "ratio_wall_time": round(ours_s / plain_s, 3),
            "plain_rows_per_second": round(rows / plain_s),
            "ours_rows_per_second": round(rows / ours_s),
            "ratio_rows_per_second": round(plain_s / ours_s, 3),
            "checkpoint_capture_ms_median": _median([c["durations_ms"]["capture"] for c in checkpoints]),
            "checkpoint_upload_ms_median": _median([c["durations_ms"]["upload"] for c in checkpoints]),
            "spark_wal_plus_commit_ms_median": _median([m for r in plain for m in r["spark_commit_ms"]]),
        }
    return report


def run_plain_continuous(spark: Any, landing: Path, work: Path, stateful: bool, seconds: float) -> dict[str, Any]:
    """Plain Spark for ``seconds`` with a processing-time trigger of 0 over a backlog: rows per second."""
    out, checkpoint = work / "out", work / "spark-checkpoint"
    writer = _source(spark, landing, stateful, per_trigger=1).writeStream.option("checkpointLocation", str(checkpoint))
    if stateful:
        writer = writer.outputMode("update").foreachBatch(
            lambda df, batch: df.write.mode("append").parquet(str(out / f"batch={batch}"))
        )
    else:
        writer = writer.format("parquet").option("path", str(out))
    query = writer.trigger(processingTime="0 seconds").start()
    time.sleep(seconds)
    # Like ours: let the batch in flight at D finish, then stop (a busy query is never idle).
    in_flight = (query.lastProgress or {}).get("batchId", -1) + 1
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and (query.lastProgress or {}).get("batchId", -1) < in_flight:
        time.sleep(0.02)
    query.stop()
    return {"seconds": seconds, "rows": sum(p.numInputRows for p in query.recentProgress)}


def continuous_overhead(spark: Any, base: Path, seconds: float, rounds: int) -> dict[str, Any]:
    """Rows per second over a fixed time, plain against ours at checkpoint intervals of 10 s and 1 s."""
    landing = Landing(base / "continuous-landing", keys=[f"key-{n}" for n in range(5000)])
    landing.add_files(400, rows=2000)  # a backlog no run drains in time
    report: dict[str, Any] = {}
    for stateful in (False, True):
        for interval in ("10s", "1s"):
            plain, ours = [], []
            for number in range(rounds):
                tag = f"{'stateful' if stateful else 'stateless'}-{interval}-{number}"
                plain.append(run_plain_continuous(spark, landing.path, base / f"c-plain-{tag}", stateful, seconds))
                ours.append(
                    run_ours(
                        spark,
                        landing.path,
                        base / f"c-ours-{tag}",
                        stateful,
                        interval=interval,
                        trigger="continuous",
                        max_duration=f"{seconds}s",
                        per_trigger=1,
                    )
                )
            # Both windows start when the query starts and end after the batch in flight at D: rows / D.
            plain_rate = statistics.median(r["rows"] / seconds for r in plain)
            ours_rate = statistics.median(r["rows"] / seconds for r in ours)
            report[f"{'stateful' if stateful else 'stateless'} @ {interval}"] = {
                "plain_rows_per_second": round(plain_rate),
                "ours_rows_per_second": round(ours_rate),
                "ratio_rows_per_second": round(ours_rate / plain_rate, 3),
                "overhead_percent": round((1 - ours_rate / plain_rate) * 100, 1),
            }
    return report


def checkpoint_cost(spark: Any, base: Path, scale: str) -> dict[str, Any]:
    """Bytes written by the checkpoint after a batch that changes 1 % of the keys, against state bytes."""
    _, _, keys = SCALES[scale]
    landing = Landing(base / "cost-landing", keys=[f"key-{n}" for n in range(keys)])
    landing.add_file(rows=keys)  # every key once: the full state
    work = base / "cost"
    run_ours(spark, landing.path, work, True)
    changed = [f"key-{n}" for n in range(0, keys, 100)]  # 1 % of the keys
    landing.add_file(rows=len(changed), keys=changed)
    second = run_ours(spark, landing.path, work, True)
    latest = second["checkpoints"][-1]
    first = second["checkpoints"][0]
    changed_state = sum(
        f["size"] for f in latest["files"] if f["shared"] and f["path"] not in {g["path"] for g in first["files"]}
    )
    return {
        "keys": keys,
        "changed_keys": len(changed),
        "state_bytes": latest["state_bytes"],
        "bytes_written": latest["bytes_written"],
        "changed_state_file_bytes": changed_state,
        "written_to_state_ratio": round(latest["bytes_written"] / max(latest["state_bytes"], 1), 4),
        "written_to_changed_state_ratio": round(latest["bytes_written"] / max(changed_state, 1), 2),
        "capture_ms": latest["durations_ms"]["capture"],
        "upload_ms": latest["durations_ms"]["upload"],
    }


def restore(spark: Any, base: Path, scale: str) -> dict[str, Any]:
    """Time for one new batch after a restart: ours restores from our storage, plain Spark from its folder."""
    landing = landing_for(base / "restore", scale)
    plain_work, ours_work = base / "restore-plain", base / "restore-ours"
    run_plain(spark, landing.path, plain_work, True)
    run_ours(spark, landing.path, ours_work, True)
    landing.add_file(rows=100)
    plain = run_plain(spark, landing.path, plain_work, True)
    ours = run_ours(spark, landing.path, ours_work, True)
    state = ours["checkpoints"][-1]["state_bytes"]
    return {
        "state_bytes": state,
        "plain_seconds": round(plain["seconds"], 3),
        "ours_seconds": round(ours["seconds"], 3),
        "ratio": round(ours["seconds"] / plain["seconds"], 3),
    }


def _median(values: list[float]) -> float | None:
    return round(statistics.median(values), 1) if values else None


def run_all(spark: Any, scale: str, rounds: int, base: Path, continuous_seconds: float = 0) -> dict[str, Any]:
    return {
        "scale": scale,
        "rounds": rounds,
        "overhead": overhead(spark, base, scale, rounds),
        "continuous": continuous_overhead(spark, base, continuous_seconds, rounds) if continuous_seconds else {},
        "checkpoint_cost": checkpoint_cost(spark, base, scale),
        "restore": restore(spark, base, scale),
    }


def print_tables(results: dict[str, Any]) -> None:
    print(f"\n== overhead (available-now, scale {results['scale']}, median of {results['rounds']} A/B rounds)")
    print(
        f"{'query':<10} {'rows':>9} {'plain s':>8} {'ours s':>8} {'ours/plain':>10} {'rows/s plain':>13} "
        f"{'rows/s ours':>12} {'capture ms':>10} {'upload ms':>9} {'spark wal+commit ms':>19}"
    )
    for name, r in results["overhead"].items():
        print(
            f"{name:<10} {r['rows']:>9} {r['plain_seconds']:>8} {r['ours_seconds']:>8} {r['ratio_wall_time']:>10} "
            f"{r['plain_rows_per_second']:>13} {r['ours_rows_per_second']:>12} "
            f"{r['checkpoint_capture_ms_median']!s:>10} {r['checkpoint_upload_ms_median']!s:>9} "
            f"{r['spark_wal_plus_commit_ms_median']!s:>19}"
        )
    if results["continuous"]:
        print(f"\n== overhead (continuous, {results['continuous_seconds']} s per run, median of {results['rounds']})")
        print(
            f"{'query @ interval':<18} {'rows/s plain':>13} {'rows/s ours':>12} {'ours/plain':>10} {'overhead %':>10}"
        )
        for name, r in results["continuous"].items():
            print(
                f"{name:<18} {r['plain_rows_per_second']:>13} {r['ours_rows_per_second']:>12} "
                f"{r['ratio_rows_per_second']:>10} {r['overhead_percent']:>10}"
            )
    c = results["checkpoint_cost"]
    print("\n== checkpoint cost after a batch changing 1 % of the keys")
    print(
        f"keys {c['keys']}, changed {c['changed_keys']}: state {c['state_bytes']} B, written {c['bytes_written']} B "
        f"({c['written_to_state_ratio']} of state; {c['written_to_changed_state_ratio']}x the changed state files), "
        f"capture {c['capture_ms']} ms (on the batch path: none; coordinator thread), upload {c['upload_ms']} ms"
    )
    r = results["restore"]
    print("\n== restore: one new batch after a restart")
    print(f"state {r['state_bytes']} B: plain {r['plain_seconds']} s, ours {r['ours_seconds']} s, ratio {r['ratio']}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.run", description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", choices=sorted(SCALES), default="small")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--continuous-seconds",
        type=float,
        default=30,
        help="length of each continuous run (0 skips the continuous benchmark)",
    )
    parser.add_argument("--out", default=str(REPO / "benchmarks" / "results.json"))
    args = parser.parse_args(argv)
    spark = make_session()
    base = Path(tempfile.mkdtemp(prefix="checkpoint-bench-"))
    try:
        results = run_all(spark, args.scale, args.rounds, base, args.continuous_seconds)
        results["continuous_seconds"] = args.continuous_seconds
    finally:
        shutil.rmtree(base, ignore_errors=True)
        spark.stop()
    print_tables(results)
    Path(args.out).write_text(json.dumps(results, indent=1))
    print(f"\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
