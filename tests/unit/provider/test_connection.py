"""The checkpoint_storage connection: every field on its form does something; Test lists the root."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from airflow.sdk.exceptions import AirflowException

from airflow_checkpoint_provider.hooks.checkpoint_storage import CheckpointStorageHook
from spark_checkpoint_runtime.layout import JobFolder
from tests.support.helpers import write_checkpoint


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
