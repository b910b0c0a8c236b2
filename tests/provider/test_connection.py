"""The checkpoint_storage connection: every field on its form does something; Test lists the root."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from airflow.sdk.exceptions import AirflowException

from airflow_checkpoint_provider.hooks.checkpoint_storage import CheckpointStorageHook
from spark_checkpoint_runtime.layout import JobFolder
from tests.support.airflow_env import load_dag, task_states, xcom
from tests.support.helpers import S3_BUCKET, write_checkpoint


@pytest.fixture
def rooted(tmp_path: Path):
    """A connection whose Host is the default root, with the key in Login and the secret in Password."""
    connection = {
        "conn_type": "checkpoint_storage",
        "host": str(tmp_path / "root"),
        "login": "AKIA-TEST-KEY",
        "password": "not-a-real-secret",
        "extra": {"client_kwargs": {"region_name": "eu-west-1"}},
    }
    os.environ["AIRFLOW_CONN_CHECKPOINT_ROOTED"] = json.dumps(connection)
    yield tmp_path / "root"
    del os.environ["AIRFLOW_CONN_CHECKPOINT_ROOTED"]


def test_every_visible_field_becomes_a_storage_option_or_the_root(rooted: Path):
    hook = CheckpointStorageHook("checkpoint_rooted")
    assert hook.storage_options() == {
        "client_kwargs": {"region_name": "eu-west-1"},
        "key": "AKIA-TEST-KEY",
        "secret": "not-a-real-secret",
    }
    assert hook.root(None) == str(rooted) and hook.root("/elsewhere") == "/elsewhere"
    form = CheckpointStorageHook.get_ui_field_behaviour()
    assert set(form["hidden_fields"]) == {"schema", "port"}, "shown: host, login, password (masked), extra"
    assert "secret" in form["relabeling"]["password"].lower() and "root" in form["relabeling"]["host"].lower()


def test_test_connection_lists_the_default_root(rooted: Path):
    hook = CheckpointStorageHook("checkpoint_rooted")
    write_checkpoint(JobFolder(str(rooted), "orders"), 1, [])
    assert hook.test_connection() == (True, f"listed {rooted}: 1 job(s) (orders)")
    os.environ["AIRFLOW_CONN_CHECKPOINT_ROOTED"] = json.dumps({"conn_type": "checkpoint_storage"})
    ok, message = hook.test_connection()
    assert not ok and "has no Host" in message and "set the Host" in message


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


@pytest.mark.parametrize(
    ("connection", "options"),
    [
        (
            {"conn_type": "google_cloud_platform", "extra": {"key_path": "/keys/sa.json", "project": "p1"}},
            {"token": "/keys/sa.json", "project": "p1"},
        ),
        ({"conn_type": "wasb", "login": "acct", "password": "k3y"}, {"account_name": "acct", "account_key": "k3y"}),
        (
            {"conn_type": "aws", "extra": {"aws_session_token": "t", "profile_name": "dev"}},
            {"token": "t", "profile": "dev"},
        ),
    ],
)
def test_standard_cloud_connections_become_fsspec_options(monkeypatch, connection, options):
    monkeypatch.setenv("AIRFLOW_CONN_CLOUD", json.dumps(connection))
    assert CheckpointStorageHook("cloud").storage_options() == options


def test_a_connection_type_that_says_nothing_about_storage_is_refused(monkeypatch):
    monkeypatch.setenv("AIRFLOW_CONN_CLOUD", json.dumps({"conn_type": "postgres", "host": "db"}))
    with pytest.raises(AirflowException, match="has type 'postgres', which says nothing about checkpoint storage"):
        CheckpointStorageHook("cloud").storage_options()
