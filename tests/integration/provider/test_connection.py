"""Tasks under dag.test() that take their storage from a connection: a checkpoint_storage connection's Host as
the root, an aws connection over a loopback S3 server. The hook alone is ``tests/unit/provider/test_connection.py``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from airflow.sdk.exceptions import AirflowException

from airflow_checkpoint_provider.hooks.checkpoint_storage import CheckpointStorageHook
from spark_checkpoint_runtime.layout import JobFolder
from tests.support.airflow_env import load_dag, task_states, xcom
from tests.support.helpers import S3_BUCKET, write_checkpoint


def test_tasks_without_a_checkpoint_root_use_the_connections_host(rooted: Path):
    storage = JobFolder(str(rooted), "orders")
    for checkpoint_id in (1, 2, 3, 4):
        write_checkpoint(storage, checkpoint_id, [])
    run = load_dag("root_from_connection").test()
    assert task_states(run) == {"find": "success", "retention": "success"}
    assert xcom(run, "find")["checkpoint_id"] == 4
    summary = xcom(run, "retention")
    assert summary["kept"]["checkpoints"] == 3 and summary["report_path"].startswith(
        f"file://{rooted}/orders/_reports/"
    )
    assert sorted(p.name for p in (rooted / "orders").glob("chk-*")) == ["chk-2", "chk-3", "chk-4"]


def test_an_aws_connection_serves_an_s3_checkpoint_root(s3, monkeypatch):
    """``storage_conn_id="aws_..."``: Airflow's own aws connection, over a real S3 server on loopback."""
    aws = {
        "conn_type": "aws",
        "login": s3["key"],
        "password": s3["secret"],
        "extra": {"endpoint_url": s3["client_kwargs"]["endpoint_url"], "region_name": "us-east-1"},
    }
    monkeypatch.setenv("AIRFLOW_CONN_AWS_LOOPBACK", json.dumps(aws))
    root = f"s3://{S3_BUCKET}/from-aws-connection"
    write_checkpoint(JobFolder(root, "orders", s3), 1, [])
    hook = CheckpointStorageHook("aws_loopback")
    assert hook.storage_options() == s3
    assert hook.list_jobs(root) == ["orders"]
    assert hook.latest_checkpoint(root, "orders")["checkpoint_id"] == 1
    # Tasks take it as it is: a sensor finds the newest checkpoint, retention keeps one (dag.test, real S3 calls).
    write_checkpoint(JobFolder(root, "orders", s3), 2, [])
    run = load_dag("aws_connection_tasks").test(run_conf={"root": root})
    assert task_states(run) == {"find": "success", "retain": "success"}, task_states(run)
    assert xcom(run, "find")["checkpoint_id"] == 2 and xcom(run, "retain")["deleted"]["checkpoints"] == 1
    assert JobFolder(root, "orders", s3).checkpoints.ids() == [2]
    # An aws connection names no root: a task without checkpoint_root is told what to do.
    with pytest.raises(AirflowException, match="is a aws connection, which names no root"):
        hook.root(None)
    # A role to assume needs boto's credential chain; refused rather than run with other credentials.
    monkeypatch.setenv("AIRFLOW_CONN_AWS_LOOPBACK", json.dumps({**aws, "extra": {"role_arn": "arn:aws:iam::1:role/x"}}))
    with pytest.raises(AirflowException, match="sets role_arn, which the checkpoint storage cannot honour"):
        hook.storage_options()
