"""Rescale time against state size, with what plain Spark does to change the count measured in the same run.

    .venv/bin/python -m benchmarks.rescale [--store rocksdb|hdfs] [--sizes-mb 10,100] [--rounds 3]
        [--partitions 200] [--to 400] [--root s3|local]

For each size, the wide stateful query (``benchmarks.state_size``: about 140 bytes of state per key) builds
about that much state at ``--partitions`` on our runtime (its checkpoint root on a loopback S3 server by
default). Then, ``rounds`` times, alternating which goes first:

- plain, RocksDB (``--store rocksdb``, results in ``rescale.json``): Spark's offline state repartition
  rewrites a copy of plain Spark's own checkpoint folder (built beside ours from the same input) for ``--to``
  partitions, in place (the copy is made before the clock starts: a user of plain Spark rescales their folder
  itself, with no savepoint left behind);
- plain, HDFS-backed store (``--store hdfs``, results in ``rescale_hdfs.json``): Spark has no repartition for
  that store, so a plain Spark user rebuilds the state: a new query at ``--to`` partitions, from an empty
  checkpoint folder, over the whole input that made it;
- ours: ``rescale`` of the latest checkpoint to ``--to``: the snapshot materialised from the root, rewritten
  (Spark's repartition for RocksDB, our own rewrite for the HDFS-backed store), and written back to the root
  as a self-contained savepoint.

Reported per size: both sides' times, and the median of the paired ratios (ours/plain) with a bootstrap
95 % interval. Plain Spark's folder stays on local disk (it cannot reach S3 without hadoop-aws), so on S3
ours' time includes downloading the state and uploading the savepoint.
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

from benchmarks.estimate import Estimate, paired_ratios  # noqa: E402
from benchmarks.provenance import write_result  # noqa: E402
from benchmarks.run import make_session, run_ours, run_plain  # noqa: E402
from benchmarks.s3_requests import CountingS3Server  # noqa: E402
from benchmarks.state_size import BYTES_PER_KEY, PIPELINE, ROCKSDB, cold_start, write_events  # noqa: E402

OUTS = {"rocksdb": REPO / "benchmarks" / "rescale.json", "hdfs": REPO / "benchmarks" / "rescale_hdfs.json"}
SHUFFLE = "spark.sql.shuffle.partitions"


def _plain_rescale(spark: Any, folder: Path, partitions: int) -> float:
    from spark_checkpoint_runtime.rescale import repartition

    started = time.perf_counter()
    repartition(spark, str(folder), partitions)
    return time.perf_counter() - started


def _plain_rebuild(spark: Any, landing: Path, work: Path, partitions: int) -> float:
    """A new plain query at ``partitions`` over the whole input: the HDFS-backed store's only way to a new count."""
    before = spark.conf.get(SHUFFLE)
    spark.conf.set(SHUFFLE, str(partitions))
    try:
        started = time.perf_counter()
        run_plain(spark, landing, work, True, per_trigger=1, pipeline=PIPELINE)
        return time.perf_counter() - started
    finally:
        spark.conf.set(SHUFFLE, before)
        shutil.rmtree(work, ignore_errors=True)


def _ours_rescale(spark: Any, root: str, options: dict[str, Any], partitions: int) -> tuple[float, int]:
    from spark_checkpoint_runtime.layout import JobFolder
    from spark_checkpoint_runtime.rescale import rescale

    started = time.perf_counter()
    storage = JobFolder(root, "bench", options)
    latest = storage.checkpoints.latest_valid()
    _, meta = rescale(spark, storage, latest, partitions)
    return time.perf_counter() - started, meta.state_bytes


def measure(
    spark: Any,
    base: Path,
    size_mb: float,
    rounds: int,
    partitions: int,
    to: int,
    s3: CountingS3Server | None,
    store: str = "rocksdb",
) -> dict[str, Any]:
    """Build about ``size_mb`` of state (on both sides for RocksDB), then ``rounds`` pairs of rescales to ``to``."""
    keys = max(100, int(size_mb * 1_000_000 / BYTES_PER_KEY))
    landing = base / "landing"
    write_events(spark, landing, "full", 0, range(keys))
    if s3 is not None:
        root, options = f"s3://{s3.bucket}/{base.name}-{time.time_ns()}", s3.options
    else:
        root, options = str(base / "ours" / "root"), {}
    build_plain = None
    if store == "rocksdb":  # the folder plain Spark's repartition rewrites; the HDFS-backed side rebuilds instead
        started = time.perf_counter()
        run_plain(spark, landing, base / "plain", True, per_trigger=1, pipeline=PIPELINE)
        build_plain = round(time.perf_counter() - started, 2)
    built = run_ours(
        spark, landing, base / "ours", True, per_trigger=1, pipeline=PIPELINE, root=root, storage_options=options
    )
    state_bytes = built["checkpoints"][-1]["state_bytes"]
    samples = []
    for number in range(rounds):
        copy = base / f"plain-copy-{number}"
        if store == "rocksdb":
            shutil.copytree(base / "plain" / "spark-checkpoint", copy)
        sides = ("plain", "ours") if number % 2 == 0 else ("ours", "plain")
        timed: dict[str, float] = {}
        for side in sides:
            cold_start(spark)
            if side == "ours":
                timed["ours"], rescaled_bytes = _ours_rescale(spark, root, options, to)
            elif store == "rocksdb":
                timed["plain"] = _plain_rescale(spark, copy, to)
            else:
                timed["plain"] = _plain_rebuild(spark, landing, base / f"plain-rebuild-{number}", to)
        shutil.rmtree(copy, ignore_errors=True)
        samples.append(
            {
                "plain_seconds": round(timed["plain"], 3),
                "ours_seconds": round(timed["ours"], 3),
                "ratio": round(timed["ours"] / timed["plain"], 3),
                "rescaled_state_bytes": rescaled_bytes,
            }
        )
    shutil.rmtree(base, ignore_errors=True)
    estimate = paired_ratios([s["ratio"] for s in samples])
    return {
        "size_mb_target": size_mb,
        "keys": keys,
        "partitions": partitions,
        "to": to,
        "rounds": rounds,
        "state_bytes": state_bytes,
        "build_plain_seconds": build_plain,
        "build_ours_seconds": round(built["seconds"], 2),
        "plain_seconds": round(statistics.median(s["plain_seconds"] for s in samples), 3),
        "ours_seconds": round(statistics.median(s["ours_seconds"] for s in samples), 3),
        "ratio": estimate.as_dict(),
        "samples": samples,
    }


def print_table(results: list[dict[str, Any]]) -> None:
    print(f"{'state':>10} {'partitions':>12} {'plain s':>9} {'ours s':>9}  ours/plain (95 % CI)")
    for r in results:
        ratio = Estimate.from_dict(r["ratio"]).text()
        moved, size = f"{r['partitions']}->{r['to']}", f"{r['state_bytes'] / 1e6:.1f}MB"
        print(f"{size:>10} {moved:>12} {r['plain_seconds']:>9.2f} {r['ours_seconds']:>9.2f}  {ratio}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.rescale", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--store",
        choices=tuple(OUTS),
        default="rocksdb",
        help="the state store (default rocksdb; hdfs: Spark's default store, against a rebuild from the input)",
    )
    parser.add_argument("--sizes-mb", default="10,100", help="comma-separated state sizes in MB (default 10,100)")
    parser.add_argument("--rounds", type=int, default=3, help="pairs of rescales per size (default 3)")
    parser.add_argument("--partitions", type=int, default=200, help="the state's partitions before (default 200)")
    parser.add_argument("--to", type=int, default=400, help="the state's partitions after (default 400)")
    parser.add_argument("--root", choices=("local", "s3"), default="s3", help="where ours keeps its checkpoints")
    parser.add_argument("--out", help="JSON results (default benchmarks/rescale.json, or rescale_hdfs.json)")
    args = parser.parse_args(argv)
    out = args.out or str(OUTS[args.store])
    sizes = [float(s) for s in args.sizes_mb.split(",") if s.strip()]
    spark = make_session(
        driver_memory=f"{min(16, max(2, math.ceil(max(sizes) * 12 / 1000)))}g", partitions=args.partitions
    )
    if args.store == "rocksdb":
        spark.conf.set("spark.sql.streaming.stateStore.providerClass", ROCKSDB)
    s3 = CountingS3Server().start() if args.root == "s3" else None
    if s3 is not None:
        import logging

        logging.getLogger("werkzeug").setLevel(logging.WARNING)  # no line per request
    base = Path(tempfile.mkdtemp(prefix="checkpoint-rescale-"))
    results = []
    try:
        for size in sizes:
            started = time.monotonic()
            results.append(
                measure(spark, base / f"{size:g}mb", size, args.rounds, args.partitions, args.to, s3, args.store)
            )
            print(f"size {size:g} MB measured in {time.monotonic() - started:.0f} s", flush=True)
            # After each size: an hour-long size that is stopped does not take the finished ones with it.
            write_result(out, {"root": args.root, "store": args.store, "sizes": results})
    finally:
        if s3 is not None:
            s3.stop()
        shutil.rmtree(base, ignore_errors=True)
    print_table(results)
    print(f"written to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
