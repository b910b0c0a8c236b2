"""A Spark standalone cluster on loopback for as long as a ``with`` block lasts (``scripts/spark-cluster.sh``).

The benchmarks (``benchmarks.run --cluster``) and the cluster tests use it; ``scripts/demo.sh --cluster``
calls the script itself.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "spark-cluster.sh"


@contextmanager
def standalone_cluster(state: Path) -> Iterator[str]:
    """A Master and two Workers with their state and logs in ``state``; yields the master URL
    (``spark://127.0.0.1:PORT``) and stops exactly what it started."""
    env = {**os.environ, "SPARK_CLUSTER_DIR": str(state)}
    started = subprocess.run(["bash", str(SCRIPT), "start"], env=env, capture_output=True, text=True, timeout=300)
    if started.returncode != 0:
        raise RuntimeError(f"the cluster did not start:\n{started.stdout}{started.stderr}")
    try:
        yield started.stdout.strip().splitlines()[-1]
    finally:
        subprocess.run(["bash", str(SCRIPT), "stop"], env=env, capture_output=True, timeout=120)
