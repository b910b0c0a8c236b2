"""DAGs for the provider's job tests; paths come in through the run's params."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path

from airflow.sdk import DAG, Param, task

from airflow_checkpoint_provider.operators import (
    CheckpointedStreamingJobOperator,
    CheckpointRetentionOperator,
    RestoreFromCheckpointOperator,
)
from airflow_checkpoint_provider.sensors import CheckpointSensor

EXAMPLES = str(Path(__file__).resolve().parents[3] / "examples")
PARAMS = {
    "root": Param("/nonexistent", type="string"),
    "landing": Param("/nonexistent", type="string"),
    "output": Param("/nonexistent", type="string"),
}
CONF = {
    "spark.example.landing": "{{ params.landing }}",
    "spark.sql.shuffle.partitions": "2",
    "spark.ui.enabled": "false",
}


def job(task_id: str, **kwargs) -> CheckpointedStreamingJobOperator:
    options = {
        "job_name": "orders",
        "checkpoint_root": "{{ params.root }}",
        "pipeline": "examples.pipelines:running_counts",
        "sink": "parquet:{{ params.output }}",
        "output_mode": "update",
        "checkpoint_interval": "1s",
        "conf": CONF,
        "py_files": [EXAMPLES],
        **kwargs,
    }
    return CheckpointedStreamingJobOperator(task_id=task_id, **options)


@task
def land_more_events(landing: str) -> int:
    """Three more files arrive between the runs (ids from 100000, so they never clash)."""
    for number in range(3):
        rows = [{"id": 100_000 + number * 10 + n, "key": f"k{n % 5}", "value": n} for n in range(10)]
        (Path(landing) / f"late-{number}.json").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return 30


with DAG(dag_id="back_to_back", schedule=None, start_date=datetime(2026, 1, 1), params=PARAMS):
    first = job(
        "first_run", num_retained=2, storage_conn_id="checkpoint_local", openlineage_inject_parent_job_info=True
    )
    wait = CheckpointSensor(
        task_id="wait_for_first_checkpoint",
        job_name="orders",
        checkpoint_root="{{ params.root }}",
        at_least=first.output["checkpoint_id"],  # an XComArg: the key the job operator pushes
        deferrable=True,
        poke_interval=1,
        timeout=120,
    )
    second = job("second_run", num_retained=2)
    retention = CheckpointRetentionOperator(
        task_id="retention",
        job_name="orders",
        checkpoint_root="{{ params.root }}",
        num_retained=2,
        orphan_grace_period="0s",
    )
    first >> wait >> land_more_events("{{ params.landing }}") >> second >> retention

with DAG(
    dag_id="deferred_wait",
    schedule=None,
    start_date=datetime(2026, 1, 1),
    params={**PARAMS, "after": Param(0, type="integer")},
):
    CheckpointSensor(
        task_id="wait",
        job_name="orders",
        checkpoint_root="{{ params.root }}",
        newer_than="{{ params.after }}",
        deferrable=True,
        poke_interval=1,
        timeout=300,
    )

with DAG(dag_id="killed_and_retried", schedule=None, start_date=datetime(2026, 1, 1), params=PARAMS):
    stream = job(
        "stream",
        pipeline="examples.pipelines:events",
        output_mode="append",
        trigger="continuous",
        batch_interval="200ms",
        max_duration="25s",
        runtime_options={"lease_timeout": "4s"},  # the retry waits out the killed try's lease: keep it short
        retries=1,
        retry_delay=timedelta(seconds=1),
    )
    drain = job("drain", pipeline="examples.pipelines:events", output_mode="append")
    stream >> drain

with DAG(dag_id="graceful_stop", schedule=None, start_date=datetime(2026, 1, 1), params=PARAMS):
    # The Spark UI on: the test opens it through the task's "Spark UI" link while the job runs.
    job(
        "stream",
        trigger="continuous",
        batch_interval="200ms",
        max_duration="10min",
        conf={**CONF, "spark.ui.enabled": "true"},
    )


with DAG(dag_id="fresh_start_over_damage", schedule=None, start_date=datetime(2026, 1, 1), params=PARAMS):
    RestoreFromCheckpointOperator(
        task_id="restore",
        retries=2,  # the runtime's refusal (exit 3) is definitive: none of them is spent
        retry_delay=timedelta(0),
        allow_fresh_start=True,
        job_name="orders",
        checkpoint_root="{{ params.root }}",
        pipeline="examples.pipelines:running_counts",
        sink="parquet:{{ params.output }}",
        output_mode="update",
        conf=CONF,
        py_files=[EXAMPLES],
    )

with DAG(dag_id="root_from_connection", schedule=None, start_date=datetime(2026, 1, 1)):
    # No checkpoint_root anywhere: the checkpoint_storage connection's Host is the default root.
    found = CheckpointSensor(task_id="find", job_name="orders", storage_conn_id="checkpoint_rooted", timeout=30)
    kept = CheckpointRetentionOperator(
        task_id="retention", job_name="orders", storage_conn_id="checkpoint_rooted", orphan_grace_period="0s"
    )
    found >> kept

with DAG(
    dag_id="on_the_cluster",
    schedule=None,
    start_date=datetime(2026, 1, 1),
    params={**PARAMS, "work": Param("/nonexistent", type="string")},
):
    # Cluster deploy mode on the standalone master of ``spark_cluster`` (the test defines it): the driver runs
    # on a worker. Try 1 is killed through a kill request (the master kills the driver), try 2 restores from
    # the latest checkpoint and stops gracefully when its task is stopped.
    # Storage options with a planted secret: they reach the driver inside the launcher jar, never in its command.
    on_cluster = {"conn_id": "spark_cluster", "working_dir": "{{ params.work }}", "storage_conn_id": "checkpoint_local"}
    stream = job(
        "stream",
        trigger="continuous",
        batch_interval="500ms",
        max_duration="10min",
        stop_timeout="60s",
        kill_poll_interval=1,
        runtime_options={"lease_timeout": "4s"},  # the retry waits out the killed try's lease: keep it short
        retries=1,
        retry_delay=timedelta(seconds=1),
        **on_cluster,
    )
    # Deferred: the task frees its worker slot while its driver runs and the triggerer follows it. Try 1 is
    # killed through a kill request the trigger serves; try 2 is frozen (SIGSTOP), and the trigger kills it when
    # its heartbeat stays unchanged for the lease timeout; try 3 restores and runs until its max duration. The
    # max duration is for try 3 (tries 1 and 2 end sooner, on request): long enough for the files still unread
    # when it starts (up to three, one batch each, the first slow in a cold driver).
    deferred = job(
        "deferred",
        trigger="continuous",
        batch_interval="500ms",
        max_duration="40s",
        deferrable=True,
        driver_poll_interval=1,
        runtime_options={"lease_timeout": "6s"},
        retries=2,
        retry_delay=timedelta(seconds=1),
        **on_cluster,
    )
    # An upgrade the runtime refuses (exit 3: another grouping key over the same state): the driver's master
    # says only FAILED, the run's report has the exit status, and no retry is spent on it.
    incompatible = job(
        "incompatible",
        pipeline="examples.pipelines:running_counts_by_value",
        retries=1,
        retry_delay=timedelta(seconds=1),
        trigger_rule="all_done",
        **on_cluster,
    )
    stream >> deferred >> incompatible
