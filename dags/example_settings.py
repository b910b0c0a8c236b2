"""Settings the example DAGs share: where the demo's files live and how the example pipelines ship.

Airflow puts the DAGs folder on ``sys.path``, so the DAG files import this as ``example_settings``.
Replace these with your own paths, Spark settings and pipeline package.
"""

from __future__ import annotations

import os
from pathlib import Path

DEMO_HOME = os.environ.get("CHECKPOINT_DEMO_HOME", "/tmp/airflow-checkpoint-demo")
# A package folder in py_files is zipped by the operator and shipped with the job.
EXAMPLES_PACKAGE = str(Path(__file__).resolve().parents[1] / "examples")
JOB_NAME_PATTERN = r"^[A-Za-z0-9._-]+$"


def spark_conf(landing: str) -> dict[str, str]:
    """Spark confs for the example pipelines: where events land, small settings for local mode."""
    return {"spark.example.landing": landing, "spark.sql.shuffle.partitions": "4", "spark.ui.enabled": "false"}
