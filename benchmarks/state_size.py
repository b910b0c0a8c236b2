"""Checkpoint cost and restore time against state size, with plain Spark measured in the same run.

    .venv/bin/python -m benchmarks.state_size [--sizes-mb 10,100,1000] [--rounds N] [--store hdfs|rocksdb]
        [--root local|s3]

For each size, a wide stateful query (a count and the newest 128-character payload per key, about 140
bytes of state per key on disk) first builds the whole state from Parquet input, once on plain Spark
(native checkpoint folder) and once on our runtime. Then, ``rounds`` times, a file changing 1 % of the keys
lands and both restart to process it, alternating which goes first:

- plain Spark restarts from its own intact checkpoint folder;
- ours restores from the latest checkpoint in our storage into a fresh working folder.

Reported per size:

- restore: the wall time of each restart on both sides; the ratio of the medians (ours/plain), the median of
  the per-restart ratios, and every per-restart ratio;
- the checkpoint ours takes after the batch: capture (synchronous, on the coordinator thread beside the
  batches), upload (asynchronous), and Spark's own ``walCommit`` + ``commitOffsets`` for the same batch;
- bytes: what ours wrote for that checkpoint, against the full state and against what Spark itself wrote
  for the same change. The latter is measured outside our runtime: a listing of plain Spark's own
  checkpoint folder before and after its restart, counting the state files that restart newly wrote there
  (delta and snapshot files with the HDFS-backed store; SSTs and zips with RocksDB, SSTs also on their own).
  And over the whole sequence of restarts: every byte ours uploaded against every state file plain Spark's
  folder gained from the end of the build to the last restart (Spark's maintenance writes snapshots at its
  own pace, often outside a per-restart window). And over the job's whole life, the build included.

Both sides run in one JVM, where one state store maintenance timer serves every query. At Spark's default
(60 s) it fired during whichever side's restart happened to be running, so which side's snapshots (a
whole partition each, about 260 MB at 1 GB) fell inside the sequence was luck: one side got two, the
other one. ``--maintenance-interval`` (default 2 s) runs maintenance within every run of both sides, as it
runs within any job that lives longer than the interval.

``--store rocksdb`` runs the RocksDB state store on both sides. ``--root s3`` puts ours' checkpoint root on a
loopback S3 server (moto, ``benchmarks.s3_requests``) that counts requests: each restart then restores from
S3, and its requests are split by phase (restore and batch; the checkpoint's upload; after it: ``_metadata``,
the lease fence, retention, publishing and the run's end). Plain Spark stays on local disk (it cannot reach
S3 without hadoop-aws), so there the restore ratio includes downloading the state.
"""

from __future__ import annotations

import argparse
import math
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.provenance import write_result  # noqa: E402
from benchmarks.run import make_session, run_ours, run_plain  # noqa: E402
from benchmarks.s3_requests import CountingS3Server  # noqa: E402

PIPELINE = "wide_stateful"
BYTES_PER_KEY = 140  # state on disk per key of the wide query, measured (LZ4-compressed delta files)
ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
ROWS_PER_FILE = 500_000


def write_events(spark: Any, landing: Path, name: str, first_id: int, keys: range) -> None:
    """Parquet files of ``(id, key, payload)`` rows, one per key in ``keys``, moved whole into ``landing``."""
    from pyspark.sql import functions as F

    numbers = spark.range(keys.start, keys.stop, keys.step).withColumnRenamed("id", "k")
    rows = numbers.select(
        (F.col("k") + F.lit(first_id)).alias("id"),
        F.concat(F.lit("key-"), F.col("k").cast("string")).alias("key"),
        F.sha2(F.concat(F.lit(name), F.col("k").cast("string")), 512).alias("payload"),
    )
    files = max(1, math.ceil(len(keys) / ROWS_PER_FILE))
    staging = landing.parent / f".writing-{name}"
    rows.repartition(files).write.mode("overwrite").parquet(str(staging))
    landing.mkdir(parents=True, exist_ok=True)
    for number, part in enumerate(sorted(staging.glob("part-*.parquet"))):
        part.rename(landing / f"{name}-{number:05d}.parquet")
    shutil.rmtree(staging)


def cold_start(spark: Any) -> None:
    """Before a timed restart: drop the state stores this JVM still caches and collect garbage.

    A restarted driver has neither side's state in memory; without this, the run that goes second pays
    for collecting the first one's gigabytes (at 1 GB that doubled a restart's time, on either side).
    """
    jvm = spark.sparkContext._jvm
    state_store = getattr(jvm.org.apache.spark.sql.execution.streaming.state, "StateStore$")
    getattr(state_store, "MODULE$").unloadAll()
    jvm.System.gc()


def measure(spark: Any, base: Path, size_mb: float, rounds: int, s3: CountingS3Server | None = None) -> dict[str, Any]:
    """Build a state of about ``size_mb`` on both sides, then ``rounds`` restarts after a 1 % change.

    With ``s3``, ours' checkpoint root is on that server and each restart's requests are counted by phase.
    """
    keys = max(100, int(size_mb * 1_000_000 / BYTES_PER_KEY))
    landing = base / "landing"
    write_events(spark, landing, "full", 0, range(keys))
    options = {"per_trigger": 1, "pipeline": PIPELINE}
    if s3 is not None:
        options_ours = {"root": f"s3://{s3.bucket}/{base.name}-{time.time_ns()}", "storage_options": s3.options}
    else:
        options_ours = {}

    def start(side: str, **retention: int) -> dict[str, Any]:
        if side == "ours":
            if s3 is not None:
                s3.reset()
            result = run_ours(spark, landing, base / side, True, **options, **options_ours, **retention)
            # Every checkpoint this run completed (retention keeps the newest 3 after it; the build keeps all).
            new = [m for m in result["checkpoints"] if m["id"] > uploaded["latest"]]
            uploaded["latest"] = max([uploaded["latest"], *(m["id"] for m in new)])
            result["bytes_written_run"] = sum(m["bytes_written"] for m in new)
            if s3 is not None:
                result["requests"] = _requests_by_phase(s3, result)
            return result
        before = _state_listing(base / "plain" / "spark-checkpoint")
        result = run_plain(spark, landing, base / side, True, **options)
        after = _state_listing(base / "plain" / "spark-checkpoint")
        seen.update(before)
        seen.update(after)
        new = {p: n for p, n in after.items() if p not in before}
        result["native_new_bytes"] = sum(new.values())
        result["native_new_sst_bytes"] = sum(n for p, n in new.items() if p.endswith(".sst"))
        return result

    # Every state file plain Spark's folder ever held during the restarts: Spark's maintenance writes
    # snapshots whenever it runs, often while the other side's restart is timed, where the per-restart
    # listing cannot see them. The whole sequence counts them.
    seen: dict[str, int] = {}
    uploaded = {"latest": 0}
    build_plain, build_ours = start("plain"), start("ours", num_retained=1000)
    initial = _state_listing(base / "plain" / "spark-checkpoint")
    seen.update(initial)
    samples = []
    for number in range(rounds):
        changed = range(number, keys, 100)  # 1 % of the keys, a different 1 % each round
        write_events(spark, landing, f"change{number}", keys * (number + 1), changed)
        sides = ("plain", "ours") if number % 2 == 0 else ("ours", "plain")
        timed = {}
        for side in sides:
            cold_start(spark)
            timed[side] = start(side)
        samples.append(_sample(timed["plain"], timed["ours"], len(changed)))
    seen.update(_state_listing(base / "plain" / "spark-checkpoint"))
    native_sequence = sum(n for p, n in seen.items() if p not in initial)
    written_sequence = sum(s["bytes_written"] for s in samples)
    native_life = sum(seen.values())
    written_life = build_ours["bytes_written_run"] + written_sequence
    shutil.rmtree(base, ignore_errors=True)

    def median(field: str) -> float:
        return round(statistics.median(s[field] for s in samples), 3)

    ratios = [round(s["restore_ours_seconds"] / s["restore_plain_seconds"], 3) for s in samples]
    written_to_native = [s["bytes_written"] / s["native_new_bytes"] for s in samples]
    return {
        "size_mb_target": size_mb,
        "rounds": rounds,
        "keys": keys,
        "changed_keys": samples[0]["changed_keys"],
        "state_bytes": int(median("state_bytes")),
        "build_plain_seconds": round(build_plain["seconds"], 2),
        "build_ours_seconds": round(build_ours["seconds"], 2),
        "restore_plain_seconds": median("restore_plain_seconds"),
        "restore_ours_seconds": median("restore_ours_seconds"),
        "restore_ratio_of_medians": round(median("restore_ours_seconds") / median("restore_plain_seconds"), 3),
        "restore_median_of_ratios": round(statistics.median(ratios), 3),
        "restore_ratios": ratios,
        "capture_ms": median("capture_ms"),
        "upload_ms": median("upload_ms"),
        "spark_wal_plus_commit_ms": median("spark_wal_plus_commit_ms"),
        "bytes_written": int(median("bytes_written")),
        "written_to_state_ratio": round(statistics.median(s["bytes_written"] / s["state_bytes"] for s in samples), 4),
        "native_new_bytes": int(median("native_new_bytes")),
        "written_to_native_ratio": round(statistics.median(written_to_native), 3),
        "written_to_native_ratio_max": round(max(written_to_native), 3),
        "written_sequence_bytes": written_sequence,
        "native_sequence_bytes": native_sequence,
        "written_to_native_sequence_ratio": round(written_sequence / native_sequence, 3),
        "written_life_bytes": written_life,
        "native_life_bytes": native_life,
        "written_to_native_life_ratio": round(written_life / native_life, 3),
        **_sst_ratios(samples),
        **_request_phases(samples),
        "samples": samples,
    }


def _requests_by_phase(s3: CountingS3Server, ours: dict[str, Any]) -> dict[str, dict[str, int]]:
    """Split one restart's S3 requests at its last checkpoint's trigger and completion."""
    latest = ours["checkpoints"][-1]
    trigger, completion = latest["trigger_timestamp_ms"] / 1000, latest["completion_timestamp_ms"] / 1000
    return {
        "restore_and_batch": s3.between(ours["started_at"], trigger - 1e-6),
        "checkpoint_upload": s3.between(trigger, completion),
        "after_completion": s3.between(completion + 1e-6, ours["ended_at"]),
    }


def _request_phases(samples: list[dict[str, Any]]) -> dict[str, Any]:
    """S3 only: the requests per phase of the median restart (the one whose total is the median, lower of two)."""
    counted = [s["requests"] for s in samples if s.get("requests")]
    if not counted:
        return {}
    by_total = sorted(counted, key=lambda c: sum(phase["total"] for phase in c.values()))
    return {"requests_median": by_total[(len(by_total) - 1) // 2]}


def _sst_ratios(samples: list[dict[str, Any]]) -> dict[str, Any]:
    """RocksDB only: ours' bytes written per checkpoint against the SST files RocksDB newly wrote."""
    if not all(s.get("native_new_sst_bytes") for s in samples):
        return {}
    return {
        "native_new_sst_bytes": int(statistics.median(s["native_new_sst_bytes"] for s in samples)),
        "written_to_native_sst_ratio": round(
            statistics.median(s["bytes_written"] / s["native_new_sst_bytes"] for s in samples), 3
        ),
        "written_to_native_sst_ratio_max": round(
            max(s["bytes_written"] / s["native_new_sst_bytes"] for s in samples), 3
        ),
    }


def _state_listing(checkpoint: Path) -> dict[str, int]:
    """Every visible state file of a plain Spark checkpoint folder, with its size (taken outside the runtime)."""
    state = checkpoint / "state"
    if not state.exists():
        return {}
    return {
        str(p.relative_to(state)): p.stat().st_size
        for p in state.rglob("*")
        if p.is_file() and not p.name.startswith(".")
    }


def _sample(plain: dict[str, Any], ours: dict[str, Any], changed_keys: int) -> dict[str, Any]:
    """One restart: times on both sides, ours' checkpoint of the changed batch, and what Spark itself wrote."""
    latest = ours["checkpoints"][-1]
    return {
        "changed_keys": changed_keys,
        "restore_plain_seconds": plain["seconds"],
        "restore_ours_seconds": ours["seconds"],
        "state_bytes": latest["state_bytes"],
        # Every checkpoint of the restart (one batch, so normally one checkpoint).
        "bytes_written": ours["bytes_written_run"],
        "capture_ms": latest["durations_ms"]["capture"],
        "upload_ms": latest["durations_ms"]["upload"],
        "spark_wal_plus_commit_ms": statistics.median(plain["spark_commit_ms"] or [0]),
        "native_new_bytes": plain["native_new_bytes"],
        "native_new_sst_bytes": plain["native_new_sst_bytes"],
        **({"requests": ours["requests"]} if "requests" in ours else {}),
        "ours_step_seconds": ours.get("step_seconds"),  # the run report's: where ours' restart spent its time
    }


def print_table(results: list[dict[str, Any]]) -> None:
    print("\n== checkpoint cost and restore against state size (medians of the restarts)")
    print(
        f"{'state MB':>9} {'changed':>8} {'written KB':>11} {'spark wrote KB':>14} {'written/spark':>13} "
        f"{'written/state':>13} {'capture ms':>10} {'upload ms':>9} {'restore plain s':>15} "
        f"{'restore ours s':>14} {'ratio of medians':>16}  per-restart ratios"
    )
    for r in results:
        print(
            f"{r['state_bytes'] / 1e6:>9.1f} {r['changed_keys']:>8} {r['bytes_written'] / 1e3:>11.1f} "
            f"{r['native_new_bytes'] / 1e3:>14.1f} {r['written_to_native_ratio']:>13} "
            f"{r['written_to_state_ratio']:>13} {r['capture_ms']:>10} {r['upload_ms']:>9} "
            f"{r['restore_plain_seconds']:>15} {r['restore_ours_seconds']:>14} "
            f"{r['restore_ratio_of_medians']:>16}  {r['restore_ratios']}"
        )
        for phase, counts in r.get("requests_median", {}).items():
            kinds = ", ".join(f"{k} {v}" for k, v in counts.items() if v and k != "total")
            print(f"{'':>9} S3 requests, {phase}: {counts['total']} ({kinds})")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.state_size", description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes-mb", default="10,100,1000", help="comma-separated state sizes in MB")
    parser.add_argument(
        "--rounds",
        type=int,
        help="restarts per size (default: 25 below 1 GB, where a restart takes a second or two and nine of them "
        "could not tell a tenth of a second; 9 from 1 GB, where a restart takes 15 s a side)",
    )
    parser.add_argument("--store", choices=("hdfs", "rocksdb"), default="hdfs", help="the state store both sides use")
    parser.add_argument("--root", choices=("local", "s3"), default="local", help="where ours keeps its checkpoints")
    parser.add_argument(
        "--partitions", type=int, default=4, help="spark.sql.shuffle.partitions on both sides (default 4)"
    )
    parser.add_argument(
        "--latency-ms", type=float, default=0.0, help="with --root s3: wait before each request (a region: 15)"
    )
    parser.add_argument(
        "--maintenance-interval",
        default="2s",
        help="spark.sql.streaming.stateStore.maintenanceInterval on both sides (shared JVM: see above)",
    )
    parser.add_argument("--out", help="JSON results (default benchmarks/state_size[_rocksdb][_s3].json)")
    args = parser.parse_args(argv)
    suffix = ("" if args.store == "hdfs" else f"_{args.store}") + ("" if args.root == "local" else f"_{args.root}")
    suffix = (f"_p{args.partitions}" if args.partitions != 4 else "") + suffix
    args.out = args.out or str(REPO / "benchmarks" / f"state_size{suffix}.json")
    sizes = [float(s) for s in args.sizes_mb.split(",") if s.strip()]
    # The state store keeps every key in the driver's heap (local mode), a few versions at a time.
    spark = make_session(
        driver_memory=f"{min(16, max(2, math.ceil(max(sizes) * 12 / 1000)))}g", partitions=args.partitions
    )
    if args.store == "rocksdb":
        spark.conf.set("spark.sql.streaming.stateStore.providerClass", ROCKSDB)
    spark.conf.set("spark.sql.streaming.stateStore.maintenanceInterval", args.maintenance_interval)
    s3 = CountingS3Server(latency=args.latency_ms / 1000).start() if args.root == "s3" else None
    if s3 is not None:
        import logging

        logging.getLogger("werkzeug").setLevel(logging.WARNING)  # no line per request
    base = Path(tempfile.mkdtemp(prefix="checkpoint-state-size-"))
    results = []
    try:
        for size in sizes:
            started = time.monotonic()
            rounds = args.rounds or (9 if size >= 1000 else 25)
            results.append(measure(spark, base / f"{size:g}mb", size, rounds, s3))
            print(f"size {size:g} MB measured in {time.monotonic() - started:.0f} s", flush=True)
    finally:
        shutil.rmtree(base, ignore_errors=True)
        spark.stop()
        if s3 is not None:
            s3.stop()
    print_table(results)
    write_result(
        args.out,
        {
            "rounds": args.rounds,
            "store": args.store,
            "root": args.root,
            "partitions": args.partitions,
            "latency_ms": args.latency_ms,
            "maintenance_interval": args.maintenance_interval,
            "sizes": results,
        },
    )
    print(f"\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
