from datetime import datetime

from airflow.sdk import DAG

from airflow_checkpoint_provider.operators import CheckpointedStreamingJobOperator, CheckpointRetentionOperator
from airflow_checkpoint_provider.sensors import CheckpointSensor

job = {"job_name": "orders", "storage_conn_id": "checkpoint_s3"}  # the connection's Host is the checkpoint root

with DAG("orders", schedule="@hourly", start_date=datetime(2026, 1, 1), catchup=False):
    run = CheckpointedStreamingJobOperator(
        task_id="run_job",
        **job,
        pipeline="my_pipelines:orders",
        py_files=["/opt/pipelines/my_pipelines"],
        sink="parquet:s3://bucket/orders",
        output_mode="update",
        trigger="available-now",
        retries=2,
    )  # every retry restores from the latest valid checkpoint; output is published once a checkpoint completes
    confirm = CheckpointSensor(task_id="confirm", **job, at_least=run.output["checkpoint_id"], deferrable=True)
    retention = CheckpointRetentionOperator(task_id="retention", **job, num_retained=3)
    run >> confirm >> retention
