"""Change a running streaming job's state with a Python function, through a savepoint.

Flink's State Processor API use case on Spark: drop a poisoned key's state, fix a wrong value, or bootstrap
state from a batch DataFrame, without starting the job over.

1. ``take_savepoint`` stops the running job with a savepoint (it finishes the batch in flight, takes the
   savepoint, commits its output and exits 0).
2. ``transform`` writes a new savepoint from it whose state rows are what the function returns; the first
   savepoint is only read. The example function drops the state of the keys typed into the form.
3. ``run_transformed`` starts the job from the transformed savepoint.
4. ``confirm_first_checkpoint`` waits for its first checkpoint.

The function is ``module:name`` (shipped with the examples package here) or ``file.py:name`` on the worker; it
takes one store's state rows as a DataFrame (``key``, ``value``, ``partition_id``) and returns the new rows
with the same columns. Transform writes the HDFS-backed state store's files (Spark's default store). What it
refuses (a result whose columns differ from the state's, a key returned twice, a function that fails) stops at
step 2 with the reason, and the job can be started again from the first savepoint as it was.
"""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import DAG, Param
from example_settings import EXAMPLES_PACKAGE, job_params, running_job_params, spark_conf

from airflow_checkpoint_provider.operators import (
    CheckpointedStreamingJobOperator,
    SavepointOperator,
    TransformStateOperator,
)
from airflow_checkpoint_provider.sensors import CheckpointSensor

with DAG(
    doc_md=__doc__,  # the module docstring shows as the DAG's docs in the UI
    dag_id="transform_state_with_savepoint",
    description="Stop a job with a savepoint, change its state with a Python function, restart it from the result",
    schedule=None,
    start_date=datetime(2026, 1, 1),
    catchup=False,
    max_active_runs=1,
    tags=["checkpoints", "example", "savepoints"],
    params={
        **job_params("event-counts", "output"),
        "function": Param(
            "examples.state_functions:drop_keys",
            type="string",
            pattern=r"^\S+:\w+$",
            title="State function",
            description="module:name or file.py:name: takes the state rows as a DataFrame, returns the new rows.",
        ),
        "drop_keys": Param(
            "k0",
            type="string",
            title="Keys to drop",
            description="For the example function: comma-separated keys whose state is dropped (counted from zero).",
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
    transform = TransformStateOperator(
        task_id="transform",
        job_name="{{ params.job_name }}",
        checkpoint_root="{{ params.checkpoint_root }}",
        source="{{ ti.xcom_pull(task_ids='take_savepoint') }}",
        function="{{ params.function }}",
        conf={"spark.example.dropKeys": "{{ params.drop_keys }}"},
        py_files=[EXAMPLES_PACKAGE],
    )
    run_transformed = CheckpointedStreamingJobOperator(
        task_id="run_transformed",
        job_name="{{ params.job_name }}",
        checkpoint_root="{{ params.checkpoint_root }}",
        working_dir="{{ params.working_dir }}",
        pipeline="{{ params.pipeline }}",
        sink="parquet:{{ params.output }}",
        output_mode="{{ params.output_mode }}",
        trigger="available-now",
        restore_from="{{ ti.xcom_pull(task_ids='transform') }}",
        conf=spark_conf("{{ params.landing }}"),
        py_files=[EXAMPLES_PACKAGE],
    )
    confirm_first_checkpoint = CheckpointSensor(
        task_id="confirm_first_checkpoint",
        job_name="{{ params.job_name }}",
        checkpoint_root="{{ params.checkpoint_root }}",
        newer_than="{{ ti.xcom_pull(task_ids='transform', key='savepoint_id') }}",
        deferrable=True,
        poke_interval=5,
        timeout=600,
    )
    take_savepoint >> transform >> run_transformed >> confirm_first_checkpoint
