"""Settings the example DAGs share: where the demo's files live and how the example pipelines ship.

Airflow puts the DAGs folder on ``sys.path``, so the DAG files import this as ``example_settings``.
Replace these with your own paths, Spark settings and pipeline package.
"""

from __future__ import annotations

import os
from pathlib import Path

from airflow.sdk import Param

DEMO_HOME = os.environ.get("CHECKPOINT_DEMO_HOME", "/tmp/airflow-checkpoint-demo")
# A package folder in py_files is zipped by the operator and shipped with the job.
EXAMPLES_PACKAGE = str(Path(__file__).resolve().parents[1] / "examples")
JOB_NAME_PATTERN = r"^[A-Za-z0-9._-]+$"


def job_params(job_name: str, output: str) -> dict[str, Param]:
    """The params every example DAG's trigger form shows first: which job, and where its files live."""
    return {
        "job_name": Param(
            job_name,
            type="string",
            pattern=JOB_NAME_PATTERN,
            title="Job name",
            description="The job's folder under the checkpoint root (letters, digits, '.', '_', '-').",
        ),
        "checkpoint_root": Param(
            f"{DEMO_HOME}/checkpoints",
            type="string",
            title="Checkpoint root",
            description="A path or fsspec URL (e.g. s3://bucket/checkpoints) under which the job keeps checkpoints.",
        ),
        "landing": Param(
            f"{DEMO_HOME}/landing",
            type="string",
            title="Landing folder",
            description="Where the JSON events the example pipelines read arrive.",
        ),
        "working_dir": Param(
            f"{DEMO_HOME}/work",
            type="string",
            title="Spark working folder",
            description="Where Spark keeps state between checkpoints: a folder the driver and every executor "
            "share (a local path here; NFS or a volume every worker mounts on a cluster).",
        ),
        "output": Param(
            f"{DEMO_HOME}/{output}",
            type="string",
            title="Output folder",
            description="Where the job publishes its exactly-once Parquet output.",
        ),
    }


def running_job_params() -> dict[str, Param]:
    """The params of a DAG that restarts the running job: its pipeline and output mode, as it runs them."""
    return {
        "pipeline": Param(
            "examples.pipelines:running_counts",
            type="string",
            title="Pipeline",
            description="module:function returning the job's streaming DataFrame (the one that is running).",
        ),
        "output_mode": Param(
            "update",
            type="string",
            enum=["append", "update", "complete"],
            title="Output mode",
            description="How the job writes its output: update for running counts.",
        ),
    }


def spark_conf(landing: str) -> dict[str, str]:
    """Spark confs for the example pipelines: where events land, small settings for local mode."""
    return {"spark.example.landing": landing, "spark.sql.shuffle.partitions": "4", "spark.ui.enabled": "false"}
