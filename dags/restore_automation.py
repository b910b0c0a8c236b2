"""Restore automation: a continuous job, a health watch beside it, and a restore when either fails.

The job runs continuously for ``max_duration`` (or until ``upgrade_with_savepoint`` stops it with a
savepoint: both DAGs default to the same job). Beside it, in the triggerer, ``first_checkpoint`` waits for
this run's first checkpoint and ``watch_health`` watches the running job: no checkpoint within the progress
window (``max_age``, or the Flink Kubernetes Operator's rule) fails it at once, while the job still runs.
When the watch fails or the job task fails, ``stop_stalled_job`` makes sure the job has ended: it asks it to
stop and, when its driver does not answer within ``stop_timeout``, has the job task kill it. Whenever that
task ran, ``restore_from_latest`` restarts the job from the latest valid checkpoint (available-now: it drains
what is pending and checkpoints), whether the stalled job answered the stop or had to be killed. A run that
ends on its own (``max_duration``, or a savepoint that stops it) skips both. Trigger it from the UI to tune
the durations.
"""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import DAG, Param, TriggerRule
from example_settings import EXAMPLES_PACKAGE, job_params, spark_conf

from airflow_checkpoint_provider.operators import (
    CheckpointedStreamingJobOperator,
    RestoreFromCheckpointOperator,
    StopStreamingJobOperator,
)
from airflow_checkpoint_provider.sensors import CheckpointSensor, RunningJobHealthSensor

with DAG(
    doc_md=__doc__,  # the module docstring shows as the DAG's docs in the UI
    dag_id="restore_automation",
    description="Continuous checkpointed job, a health watch beside it, and restore-from-latest on failure",
    schedule=None,
    start_date=datetime(2026, 1, 1),
    catchup=False,
    max_active_runs=1,
    tags=["checkpoints", "example"],
    params={
        **job_params("event-counts", "output"),
        "max_duration": Param(
            "5min", type="string", title="Run for", description="How long the continuous run lasts, e.g. 30s or 10min."
        ),
        "checkpoint_interval": Param(
            "2s", type="string", title="Checkpoint interval", description="Time between checkpoints, e.g. 2s."
        ),
        "stop_timeout": Param(
            "1min",
            type="string",
            title="Stop timeout",
            description="How long a stalled job may take to stop when asked, before its task kills it, e.g. 1min.",
        ),
        "max_age": Param(
            None,
            type=["null", "string"],
            title="Health window (optional)",
            description="how old the latest checkpoint may be, e.g. 5min; empty: the Flink Kubernetes Operator's rule",
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
        trigger="continuous",
        batch_interval="500ms",
        max_duration="{{ params.max_duration }}",
        checkpoint_interval="{{ params.checkpoint_interval }}",
        conf=spark_conf("{{ params.landing }}"),
        py_files=[EXAMPLES_PACKAGE],
    )
    first_checkpoint = CheckpointSensor(
        task_id="first_checkpoint",
        job_name="{{ params.job_name }}",
        checkpoint_root="{{ params.checkpoint_root }}",
        completed_after="{{ dag_run.start_date }}",  # this run's checkpoint, not one left by an earlier run
        deferrable=True,
        poke_interval=2,
        timeout=600,
    )
    watch_health = RunningJobHealthSensor(
        task_id="watch_health",
        job_name="{{ params.job_name }}",
        checkpoint_root="{{ params.checkpoint_root }}",
        started_after="{{ dag_run.start_date }}",  # the run this DAG run starts, not one left by an earlier run
        checkpoint_interval="{{ params.checkpoint_interval }}",
        max_age="{{ params.max_age }}",
        deferrable=True,  # watches in the triggerer: no worker slot held for the job's whole life
        poke_interval=5,
        timeout=7 * 24 * 3600,  # watches for the job's whole life
    )
    stop_stalled_job = StopStreamingJobOperator(
        task_id="stop_stalled_job",
        job_name="{{ params.job_name }}",
        checkpoint_root="{{ params.checkpoint_root }}",
        reason="its checkpoints stalled or its task failed (restore_automation)",
        started_after="{{ dag_run.start_date }}",  # only this DAG run's job, never another run holding it
        stop_timeout="{{ params.stop_timeout }}",
        trigger_rule=TriggerRule.ONE_FAILED,  # the watch saw a stall, or the job task failed
    )
    restore_from_latest = RestoreFromCheckpointOperator(
        task_id="restore_from_latest",
        job_name="{{ params.job_name }}",
        checkpoint_root="{{ params.checkpoint_root }}",
        working_dir="{{ params.working_dir }}",  # shared by the driver and every executor
        pipeline="examples.pipelines:running_counts",
        sink="parquet:{{ params.output }}",
        output_mode="update",
        trigger="available-now",
        conf=spark_conf("{{ params.landing }}"),
        py_files=[EXAMPLES_PACKAGE],
        # After every stop, answered or killed, and even when the kill was not confirmed (the restore then takes
        # the job over once the lease is silent); skipped with stop_stalled_job when the job ended on its own.
        trigger_rule=TriggerRule.NONE_SKIPPED,
    )
    [run_job, watch_health] >> stop_stalled_job
    # The restore also waits for the job task to end, so it never races a job still shutting down.
    [run_job, stop_stalled_job] >> restore_from_latest
