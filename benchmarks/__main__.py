"""Every benchmark, one command: ``.venv/bin/python -m benchmarks``.

Runs, with the options the docs' tables were measured with, ``benchmarks.run`` (overhead against plain Spark),
``benchmarks.state_size`` (checkpoint cost and restore time at 10 MB, 100 MB and 1 GB of state; on RocksDB; with
the checkpoint root on S3), ``benchmarks.request_cost`` (requests on S3), ``benchmarks.retention_scale`` (10,000
checkpoints), ``benchmarks.sensor_latency`` (real Airflow), ``benchmarks.page_latency`` (the checkpoint pages' cost
to the API server's other pages), and at the scale users run: ``benchmarks.run`` again at 200 partitions with ours
checkpointing to local disk and to S3, ``benchmarks.state_size --partitions`` (restore at 200 partitions from
local disk, and at 4 to 1,000 partitions from S3), ``benchmarks.scale`` (4 to 1,000 partitions on S3, file merging
off and on),
``benchmarks.metadata_size`` (2,000 partitions, 1,000 checkpoints), ``benchmarks.long_run`` (a job's
1,000 checkpoints at 200 partitions on S3) and ``benchmarks.rescale`` (200 to 400
partitions, 10 and 100 MB, on S3; RocksDB, then HDFS-backed state). Each prints its table and writes its JSON
under ``benchmarks/``; then ``benchmarks.report`` rewrites the tables in README.md and docs/*.md from those files.
Each result a benchmark rewrites is set aside under ``benchmarks/earlier/`` (``benchmarks.keep``), so that a
rerun keeps the runs it supersedes. Run one alone for its options; to put its JSON in place, use
``python -m benchmarks.keep``.
"""

from __future__ import annotations

import sys
from pathlib import Path

from benchmarks import (
    keep,
    long_run,
    metadata_size,
    page_latency,
    report,
    request_cost,
    rescale,
    retention_scale,
    run,
    scale,
    sensor_latency,
    state_size,
)

# Pairs at 200 partitions spread widely (few batches a run): 10 pairs after a 2-minute warm-up each side.
AT_SCALE = ["--partitions", "200", "--cases", "stateful@10s", "--rounds", "10", "--continuous-seconds", "120"]
AT_SCALE += ["--warmup-seconds", "120"]

RESULTS = Path(__file__).resolve().parent
P200_LOCAL = "benchmarks/state_size_p200.json"

RUNS = (
    (run.main, ["--rounds", "9", "--continuous-seconds", "20"]),
    (state_size.main, []),
    (state_size.main, ["--store", "rocksdb", "--sizes-mb", "100,1000"]),
    (state_size.main, ["--root", "s3", "--sizes-mb", "10,100", "--rounds", "5"]),
    (request_cost.main, []),
    (retention_scale.main, []),
    (sensor_latency.main, ["--samples", "3"]),
    (page_latency.main, []),
    (state_size.main, ["--sizes-mb", "10", "--rounds", "15", "--partitions", "200", "--out", P200_LOCAL]),
    *(
        (
            state_size.main,
            ["--sizes-mb", "10", "--rounds", rounds, "--root", "s3", "--partitions", str(partitions)]
            + ["--latency-ms", "15", "--out", f"benchmarks/state_size_p{partitions}_s3.json"],
        )
        for partitions, rounds in ((4, "15"), (50, "15"), (200, "9"), (1000, "9"))
    ),
    (run.main, [*AT_SCALE, "--root", "local", "--out", "benchmarks/throughput_200_local.json"]),
    (run.main, [*AT_SCALE, "--root", "s3", "--out", "benchmarks/throughput_200_s3.json"]),
    (scale.main, []),
    (
        scale.main,
        [
            "--partitions",
            "200",
            "--queries",
            "count,dedup,join",
            "--stores",
            "hdfs,rocksdb",
            "--merging",
            "auto",
            "--out",
            "benchmarks/scale_queries.json",
        ],
    ),  # fmt: skip
    (metadata_size.main, []),
    (long_run.main, []),
    (rescale.main, []),
    (rescale.main, ["--store", "hdfs"]),
    (report.main, []),
)


def main() -> int:
    for benchmark, argv in RUNS:
        before = {path: path.read_bytes() for path in RESULTS.glob("*.json")}
        try:
            status = benchmark(argv)
        finally:  # a benchmark that fails after writing part of its result has still superseded the run
            for path, content in before.items():
                if path.exists() and path.read_bytes() != content:
                    keep.set_aside(path, content)
        if status:
            return status
    return 0


if __name__ == "__main__":
    sys.exit(main())
