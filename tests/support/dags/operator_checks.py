"""DAGs for operator tests that need no Spark: retention, refusals before any submission."""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.sdk import DAG, Param

from airflow_checkpoint_provider.operators import (
    CheckpointedStreamingJobOperator,
    CheckpointRetentionOperator,
    RestoreFromCheckpointOperator,
    SavepointOperator,
    StopStreamingJobOperator,
)

PARAMS = {"root": Param("/nonexistent", type="string"), "dry_run": Param(True, type="boolean")}

with DAG(dag_id="retention_policy", schedule=None, start_date=datetime(2026, 1, 1), params=PARAMS):
    CheckpointRetentionOperator(
        task_id="retention",
        job_name="orders",
        checkpoint_root="{{ params.root }}",
        num_retained=2,
        savepoint_max_count=2,
        savepoint_max_age="7d",
        orphan_grace_period="1h",
        dry_run="{{ params.dry_run }}",
    )

# Retries at once: a definitive failure must not use them, a transient one must (each savepoint try asking anew).
RETRY_AT_ONCE = {"retries": 2, "retry_delay": timedelta(0)}

with DAG(dag_id="refusals", schedule=None, start_date=datetime(2026, 1, 1), params=PARAMS, default_args=RETRY_AT_ONCE):
    RestoreFromCheckpointOperator(
        task_id="restore_without_checkpoint",
        job_name="orders",
        checkpoint_root="{{ params.root }}",
        pipeline="examples.pipelines:events",
    )
    CheckpointedStreamingJobOperator(
        task_id="missing_spark_connection",
        job_name="orders",
        checkpoint_root="{{ params.root }}",
        pipeline="examples.pipelines:events",
        conn_id="no_such_spark",
    )
    CheckpointedStreamingJobOperator(
        task_id="bad_job_name",
        job_name="../escape",
        checkpoint_root="{{ params.root }}",
        pipeline="examples.pipelines:events",
    )

with DAG(dag_id="savepoint_refusals", schedule=None, start_date=datetime(2026, 1, 1), params=PARAMS):
    SavepointOperator(task_id="no_running_job", job_name="idle", checkpoint_root="{{ params.root }}")
    SavepointOperator(
        task_id="times_out", job_name="silent", checkpoint_root="{{ params.root }}", timeout="3s", poll_interval=0.5
    )

with DAG(dag_id="savepoint_timeout_in_seconds", schedule=None, start_date=datetime(2026, 1, 1), params=PARAMS):
    SavepointOperator(
        task_id="times_out", job_name="silent", checkpoint_root="{{ params.root }}", timeout=3, poll_interval=0.5
    )

with DAG(
    dag_id="savepoint_retries",
    schedule=None,
    start_date=datetime(2026, 1, 1),
    params=PARAMS,
    default_args=RETRY_AT_ONCE,
):
    SavepointOperator(task_id="no_such_job", job_name="never", checkpoint_root="{{ params.root }}")
    SavepointOperator(task_id="bad_timeout", job_name="flaky", checkpoint_root="{{ params.root }}", timeout="soon")
    SavepointOperator(task_id="refused", job_name="picky", checkpoint_root="{{ params.root }}", poll_interval=0.2)
    SavepointOperator(
        task_id="second_try", job_name="flaky", checkpoint_root="{{ params.root }}", timeout="30s", poll_interval=0.2
    )

DURATIONS = {"wait": Param("2s", type="string"), "poll": Param("200ms", type="string"), "grace": Param("1h")}
with DAG(
    dag_id="templated_durations",
    schedule=None,
    start_date=datetime(2026, 1, 1),
    params={**PARAMS, **DURATIONS},
):
    SavepointOperator(
        task_id="savepoint",
        job_name="silent",
        checkpoint_root="{{ params.root }}",
        timeout="{{ params.wait }}",
        poll_interval="{{ params.poll }}",
    )
    StopStreamingJobOperator(
        task_id="stop",
        job_name="idle",
        checkpoint_root="{{ params.root }}",
        stop_timeout="{{ params.wait }}",
        kill_timeout="{{ params.wait }}",
        poll_interval="{{ params.poll }}",
    )
    CheckpointRetentionOperator(
        task_id="retention",
        job_name="orders",
        checkpoint_root="{{ params.root }}",
        orphan_grace_period="{{ params.grace }}",
        savepoint_max_age="{{ params.grace }}",
        dry_run=True,
    )

with DAG(dag_id="stop_checks", schedule=None, start_date=datetime(2026, 1, 1), params=PARAMS):
    StopStreamingJobOperator(task_id="nothing_to_stop", job_name="idle", checkpoint_root="{{ params.root }}")
    StopStreamingJobOperator(  # another DAG's run holds the job since before this DAG run: not ours to stop
        task_id="leaves_an_older_run_alone",
        job_name="older",
        checkpoint_root="{{ params.root }}",
        started_after="{{ dag_run.start_date }}",
        stop_timeout="1s",
    )
    StopStreamingJobOperator(
        task_id="answers_the_stop", job_name="polite", checkpoint_root="{{ params.root }}", stop_timeout=30
    )
    StopStreamingJobOperator(
        task_id="nobody_kills",
        job_name="frozen",
        checkpoint_root="{{ params.root }}",
        reason="a test froze it",
        stop_timeout="1s",
        kill_timeout="2s",
        poll_interval=0.2,
    )
