"""Every benchmark, one command: ``.venv/bin/python -m benchmarks``.

Runs, with their defaults, ``benchmarks.run`` (overhead against plain Spark), ``benchmarks.state_size``
(checkpoint cost and restore time at 10 MB, 100 MB and 1 GB of state), ``benchmarks.retention_scale``
(10,000 checkpoints), ``benchmarks.sensor_latency`` (real Airflow) and ``benchmarks.page_latency`` (the
checkpoint pages' cost to the API server's other pages). Each prints its table and writes its
JSON under ``benchmarks/``; run one alone for its options.
"""

from __future__ import annotations

import sys

from benchmarks import page_latency, retention_scale, run, sensor_latency, state_size


def main() -> int:
    for benchmark in (run.main, state_size.main, retention_scale.main, sensor_latency.main, page_latency.main):
        status = benchmark([])
        if status:
            return status
    return 0


if __name__ == "__main__":
    sys.exit(main())
