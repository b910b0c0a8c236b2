"""Rescale a running streaming job to another partition count, keeping its state.

A stateful Spark query's partition count (``spark.sql.shuffle.partitions``) is fixed by its first checkpoint:
a job that outgrew it could only start over. This DAG changes it through a savepoint, as Flink rescales:

1. ``take_savepoint`` stops the running job with a savepoint (it finishes the batch in flight, takes the
   savepoint, commits its output and exits 0).
2. ``rescale`` writes a new savepoint from it whose state has the new partition count (Spark moves every
   state row to the partition the new count puts it in); the first savepoint is only read.
3. ``run_rescaled`` starts the job from the rescaled savepoint at the new count.
4. ``confirm_first_checkpoint`` waits for its first checkpoint.

Both of Spark's state stores rescale: RocksDB state through Spark's own repartition (Spark 4.3 or newer), the
HDFS-backed store's (Spark's default) through the runtime's own rewrite. The restarted job keeps the store it
had (``rescale`` tells it which). What cannot be rescaled is refused at step 2 with the reason, and the job can
be started again from the first savepoint as it was. The rescale runs in Spark local mode on the worker, which
needs room for the state. Trigger it from the UI with the new partition count.
"""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import DAG, Param
from example_settings import EXAMPLES_PACKAGE, job_params, running_job_params, spark_conf

from airflow_checkpoint_provider.operators import CheckpointedStreamingJobOperator, RescaleOperator, SavepointOperator
from airflow_checkpoint_provider.sensors import CheckpointSensor

STATE_STORE = "{{ ti.xcom_pull(task_ids='rescale', key='state_store_provider') }}"

with DAG(
    doc_md=__doc__,  # the module docstring shows as the DAG's docs in the UI
    dag_id="rescale_with_savepoint",
    description="Stop a job with a savepoint, rescale its state to N partitions, restart it from the result",
    schedule=None,
    start_date=datetime(2026, 1, 1),
    catchup=False,
    max_active_runs=1,
    tags=["checkpoints", "example", "savepoints"],
    params={
        **job_params("event-counts", "output"),
        "partitions": Param(
            8,
            type="integer",
            minimum=1,
            title="New partition count",
            description="The job's new spark.sql.shuffle.partitions: its state is moved to this many partitions.",
        ),
        **running_job_params(),
    },
) as dag:
    take_savepoint = SavepointOperator(
        task_id="take_savepoint",
        job_name="{{ params.job_name }}",
        checkpoint_root="{{ params.checkpoint_root }}",
        stop=True,
        timeout="5min",
    )
    rescale = RescaleOperator(
        task_id="rescale",
        job_name="{{ params.job_name }}",
        checkpoint_root="{{ params.checkpoint_root }}",
        source="{{ ti.xcom_pull(task_ids='take_savepoint') }}",
        partitions="{{ params.partitions }}",
    )
    run_rescaled = CheckpointedStreamingJobOperator(
        task_id="run_rescaled",
        job_name="{{ params.job_name }}",
        checkpoint_root="{{ params.checkpoint_root }}",
        working_dir="{{ params.working_dir }}",
        pipeline="{{ params.pipeline }}",
        sink="parquet:{{ params.output }}",
        output_mode="{{ params.output_mode }}",
        trigger="available-now",
        restore_from="{{ ti.xcom_pull(task_ids='rescale') }}",
        conf={
            **spark_conf("{{ params.landing }}"),
            "spark.sql.shuffle.partitions": "{{ params.partitions }}",
            # The store the job ran on (a switch is refused): rescale reports it.
            "spark.sql.streaming.stateStore.providerClass": STATE_STORE,
        },
        py_files=[EXAMPLES_PACKAGE],
    )
    confirm_first_checkpoint = CheckpointSensor(
        task_id="confirm_first_checkpoint",
        job_name="{{ params.job_name }}",
        checkpoint_root="{{ params.checkpoint_root }}",
        newer_than="{{ ti.xcom_pull(task_ids='rescale', key='savepoint_id') }}",
        deferrable=True,
        poke_interval=5,
        timeout=600,
    )
    take_savepoint >> rescale >> run_rescaled >> confirm_first_checkpoint
