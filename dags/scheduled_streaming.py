"""Scheduled incremental streaming: drain what arrived, confirm its checkpoint, apply retention.

Every hour an available-now run of a stateful running count restores from the latest checkpoint,
processes the files that landed since, takes a final checkpoint and publishes its output exactly once.
A sensor then confirms the checkpoint the run reported, and retention keeps ``num_retained`` of them.
Trigger it from the UI to change the job, paths, retention or restore source.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.sdk import DAG, Param
from example_settings import EXAMPLES_PACKAGE, job_params, spark_conf

from airflow_checkpoint_provider.operators import CheckpointedStreamingJobOperator, CheckpointRetentionOperator
from airflow_checkpoint_provider.sensors import CheckpointSensor

with DAG(
    doc_md=__doc__,  # the module docstring shows as the DAG's docs in the UI
    dag_id="scheduled_streaming",
    description="Available-now run of a checkpointed streaming job, then its checkpoint, then retention",
    schedule="@hourly",
    start_date=datetime(2026, 1, 1),
    catchup=False,
    max_active_runs=1,
    tags=["checkpoints", "example"],
    params={
        **job_params("event-counts", "output"),
        "num_retained": Param(
            3,
            type="integer",
            minimum=1,
            title="Checkpoints to keep",
            description="Retention keeps this many of the newest valid checkpoints.",
        ),
        "restore_from": Param(
            "latest",
            type="string",
            title="Restore from",
            description="latest (the newest valid checkpoint), none (empty state), or a chk-N or savepoint path.",
        ),
    },
) as dag:
    run_job = CheckpointedStreamingJobOperator(
        task_id="run_job",
        job_name="{{ params.job_name }}",
        checkpoint_root="{{ params.checkpoint_root }}",
        working_dir="{{ params.working_dir }}",  # shared by the driver and every executor
        pipeline="examples.pipelines:running_counts",
        sink="parquet:{{ params.output }}",
        output_mode="update",
        trigger="available-now",
        checkpoint_interval="5s",
        num_retained="{{ params.num_retained }}",
        restore_from="{{ params.restore_from }}",
        conf=spark_conf("{{ params.landing }}"),
        py_files=[EXAMPLES_PACKAGE],
        retries=2,
        retry_delay=timedelta(seconds=10),
    )
    confirm_checkpoint = CheckpointSensor(
        task_id="confirm_checkpoint",
        job_name="{{ params.job_name }}",
        checkpoint_root="{{ params.checkpoint_root }}",
        at_least=run_job.output["checkpoint_id"],  # the checkpoint the run reported, or a newer one
        deferrable=True,
        poke_interval=5,
        timeout=600,
    )
    retention = CheckpointRetentionOperator(
        task_id="retention",
        job_name="{{ params.job_name }}",
        checkpoint_root="{{ params.checkpoint_root }}",
        num_retained="{{ params.num_retained }}",
        orphan_grace_period="30min",
    )
    run_job >> confirm_checkpoint >> retention
