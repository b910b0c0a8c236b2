"""The checkpoint_storage connection: every field on its form does something; Test lists the root."""

from __future__ import annotations

import json
import logging
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


def test_the_connection_form_is_what_airflows_api_serves_to_its_ui(caplog):
    """Airflow 3.3 builds the form from provider info (no FAB provider, no wtforms): the API's own service
    returns our name, labels, placeholders, hidden fields and the two extra fields."""
    from airflow.api_fastapi.core_api.services.ui.connections import HookMetaService

    HookMetaService.hook_meta_data.cache_clear()
    with caplog.at_level(logging.INFO):
        meta = next(m for m in HookMetaService.hook_meta_data() if m.connection_type == "checkpoint_storage")
    assert meta.hook_name == "Checkpoint Storage (fsspec)"
    fields = meta.standard_fields
    assert fields.url_schema.hidden and fields.port.hidden, "schema and port do nothing here"
    assert not fields.host.hidden and "root" in fields.host.title.lower()
    assert fields.host.placeholder == "s3://bucket/checkpoints"
    assert "secret" in fields.password.title.lower() and "key" in fields.login.title.lower()
    assert set(meta.extra_fields) == {"endpoint_url", "region_name"}
    assert meta.extra_fields["endpoint_url"]["schema"]["title"] == "Endpoint URL"
    assert "not fully initialized" not in caplog.text


def test_the_forms_endpoint_and_region_become_client_kwargs(monkeypatch):
    form = {"endpoint_url": "http://minio:9000", "region_name": "eu-west-1", "config_kwargs": {"retries": 1}}
    connection = {"conn_type": "checkpoint_storage", "login": "k", "password": "s", "extra": form}
    monkeypatch.setenv("AIRFLOW_CONN_FORMED", json.dumps(connection))
    assert CheckpointStorageHook("formed").storage_options() == {
        "client_kwargs": {"endpoint_url": "http://minio:9000", "region_name": "eu-west-1"},
        "config_kwargs": {"retries": 1},
        "key": "k",
        "secret": "s",
    }
    # A form saved with its fields left empty passes nothing for them.
    empty = {"conn_type": "checkpoint_storage", "extra": {"endpoint_url": None, "region_name": ""}}
    monkeypatch.setenv("AIRFLOW_CONN_FORMED", json.dumps(empty))
    assert CheckpointStorageHook("formed").storage_options() == {}
    clash = {"endpoint_url": "http://a:9000", "client_kwargs": {"endpoint_url": "http://b:9000"}}
    monkeypatch.setenv("AIRFLOW_CONN_FORMED", json.dumps({"conn_type": "checkpoint_storage", "extra": clash}))
    with pytest.raises(AirflowException, match="sets endpoint_url both in its form field and in the extra"):
        CheckpointStorageHook("formed").storage_options()


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
