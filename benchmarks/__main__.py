"""Every benchmark, one command: ``.venv/bin/python -m benchmarks``.

Runs, with the options the README's tables were measured with, ``benchmarks.run`` (overhead against plain
Spark), ``benchmarks.state_size`` (checkpoint cost and restore time at 10 MB, 100 MB and 1 GB of state; on
RocksDB; with the checkpoint root on S3), ``benchmarks.request_cost`` (requests on S3),
``benchmarks.retention_scale`` (10,000 checkpoints), ``benchmarks.sensor_latency`` (real Airflow) and
``benchmarks.page_latency`` (the checkpoint pages' cost to the API server's other pages). Each prints its
table and writes its JSON under ``benchmarks/``; then ``benchmarks.report`` rewrites the README's tables from
those files. Run one alone for its options.
"""

from __future__ import annotations

import sys

from benchmarks import page_latency, report, request_cost, retention_scale, run, sensor_latency, state_size

RUNS = (
    (run.main, ["--rounds", "9", "--continuous-seconds", "20"]),
    (state_size.main, []),
    (state_size.main, ["--store", "rocksdb", "--sizes-mb", "100,1000"]),
    (state_size.main, ["--root", "s3", "--sizes-mb", "10,100", "--rounds", "5"]),
    (request_cost.main, []),
    (retention_scale.main, []),
    (sensor_latency.main, ["--samples", "3"]),
    (page_latency.main, []),
    (report.main, []),
)


def main() -> int:
    for benchmark, argv in RUNS:
        status = benchmark(argv)
        if status:
            return status
    return 0


if __name__ == "__main__":
    sys.exit(main())
