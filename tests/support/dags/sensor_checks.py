"""DAGs for the sensor tests; the checkpoint root comes in through the run's params."""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import DAG, Param

from airflow_checkpoint_provider.operators import CheckpointRetentionOperator
from airflow_checkpoint_provider.sensors import CheckpointHealthSensor, CheckpointSensor

ROOT = "{{ params.root }}"
PARAMS = {"root": Param("/nonexistent", type="string")}

for mode in ("poke", "reschedule"):
    with DAG(dag_id=f"sensor_found_{mode}", schedule=None, start_date=datetime(2026, 1, 1), params=PARAMS):
        CheckpointSensor(
            task_id="wait",
            job_name="orders",
            checkpoint_root=ROOT,
            newer_than="{{ 4 }}",
            mode=mode,
            poke_interval=1,
            timeout=30,
        )

for soft_fail in (False, True):
    with DAG(dag_id=f"sensor_timeout_{soft_fail}", schedule=None, start_date=datetime(2026, 1, 1), params=PARAMS):
        CheckpointSensor(
            task_id="wait",
            job_name="orders",
            checkpoint_root=ROOT,
            newer_than=1,
            poke_interval=1,
            timeout=3,
            soft_fail=soft_fail,
        )

with DAG(dag_id="health_checks", schedule=None, start_date=datetime(2026, 1, 1), params=PARAMS):
    # Flink's window with the defaults: max(10s, 10min) x (0 + 2) = 20 minutes.
    CheckpointHealthSensor(task_id="stalled", job_name="stalled", checkpoint_root=ROOT, poke_interval=1, timeout=10)
    CheckpointHealthSensor(task_id="healthy", job_name="healthy", checkpoint_root=ROOT, poke_interval=1, timeout=10)
    CheckpointHealthSensor(
        task_id="tight_max_age", job_name="healthy", checkpoint_root=ROOT, max_age="1ms", poke_interval=1, timeout=10
    )

for deferrable in (False, True):
    with DAG(
        dag_id=f"sensor_completed_after_{deferrable}".lower(),
        schedule=None,
        start_date=datetime(2026, 1, 1),
        params={**PARAMS, "after": Param("", type="string")},
    ):
        CheckpointSensor(
            task_id="wait",
            job_name="orders",
            checkpoint_root=ROOT,
            completed_after="{{ params.after }}",
            deferrable=deferrable,
            poke_interval=1,
            timeout=3,
        )

# Tasks reading an S3 root through Airflow's own aws connection (``AIRFLOW_CONN_AWS_LOOPBACK`` in the test).
with DAG(dag_id="aws_connection_tasks", schedule=None, start_date=datetime(2026, 1, 1), params=PARAMS):
    CheckpointSensor(
        task_id="find", job_name="orders", checkpoint_root=ROOT, storage_conn_id="aws_loopback", timeout=30
    ) >> CheckpointRetentionOperator(
        task_id="retain", job_name="orders", checkpoint_root=ROOT, storage_conn_id="aws_loopback", num_retained=1
    )
