"""Benchmarks against plain Spark Structured Streaming, measured in the same run on the same machine.

    .venv/bin/python -m benchmarks.run [--scale small|medium] [--rounds N] [--out benchmarks/results.json]
    .venv/bin/python -m benchmarks.run --cluster     # on a standalone cluster it starts and stops
    .venv/bin/python -m benchmarks.run --master spark://HOST:PORT   # on a cluster you run

One SparkSession runs everything (local mode, or its driver here and executors on a cluster's workers).
Plain Spark and our runtime alternate over the same input on the same executors, each time in fresh
folders:

- ``overhead``: available-now over a fixed input, stateless (plain: Spark's exactly-once file sink; ours:
  the two-phase Parquet sink) and stateful (a running count per key in update mode; plain writes each
  batch with foreachBatch, Spark's usual way for update mode). Wall time and rows/s, ratio ours/plain.
- ``continuous``: steady-state rows/s over a backlog at checkpoint intervals of 10 s and 1 s, A/B pairs
  in alternating order after a warm-up; the median pair's ratio ours/plain, and each side's batch time
  (p50 and p95, medians over the pairs).

Checkpoint cost and restore time against state size are ``benchmarks.state_size``.

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
from contextlib import nullcontext
from datetime import datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks import pipelines  # noqa: E402
from benchmarks.estimate import NAME, Estimate, paired_ratios  # noqa: E402
from benchmarks.processes import jvms_under  # noqa: E402
from benchmarks.provenance import write_result  # noqa: E402
from benchmarks.s3_requests import S3ServerProcess  # noqa: E402
from tests.support.landing import Landing  # noqa: E402
from tests.support.local_cluster import standalone_cluster  # noqa: E402

SCALES = {
    # files, rows per file, distinct keys
    "tiny": (4, 200, 100),
    "small": (12, 20_000, 20_000),
    "medium": (24, 50_000, 200_000),
}


def make_session(driver_memory: str = "2g", master: str = "local[2]", partitions: int = 4) -> Any:
    import os

    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # executors on a cluster run this Python too
    spark = (
        SparkSession.builder.master(master)
        .appName("checkpoint-benchmarks")
        .config("spark.driver.memory", driver_memory)
        .config("spark.sql.shuffle.partitions", str(partitions))
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


def _pipeline(stateful: bool, pipeline: str | None) -> str:
    """The function in ``benchmarks.pipelines`` both sides run."""
    return pipeline or ("stateful" if stateful else "stateless")


def _source(spark: Any, landing: Path, stateful: bool, per_trigger: int = 4, pipeline: str | None = None) -> Any:
    spark.conf.set("spark.benchmark.landing", str(landing))
    spark.conf.set("spark.benchmark.maxFilesPerTrigger", str(per_trigger))
    return getattr(pipelines, _pipeline(stateful, pipeline))(spark)


def _plain_writer(
    spark: Any, landing: Path, work: Path, stateful: bool, per_trigger: int, pipeline: str | None = None
) -> Any:
    """Plain Spark's writer: native checkpoint folder, exactly-once file sink (or foreachBatch for update mode)."""
    out, checkpoint = work / "out", work / "spark-checkpoint"
    source = _source(spark, landing, stateful, per_trigger, pipeline)
    writer = source.writeStream.option("checkpointLocation", str(checkpoint))
    if stateful:
        return writer.outputMode("update").foreachBatch(
            lambda df, batch: df.write.mode("append").parquet(str(out / f"batch={batch}"))
        )
    return writer.format("parquet").option("path", str(out))


def run_plain(
    spark: Any, landing: Path, work: Path, stateful: bool, *, per_trigger: int = 4, pipeline: str | None = None
) -> dict[str, Any]:
    """Plain Spark, available-now: wall time, rows, and Spark's own walCommit + commitOffsets per batch.

    The time includes building the query, as ours' includes loading its pipeline: a restart does both.
    """
    started = time.perf_counter()
    writer = _plain_writer(spark, landing, work, stateful, per_trigger, pipeline)
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
    pipeline: str | None = None,
    root: str | None = None,
    storage_options: dict[str, Any] | None = None,
    num_retained: int | None = None,
    checkpoint_niceness: int | None = None,
) -> dict[str, Any]:
    """Our runtime in the same session: checkpoints to ``root`` (default a local folder), two-phase Parquet sink.

    ``num_retained`` overrides the default retention (3), for a caller that reads every checkpoint afterwards;
    ``checkpoint_niceness`` the runtime's ``--checkpoint-niceness`` (an A/B of the checkpoint threads' priority).
    """
    from spark_checkpoint_runtime.layout import JobFolder
    from spark_checkpoint_runtime.options import options_from_mapping
    from spark_checkpoint_runtime.run import StreamingJob

    root = root or str(work / "root")
    options = options_from_mapping(
        {
            "job_name": "bench",
            "checkpoint_root": root,
            "storage_options": storage_options or {},
            "working_dir": str(work / "work"),
            "pipeline": f"benchmarks.pipelines:{_pipeline(stateful, pipeline)}",
            "sink": f"parquet:{work / 'out'}",
            "output_mode": "update" if stateful else "append",
            "checkpoint_interval": interval,
            "restore_from": restore,
            "trigger": trigger,
            **({"max_duration": max_duration} if max_duration else {}),
            **({"num_retained": num_retained} if num_retained else {}),
            **({"checkpoint_niceness": checkpoint_niceness} if checkpoint_niceness is not None else {}),
            "conf": {"spark.benchmark.landing": str(landing), "spark.benchmark.maxFilesPerTrigger": str(per_trigger)},
        }
    )
    started, started_at = time.perf_counter(), time.time()
    result = StreamingJob(options, spark).run()
    elapsed, ended_at = time.perf_counter() - started, time.time()
    completed = JobFolder(root, "bench", storage_options).checkpoints.completed()
    metas = sorted((json.loads(m.to_json()) for m in completed), key=lambda m: m["id"])
    return {
        "seconds": elapsed,
        "rows": result["rows"],
        "batches": result["batches"],
        "checkpoints": metas,
        "step_seconds": result.get("step_seconds"),
        # Wall-clock bounds of the run alone (the reads above come after it): an S3 server's request timeline
        # is split at these.
        "started_at": started_at,
        "ended_at": ended_at,
    }


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


class ProgressLog:
    """Every progress event of the session's queries (ours runs its query inside ``StreamingJob``)."""

    def __init__(self, spark: Any):
        from pyspark.sql.streaming import StreamingQueryListener

        # batch id, rows, start s, duration s, state stores' commit ms (summed over partitions, as Spark reports it)
        self.events: list[tuple[int, int, float, float, float]] = []
        log = self

        class Listener(StreamingQueryListener):
            def onQueryStarted(self, event: Any) -> None:
                """Batches are in progress events."""

            def onQueryProgress(self, event: Any) -> None:
                p = event.progress
                started = datetime.fromisoformat(p.timestamp.replace("Z", "+00:00")).timestamp()
                took = p.durationMs.get("triggerExecution", 0) / 1000
                commit = sum(o.commitTimeMs or 0 for o in p.stateOperators)
                log.events.append((int(p.batchId), int(p.numInputRows), started, took, commit))

            def onQueryIdle(self, event: Any) -> None:
                """No batch, nothing to count."""

            def onQueryTerminated(self, event: Any) -> None:
                """The run's end is measured by the caller."""

        self.listener = Listener()
        spark.streams.addListener(self.listener)

    def take(self) -> list[tuple[int, int, float, float, float]]:
        """The events since the last call (the listener bus is asynchronous: let it drain first)."""
        time.sleep(0.5)
        events, self.events = self.events, []
        return sorted(events)


def steady_rate(events: list[tuple[int, int, float, float, float]]) -> dict[str, float]:
    """Rows per second by the wall clock from the end of the first batch to the end of the last one.

    The first batch carries the query's start-up (planning, code generation) on both sides; everything
    after it, including our checkpoints running beside the batches, counts.
    """
    batches = [e for e in events if e[1] > 0]
    if len(batches) < 3:
        raise RuntimeError(f"only {len(batches)} batches ran; lengthen --continuous-seconds")
    first, last = batches[0], batches[-1]
    window = (last[2] + last[3]) - (first[2] + first[3])
    rows = sum(e[1] for e in batches[1:])
    return {
        "rows_per_second": rows / window,
        "batches_per_minute": (len(batches) - 1) * 60 / window,
        "batches": len(batches),
        "batch_ms_median": statistics.median(e[3] for e in batches[1:]) * 1000,
        "batch_ms_p95": _percentile([e[3] * 1000 for e in batches[1:]], 95),
        # Where a 200-partition batch's time goes: the state stores' commits (a file per partition each).
        "state_commit_ms_median": statistics.median(e[4] for e in batches[1:]),
    }


def _percentile(values: list[float], percent: float) -> float:
    """The nearest-rank percentile (no interpolation: a value that was measured)."""
    ranked = sorted(values)
    return ranked[max(0, min(len(ranked) - 1, round(percent / 100 * len(ranked) + 0.5) - 1))]


def run_plain_continuous(spark: Any, landing: Path, work: Path, stateful: bool, seconds: float) -> None:
    """Plain Spark for ``seconds`` with a processing-time trigger of 0 over a backlog."""
    writer = _plain_writer(spark, landing, work, stateful, per_trigger=1)
    query = writer.trigger(processingTime="0 seconds").start()
    time.sleep(seconds)
    # Like ours: let the batch in flight at D finish, then stop (a busy query is never idle).
    in_flight = (query.lastProgress or {}).get("batchId", -1) + 1
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and (query.lastProgress or {}).get("batchId", -1) < in_flight:
        time.sleep(0.02)
    query.stop()


def quiet(spark: Any, pause_s: float = 3.0) -> None:
    """Let one run's after-effects pass before the next starts, so that they do not land in it.

    At 200 partitions a run leaves thousands of written and deleted files for the kernel to write back, and a
    heap of the stopped query's objects for the JVM to collect. Whichever side ran second in a pair inherited
    that work (in a 9-pair run at 200 partitions, at commit 4bf5c6e, the side that ran first was the faster on
    average): the alternation cancels that only on average, and it widens the interval. Each pair's runs are
    kept in the JSON with the side that went first, so the report shows whether the order still matters.
    """
    import os

    os.sync()
    spark._jvm.java.lang.System.gc()
    time.sleep(pause_s)


def continuous_overhead(
    spark: Any,
    base: Path,
    seconds: float,
    rounds: int,
    cases: list[tuple[bool, str]] | None = None,
    s3: S3ServerProcess | None = None,
    warmup_seconds: float = 15,
    checkpoint_niceness: int | None = None,
) -> dict[str, Any]:
    """Steady-state rows per second, plain against ours at checkpoint intervals of 10 s and 1 s.

    Each case runs ``rounds`` pairs after a discarded warm-up pair (``warmup_seconds`` each side), in A B,
    B A, A B ... order so that a drift of the JVM (JIT, heap) over the run favours neither side. At 200
    partitions batches still got faster for minutes after a 15 s warm-up (9.6 s at first, 7.4 s later), a
    drift the alternation cancels only on average: a longer warm-up narrows the interval. The ratio is taken
    per pair and reported as ``benchmarks.estimate`` does (median, bootstrap 95 % interval). With ``s3``, ours
    checkpoints to that S3 server; plain Spark keeps its checkpoint on local disk (it has no S3 client
    here), so the comparison is against plain Spark at its fastest.
    """
    landing = Landing(base / "continuous-landing", keys=[f"key-{n}" for n in range(5000)])
    landing.add_files(400, rows=2000)  # a backlog no run drains in time
    progress = ProgressLog(spark)
    cases = cases or [(stateful, interval) for stateful in (False, True) for interval in ("10s", "1s")]

    def one(side: str, stateful: bool, interval: str, tag: str, length: float) -> dict[str, float] | None:
        work = base / f"c-{side}-{tag}"
        progress.take()
        cpu_before, started = cpu_seconds(s3), time.monotonic()
        if side == "plain":
            run_plain_continuous(spark, landing.path, work, stateful, length)
        else:
            run_ours(
                spark,
                landing.path,
                work,
                stateful,
                interval=interval,
                trigger="continuous",
                max_duration=f"{length}s",
                per_trigger=1,
                checkpoint_niceness=checkpoint_niceness,
                **({"root": f"s3://{s3.bucket}/{tag}-{side}", "storage_options": s3.options} if s3 else {}),
            )
        cpu_after, minutes = cpu_seconds(s3), (time.monotonic() - started) / 60
        events = progress.take()
        shutil.rmtree(work, ignore_errors=True)
        quiet(spark)
        # A warm-up only warms: at 200 partitions its 15 s may hold a single batch, no rate to measure.
        if tag.startswith("warm-"):
            return None
        used = {f"{name}_cpu_s_per_minute": (cpu_after[name] - cpu_before[name]) / minutes for name in cpu_after}
        return {**steady_rate(events), **used}

    report: dict[str, Any] = {}
    try:
        for stateful in sorted({s for s, _ in cases}):
            for side in ("plain", "ours"):  # warm-up, discarded
                one(side, stateful, "10s", f"warm-{stateful}", min(seconds, warmup_seconds))
        for stateful, interval in cases:
            name = f"{'stateful' if stateful else 'stateless'} @ {interval}"
            pairs = []
            for number in range(rounds):
                tag = f"{name.replace(' @ ', '-')}-{number}"
                order = ("plain", "ours") if number % 2 == 0 else ("ours", "plain")
                pairs.append({side: one(side, stateful, interval, tag, seconds) for side in order})
                pairs[-1]["order"] = list(order)
            ratios = [p["ours"]["rows_per_second"] / p["plain"]["rows_per_second"] for p in pairs]
            ratio = statistics.median(ratios)
            batch_ratios = [p["ours"]["batches_per_minute"] / p["plain"]["batches_per_minute"] for p in pairs]
            per_minute = {side: [p[side]["batches_per_minute"] for p in pairs] for side in ("plain", "ours")}
            report[name] = {
                "plain_batches_per_minute": round(statistics.median(per_minute["plain"]), 1),
                "ours_batches_per_minute": round(statistics.median(per_minute["ours"]), 1),
                "batches_per_minute_ratio": paired_ratios(batch_ratios).as_dict(),
                "rows_per_second_ratio": paired_ratios(ratios).as_dict(),
                "plain_rows_per_second": round(statistics.median(p["plain"]["rows_per_second"] for p in pairs)),
                "ours_rows_per_second": round(statistics.median(p["ours"]["rows_per_second"] for p in pairs)),
                "plain_batch_ms_median": round(statistics.median(p["plain"]["batch_ms_median"] for p in pairs)),
                "ours_batch_ms_median": round(statistics.median(p["ours"]["batch_ms_median"] for p in pairs)),
                "plain_batch_ms_p95": round(statistics.median(p["plain"]["batch_ms_p95"] for p in pairs)),
                "ours_batch_ms_p95": round(statistics.median(p["ours"]["batch_ms_p95"] for p in pairs)),
                **{
                    f"{side}_{measure}": round(statistics.median(p[side][measure] for p in pairs), 1)
                    for side in ("plain", "ours")
                    for measure in ("state_commit_ms_median", "python_cpu_s_per_minute", "jvm_cpu_s_per_minute")
                },
                "pair_ratios": [round(r, 3) for r in ratios],
                # Every run, in the order it ran: what each pair's ratio came from.
                "runs": [
                    {
                        "first": p["order"][0],
                        **{
                            side: {key: round(value, 3) for key, value in p[side].items()} for side in ("plain", "ours")
                        },
                    }
                    for p in pairs
                ],
                "ratio_rows_per_second": round(ratio, 3),
                "overhead_percent": round((1 - ratio) * 100, 1),
            }
    finally:
        spark.streams.removeListener(progress.listener)
    return report


def cpu_seconds(s3: S3ServerProcess | None = None) -> dict[str, float]:
    """CPU seconds used so far by this Python process (the driver's Python side), by its JVM (Spark's driver
    and executors in local mode), with ``s3`` by the S3 server's own process, and by the whole machine:
    ``machine`` its cores' busy time (user, nice, system and interrupts: what the two sides compete for),
    ``steal`` the time a virtual machine's cores waited for the host (a slower machine that is not the job)."""
    import psutil

    me = psutil.Process()
    jvm = jvms_under(me)
    python = me.cpu_times()
    machine = psutil.cpu_times()
    used = {
        "python": python.user + python.system,
        "jvm": sum(c.cpu_times().user + c.cpu_times().system for c in jvm),
        "machine": sum(getattr(machine, name, 0.0) for name in ("user", "nice", "system", "irq", "softirq")),
        "steal": getattr(machine, "steal", 0.0),
    }
    if s3 is not None and s3.pid is not None:
        server = psutil.Process(s3.pid).cpu_times()
        used["s3_server"] = server.user + server.system
    return used


def _median(values: list[float]) -> float | None:
    return round(statistics.median(values), 1) if values else None


def run_all(
    spark: Any,
    scale: str,
    rounds: int,
    base: Path,
    continuous_seconds: float = 0,
    cases: list[tuple[bool, str]] | None = None,
    s3: S3ServerProcess | None = None,
    warmup_seconds: float = 15,
    checkpoint_niceness: int | None = None,
) -> dict[str, Any]:
    """Both benchmarks (``overhead`` only where ``cases`` is None: a sweep of chosen cases skips it)."""
    return {
        "scale": scale,
        "rounds": rounds,
        "overhead": overhead(spark, base, scale, rounds) if cases is None else {},
        "continuous": (
            continuous_overhead(spark, base, continuous_seconds, rounds, cases, s3, warmup_seconds, checkpoint_niceness)
            if continuous_seconds
            else {}
        ),
    }


def parse_cases(text: str | None) -> list[tuple[bool, str]] | None:
    """``stateful@10s,stateless@1s`` as (stateful, interval) pairs; None for every case."""
    if not text:
        return None
    cases = []
    for item in text.split(","):
        query, _, interval = item.strip().partition("@")
        if query not in ("stateful", "stateless") or not interval:
            raise SystemExit(f"--cases: {item!r} is not QUERY@INTERVAL with QUERY stateful or stateless")
        cases.append((query == "stateful", interval))
    return cases


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
        print(
            f"\n== overhead (continuous, {results['continuous_seconds']} s per run, steady state, "
            f"{results['rounds']} A/B pairs; ours/plain as {NAME})"
        )
        print(
            f"{'query @ interval':<18} {'rows/s plain':>13} {'rows/s ours':>12} {'batch ms p50/p95 plain':>23} "
            f"{'batch ms p50/p95 ours':>22} {'batches/min plain':>18} {'batches/min ours':>17}  "
            f"{'rows/s ours/plain':<28} batches/min ours/plain"
        )
        for name, r in results["continuous"].items():
            plain_ms = f"{r['plain_batch_ms_median']}/{r['plain_batch_ms_p95']}"
            ours_ms = f"{r['ours_batch_ms_median']}/{r['ours_batch_ms_p95']}"
            rows = _estimate_text(r.get("rows_per_second_ratio"))
            batches = _estimate_text(r.get("batches_per_minute_ratio"))
            print(
                f"{name:<18} {r['plain_rows_per_second']:>13} {r['ours_rows_per_second']:>12} "
                f"{plain_ms:>23} {ours_ms:>22} {r.get('plain_batches_per_minute')!s:>18} "
                f"{r.get('ours_batches_per_minute')!s:>17}  {rows:<28} {batches}"
            )


def _estimate_text(estimate: dict[str, Any] | None) -> str:
    if not estimate:
        return "-"
    return Estimate.from_dict(estimate).text(3)


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
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--master", help="a Spark master URL (default local[2])")
    where.add_argument(
        "--cluster", action="store_true", help="start a standalone cluster (scripts/spark-cluster.sh); stop it after"
    )
    parser.add_argument(
        "--partitions", type=int, default=4, help="spark.sql.shuffle.partitions on both sides (default 4)"
    )
    parser.add_argument(
        "--cases", help="continuous cases only, e.g. stateful@10s,stateless@10s (skips the available-now benchmark)"
    )
    parser.add_argument(
        "--warmup-seconds", type=float, default=15, help="each side's discarded warm-up run (continuous; default 15)"
    )
    parser.add_argument("--root", choices=("local", "s3"), default="local", help="where ours checkpoints")
    parser.add_argument(
        "--checkpoint-niceness", type=int, help="ours' --checkpoint-niceness (continuous; default: the runtime's)"
    )
    parser.add_argument("--latency-ms", type=float, default=15.0, help="with --root s3: wait before each request")
    parser.add_argument("--out", help="default benchmarks/results.json, or results_cluster.json on a cluster")
    args = parser.parse_args(argv)
    cases = parse_cases(args.cases)
    base = Path(tempfile.mkdtemp(prefix="checkpoint-bench-"))
    # In a process of its own: the CPU measured for ours' driver is then the job's alone.
    s3 = S3ServerProcess(latency=args.latency_ms / 1000).start() if args.root == "s3" else None
    try:
        with standalone_cluster(base / "spark-cluster") if args.cluster else nullcontext(args.master) as master:
            spark = make_session(master=master or "local[2]", partitions=args.partitions)
            try:
                results = run_all(
                    spark,
                    args.scale,
                    args.rounds,
                    base,
                    args.continuous_seconds,
                    cases,
                    s3,
                    args.warmup_seconds,
                    args.checkpoint_niceness,
                )
            finally:
                spark.stop()
    finally:
        shutil.rmtree(base, ignore_errors=True)
        if s3 is not None:
            s3.stop()
    results["continuous_seconds"] = args.continuous_seconds
    if args.warmup_seconds != 15:  # recorded (and echoed in the docs' command) only where it was not the default
        results["warmup_seconds"] = args.warmup_seconds
    if args.checkpoint_niceness is not None:  # likewise: an A/B of the runtime's option
        results["checkpoint_niceness"] = args.checkpoint_niceness
    results["partitions"] = args.partitions
    results["root"] = f"s3 (loopback, {args.latency_ms:g} ms per request)" if s3 else "local disk"
    if s3:
        results["latency_ms"] = args.latency_ms
        results["s3_server"] = "own process"  # runs before this one had the server in the driver's process
    results["master"] = "standalone cluster on loopback, 2 workers x 1 core" if args.cluster else master or "local[2]"
    args.out = args.out or str(REPO / "benchmarks" / ("results_cluster.json" if master else "results.json"))
    print_tables(results)
    write_result(args.out, results)
    print(f"\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
