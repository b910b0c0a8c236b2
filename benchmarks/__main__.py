"""Every benchmark, one command: ``.venv/bin/python -m benchmarks`` (about 15 minutes on 2 cores).

Runs, with their defaults, ``benchmarks.run`` (overhead against plain Spark, checkpoint cost, restore),
``benchmarks.retention_scale`` (10,000 checkpoints) and ``benchmarks.sensor_latency`` (real Airflow). Each
prints its table and writes its JSON under ``benchmarks/``; run one alone for its options.
"""

from __future__ import annotations

import sys

from benchmarks import retention_scale, run, sensor_latency


def main() -> int:
    for benchmark in (run.main, retention_scale.main, sensor_latency.main):
        status = benchmark([])
        if status:
            return status
    return 0


if __name__ == "__main__":
    sys.exit(main())
