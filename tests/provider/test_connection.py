"""The checkpoint_storage connection: every field on its form does something; Test lists the root."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from airflow_checkpoint_provider.hooks.checkpoint_storage import CheckpointStorageHook
from spark_checkpoint_runtime.layout import CheckpointStorage
from tests.conftest import write_checkpoint
from tests.provider.conftest import load_dag, task_states, xcom


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
    write_checkpoint(CheckpointStorage(str(rooted), "orders"), 1, [])
    assert hook.test_connection() == (True, f"listed {rooted}: 1 job(s) (orders)")
    os.environ["AIRFLOW_CONN_CHECKPOINT_ROOTED"] = json.dumps({"conn_type": "checkpoint_storage"})
    ok, message = hook.test_connection()
    assert not ok and "has no Host" in message and "set the Host" in message


def test_tasks_without_a_checkpoint_root_use_the_connections_host(rooted: Path):
    storage = CheckpointStorage(str(rooted), "orders")
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
