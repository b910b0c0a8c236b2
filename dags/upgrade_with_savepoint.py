"""Upgrade a running streaming job without losing state: savepoint, run the new version from it, confirm.

The new version may be new code, a new Spark, or both: ``spark_conn`` names the Spark connection it runs
on. A connection's ``spark-binary`` (``spark-submit``, ``spark3-submit``) is that Spark's spark-submit on the
worker, so moving a job from Spark 3.5 to 4.3 is this DAG with the 4.3 connection. The restore compares
Spark versions: a snapshot from an older Spark is upgraded (the log says which state format the new run
writes), one from a newer Spark is refused, and the savepoint stays usable to go back.

1. ``take_savepoint`` asks the running job for a savepoint (by default stop-with-savepoint: it finishes
   the batch in flight, takes the savepoint, commits its output and exits 0).
2. ``run_new_version`` starts the new pipeline from that savepoint (or from ``restore_source``, a path).
   The runtime compares the new pipeline's stateful plan with the savepoint's first: an incompatible
   upgrade fails here with the list of differences, and the savepoint stays usable.
3. ``confirm_first_checkpoint`` waits for the new version's first checkpoint.

Trigger it from the UI: choose the new pipeline, whether to stop the old version, and the restore source.
"""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import DAG, Param
from example_settings import EXAMPLES_PACKAGE, job_params, spark_conf

from airflow_checkpoint_provider.operators import CheckpointedStreamingJobOperator, SavepointOperator
from airflow_checkpoint_provider.sensors import CheckpointSensor

with DAG(
    doc_md=__doc__,  # the module docstring shows as the DAG's docs in the UI
    dag_id="upgrade_with_savepoint",
    description="Savepoint a running job, start the new version from it, confirm its first checkpoint",
    schedule=None,
    start_date=datetime(2026, 1, 1),
    catchup=False,
    max_active_runs=1,
    tags=["checkpoints", "example", "savepoints"],
    params={
        **job_params("event-counts", "output"),
        "new_pipeline": Param(
            "examples.pipelines:running_counts_with_label",
            type="string",
            title="New version",
            description="module:function returning the new version's streaming DataFrame.",
        ),
        "output_mode": Param(
            "update",
            type="string",
            enum=["append", "update", "complete"],
            title="Output mode of the new version",
            description="How the new version writes its output: update for running counts (as the old version).",
        ),
        "stop": Param(
            True,
            type="boolean",
            title="Stop the old version",
            description="Stop the running old version right after its savepoint, so that the new version can take "
            "over the job; off keeps it running (a savepoint for a later rollback).",
        ),
        "spark_conn": Param(
            "spark_default",
            type="string",
            title="Spark of the new version",
            description="The Spark connection the new version runs on; another Spark's connection upgrades "
            "Spark itself (its spark-binary is that Spark's spark-submit on the worker).",
        ),
        "restore_source": Param(
            "savepoint",
            type="string",
            title="Restore from",
            description="'savepoint' (the one just taken) or a savepoint or checkpoint path.",
        ),
    },
) as dag:
    take_savepoint = SavepointOperator(
        task_id="take_savepoint",
        job_name="{{ params.job_name }}",
        checkpoint_root="{{ params.checkpoint_root }}",
        stop="{{ params.stop }}",
        timeout="5min",
    )
    run_new_version = CheckpointedStreamingJobOperator(
        task_id="run_new_version",
        job_name="{{ params.job_name }}",
        checkpoint_root="{{ params.checkpoint_root }}",
        working_dir="{{ params.working_dir }}",  # shared by the driver and every executor
        pipeline="{{ params.new_pipeline }}",
        sink="parquet:{{ params.output }}",
        output_mode="{{ params.output_mode }}",
        trigger="available-now",
        conn_id="{{ params.spark_conn }}",
        restore_from="{{ ti.xcom_pull(task_ids='take_savepoint') if params.restore_source == 'savepoint' "
        "else params.restore_source }}",
        conf=spark_conf("{{ params.landing }}"),
        py_files=[EXAMPLES_PACKAGE],
    )
    confirm_first_checkpoint = CheckpointSensor(
        task_id="confirm_first_checkpoint",
        job_name="{{ params.job_name }}",
        checkpoint_root="{{ params.checkpoint_root }}",
        newer_than="{{ ti.xcom_pull(task_ids='take_savepoint', key='savepoint_id') }}",
        deferrable=True,
        poke_interval=5,
        timeout=600,
    )
    take_savepoint >> run_new_version >> confirm_first_checkpoint
