"""What spark-submit gets for each kind of Spark connection: the private spec reaches the driver wherever it
runs, and never the command line. YARN and Kubernetes do not run on this machine, so their command lines are
checked here, and the runtime reads the spec from where both unpack it (the driver's working directory).
Cluster deploy mode on a standalone master runs for real in ``tests/system/test_cluster.py``."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import zipfile
from pathlib import Path

import pytest

from airflow_checkpoint_provider.hooks.streaming_job import (
    SPEC_ARCHIVE,
    SPEC_FILE,
    StreamingJobHook,
    runtime_entry_point,
)
from spark_checkpoint_runtime.options import parse_options

SECRET = "s3cr3t-planted"
RUNTIME_ARGS = ["--job-name", "orders", "--checkpoint-root", "s3://bucket/checkpoints", "--pipeline", "m:f"]


def _command(monkeypatch, tmp_path: Path, connection: dict) -> tuple[list[str], StreamingJobHook]:
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_UNDER_TEST", json.dumps(connection))
    hook = StreamingJobHook(conn_id="spark_under_test", name="checkpointed:orders")
    submission = hook.spark_submission(RUNTIME_ARGS, {"key": "me", "secret": SECRET}, tmp_path)
    return submission._build_spark_submit_command(runtime_entry_point()), hook


@pytest.mark.parametrize(
    "connection",
    [
        {"conn_type": "spark", "host": "yarn", "extra": {"deploy-mode": "cluster"}},
        {"conn_type": "spark", "host": "k8s://https://kubernetes.example:6443", "extra": {"deploy-mode": "cluster"}},
    ],
    ids=["yarn", "kubernetes"],
)
def test_on_yarn_and_kubernetes_the_spec_travels_as_an_archive_into_the_drivers_working_directory(
    connection: dict, monkeypatch, tmp_path: Path
):
    work = tmp_path / "task"
    work.mkdir()
    command, hook = _command(monkeypatch, work, connection)
    assert hook.target.driver_on_cluster and not hook.target.standalone_cluster
    assert command[command.index("--deploy-mode") + 1] == "cluster"
    archive = work / f"{SPEC_ARCHIVE}.zip"
    assert command[command.index("--archives") + 1] == f"{archive}#{SPEC_ARCHIVE}"
    assert "spark_checkpoint_runtime.zip" in command[command.index("--py-files") + 1]
    args = command[command.index(runtime_entry_point()) + 1 :]
    assert args[args.index("--spec") + 1] == f"{SPEC_ARCHIVE}/{SPEC_FILE}", "relative: the driver's own folder"
    assert SECRET not in " ".join(command)
    assert stat.S_IMODE((work / SPEC_FILE).stat().st_mode) == 0o600

    # The cluster unpacks the archive under its name in the driver's working directory (YARN's container
    # folder, the Kubernetes driver's); the runtime started there finds its storage options.
    driver_folder = tmp_path / "container"
    with zipfile.ZipFile(archive) as packed:
        packed.extractall(driver_folder / SPEC_ARCHIVE)
    monkeypatch.chdir(driver_folder)
    assert parse_options(args).storage_options == {"key": "me", "secret": SECRET}


def test_a_driver_beside_the_task_reads_the_spec_where_the_task_wrote_it(monkeypatch, tmp_path: Path):
    command, hook = _command(monkeypatch, tmp_path, {"conn_type": "spark", "host": "local[2]"})
    assert not hook.target.driver_on_cluster and "--archives" not in command
    args = command[command.index(runtime_entry_point()) + 1 :]
    assert args[args.index("--spec") + 1] == str(tmp_path / SPEC_FILE)
    assert SECRET not in " ".join(command)


def test_the_spark_connection_is_resolved_once_with_the_masters_rest_server(monkeypatch):
    connection = {"conn_type": "spark", "host": "spark://master.example", "port": 7077}
    connection["extra"] = {"deploy-mode": "cluster", "rest-port": 16066, "rest-scheme": "https"}
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_UNDER_TEST", json.dumps(connection))
    hook = StreamingJobHook(conn_id="spark_under_test")
    target = hook.target
    assert (target.master, target.rest_url) == ("spark://master.example:7077", "https://master.example:16066")
    assert hook.runs_on_standalone_cluster() and hook.pin_spark_ui() is None, "the driver's UI is on the cluster"
    monkeypatch.delenv("AIRFLOW_CONN_SPARK_UNDER_TEST")  # a secrets backend's lookup: not asked again
    assert hook.runs_on_standalone_cluster() and hook.target is target


def test_a_kill_on_yarn_kills_the_application_while_spark_submit_still_runs(monkeypatch, tmp_path: Path):
    """SparkSubmitHook kills a YARN application only while spark-submit runs: the kill goes to YARN first, and
    not before spark-submit has printed the application's id. YARN's CLI is a stand-in that records its call
    (no YARN here); spark-submit is a real process."""
    stand_in = tmp_path / "bin"
    stand_in.mkdir()
    calls = tmp_path / "yarn-calls"
    (stand_in / "yarn").write_text(f'#!/bin/sh\necho "$@" >> {calls}\n')
    (stand_in / "yarn").chmod(0o755)
    monkeypatch.setenv("PATH", f"{stand_in}:{os.environ['PATH']}")
    connection = {"conn_type": "spark", "host": "yarn", "extra": {"deploy-mode": "cluster"}}
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_UNDER_TEST", json.dumps(connection))
    hook = StreamingJobHook(conn_id="spark_under_test", name="checkpointed:orders")
    hook._submit_hook = hook.spark_submission(RUNTIME_ARGS, {}, tmp_path)
    spark_submit = subprocess.Popen(["sleep", "60"])
    hook._submit_hook._submit_sp = spark_submit
    try:
        assert hook.kill_submission() is None, "no application id yet: the kill watch asks again"
        assert spark_submit.poll() is None and not calls.exists()
        hook._submit_hook._yarn_application_id = "application_1764300000000_0007"
        assert hook.kill_submission() == "application application_1764300000000_0007 on yarn"
        assert calls.read_text().split() == ["application", "-kill", "application_1764300000000_0007"]
        assert spark_submit.wait(timeout=10) is not None
    finally:
        spark_submit.kill()
