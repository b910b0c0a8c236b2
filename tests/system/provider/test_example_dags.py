"""Every example DAG runs green under dag.test() (real Airflow, local Spark, real files)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from spark_checkpoint_runtime.layout import ControlChannel, JobFolder
from tests.support.airflow_env import load_dag, task_states, xcom
from tests.support.helpers import (
    Landing,
    completed_checkpoints,
    continuous_counts_args,
    final_counts,
    start_module,
    wait_for,
)
from tests.support.state_matrix import ROCKSDB

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def test_scheduled_streaming(tmp_path: Path, landing: Landing, monkeypatch):
    landing.add_files(3)
    conf = {
        "job_name": "counts",
        "checkpoint_root": str(tmp_path / "root"),
        "landing": str(landing.path),
        "output": str(tmp_path / "out"),
        "num_retained": 2,
    }
    run = load_dag("scheduled_streaming").test(run_conf=conf)
    assert set(task_states(run).values()) == {"success"}, task_states(run)
    job = xcom(run, "run_job")
    assert job["rows"] == 30 and job["status"] == "finished"
    assert xcom(run, "confirm_checkpoint")["checkpoint_id"] == job["checkpoint_id"]
    assert len(completed_checkpoints(tmp_path / "root", "counts")) <= 2
    largest = final_counts(tmp_path / "out")
    assert largest == landing.counts_by_key()

    # The output path is templated, so the outlet is an AssetAlias: the run that committed rows emitted one
    # event for the output's Asset, carrying its checkpoint; a run with nothing new commits nothing and
    # emits none.
    # With the root among the checkpoint pages' roots, the task's "Checkpoint history" link opens the job's page.
    monkeypatch.setenv("AIRFLOW__CHECKPOINT_PROVIDER__ROOTS", f"/elsewhere, {tmp_path / 'root'}")
    again = load_dag("scheduled_streaming").test(run_conf=conf)
    assert set(task_states(again).values()) == {"success"} and xcom(again, "run_job")["rows"] == 0
    assert xcom(again, "run_job", "_link_CheckpointHistoryLink").endswith("/plugin/checkpoints/jobs/1/counts")
    events = _asset_events(f"file://{tmp_path / 'out'}")
    assert [(e["checkpoint_id"], e["batch_id"], e["rows"]) for e in events] == [
        (job["checkpoint_id"], job["batch_id"], 30)
    ], events
    assert events[0]["job_name"] == "counts"


def _asset_events(uri: str) -> list[dict]:
    """The extras of the Asset events recorded in Airflow's database for ``uri``, oldest first."""
    from airflow.models.asset import AssetEvent, AssetModel
    from airflow.utils.session import create_session

    with create_session() as session:
        rows = (
            session.query(AssetEvent.extra)
            .join(AssetModel, AssetModel.id == AssetEvent.asset_id)
            .filter(AssetModel.uri == uri)
            .order_by(AssetEvent.id)
            .all()
        )
        return [dict(row[0]) for row in rows]


def test_restore_automation(tmp_path: Path, landing: Landing):
    landing.add_files(8)
    conf = {
        "job_name": "stream",
        "checkpoint_root": str(tmp_path / "root"),
        "working_dir": str(tmp_path / "work"),
        "landing": str(landing.path),
        "output": str(tmp_path / "out"),
        "max_duration": "12s",
        "checkpoint_interval": "1s",
    }
    # dag.test runs one task at a time, so the sensors that watch beside the running job could run first and
    # wait for a job that has not started. The real-scheduler tests run them beside the job, stalled and not.
    run = load_dag("restore_automation").test(run_conf=conf, mark_success_pattern="first_checkpoint|watch_health")
    states = task_states(run)
    assert str(run.state) == "success", states
    assert states == {
        "run_job": "success",
        "first_checkpoint": "success",
        "watch_health": "success",
        "stop_stalled_job": "skipped",
        "restore_from_latest": "skipped",
    }
    expected = landing.counts_by_key()
    counted = final_counts(tmp_path / "out")
    assert counted and all(counted[key] <= expected[key] for key in counted), "no event counted twice"
    assert (tmp_path / "work" / "stream").is_dir(), "the run's Spark working folder is the one the param named"


def _start_v1(tmp_path: Path, landing: Landing, conf: dict[str, str] | None = None) -> subprocess.Popen:
    """v1 of the job, running continuously in its own process (what the upgrade DAG finds running)."""
    args = continuous_counts_args(
        "counts", tmp_path / "root", tmp_path / "work", landing, tmp_path / "out", batch_interval="200ms"
    )
    # The same Spark settings as the example DAG's new version (a different shuffle partition count
    # would rightly be refused as incompatible).
    process = start_module(
        args, {"spark.sql.shuffle.partitions": "4", **(conf or {})}, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    control = ControlChannel(JobFolder(str(tmp_path / "root"), "counts"))
    wait_for(lambda: completed_checkpoints(tmp_path / "root", "counts") and control.live_runs(), 180, "v1", process)
    return process


def _upgrade_conf(tmp_path: Path, landing: Landing, new_pipeline: str) -> dict:
    return {
        "job_name": "counts",
        "checkpoint_root": str(tmp_path / "root"),
        "landing": str(landing.path),
        "output": str(tmp_path / "out"),
        "new_pipeline": new_pipeline,
        "stop": True,
        "restore_source": "savepoint",
    }


def test_upgrade_with_savepoint(tmp_path: Path, landing: Landing):
    landing.add_files(5)
    v1 = _start_v1(tmp_path, landing)
    landing.add_files(2)
    run = load_dag("upgrade_with_savepoint").test(
        run_conf=_upgrade_conf(tmp_path, landing, "examples.pipelines:running_counts_with_label")
    )
    assert v1.wait(timeout=120) == 0, v1.stderr.read()[-3000:]
    assert set(task_states(run).values()) == {"success"}, task_states(run)
    savepoint_path = xcom(run, "take_savepoint")
    new_version = xcom(run, "run_new_version")
    assert new_version["restored_from"]["path"] == savepoint_path
    assert new_version["restored_from"]["kind"] == "savepoint"
    assert xcom(run, "confirm_first_checkpoint")["checkpoint_id"] == new_version["checkpoint_id"]
    largest = final_counts(tmp_path / "out")
    assert largest == landing.counts_by_key(), "the counts continued exactly across the upgrade"


def test_incompatible_upgrade_fails_in_the_restore_step_and_keeps_the_savepoint(
    tmp_path: Path, landing: Landing, capfd
):
    landing.add_files(3)
    v1 = _start_v1(tmp_path, landing)
    run = load_dag("upgrade_with_savepoint").test(
        run_conf=_upgrade_conf(tmp_path, landing, "examples.pipelines:running_counts_by_value")
    )
    assert v1.wait(timeout=120) == 0
    states = task_states(run)
    assert states["take_savepoint"] == "success" and states["run_new_version"] == "failed", states
    assert states["confirm_first_checkpoint"] == "upstream_failed"
    output = capfd.readouterr().out
    assert "incompatible restore from" in output and "key: [key: string] became [value: long]" in output
    storage = JobFolder(str(tmp_path / "root"), "counts")
    savepoint = storage.resolve_snapshot(xcom(run, "take_savepoint"))  # still valid: usable for a retry
    assert savepoint.metadata.kind == "savepoint"
    assert all(i < savepoint.metadata.id for i in completed_checkpoints(tmp_path / "root", "counts"))


@pytest.mark.parametrize("store", ["rocksdb", "hdfs"])
def test_rescale_with_savepoint(tmp_path: Path, landing: Landing, store: str):
    """The running job (4 partitions, on each state store) stops with a savepoint, is rescaled to 8 and
    restarted from the rescaled savepoint on its own store; it runs at 8 and every count is exact."""
    landing.add_files(4)
    v1 = _start_v1(
        tmp_path, landing, {"spark.sql.streaming.stateStore.providerClass": ROCKSDB} if store == "rocksdb" else {}
    )
    landing.add_files(2)
    conf = {**_upgrade_conf(tmp_path, landing, "examples.pipelines:running_counts"), "partitions": 8}
    del conf["new_pipeline"], conf["stop"], conf["restore_source"]
    run = load_dag("rescale_with_savepoint").test(run_conf=conf)
    assert v1.wait(timeout=120) == 0, v1.stderr.read()[-3000:]
    assert set(task_states(run).values()) == {"success"}, task_states(run)
    rescaled = xcom(run, "rescale")
    new_run = xcom(run, "run_rescaled")
    assert new_run["restored_from"]["path"] == rescaled and new_run["restored_from"]["kind"] == "savepoint"
    assert xcom(run, "confirm_first_checkpoint")["checkpoint_id"] == new_run["checkpoint_id"]
    storage = JobFolder(str(tmp_path / "root"), "counts")
    meta = storage.resolve_snapshot(rescaled).metadata
    assert (
        meta.restored_from["path"] == xcom(run, "take_savepoint")
        and meta.restored_from["rescaled_from_partitions"] == 4
    )
    newest = storage.checkpoints.read(new_run["checkpoint_id"])
    assert newest.fingerprint["pinned_confs"]["spark.sql.shuffle.partitions"] == "8"
    assert (
        newest.fingerprint["state_store"]["provider"]
        == ("RocksDB" if store == "rocksdb" else "HDFSBacked") + "StateStoreProvider"
    )
    assert final_counts(tmp_path / "out") == landing.counts_by_key(), "the counts continued exactly across the rescale"


def test_transform_state_with_savepoint(tmp_path: Path, landing: Landing):
    """The running job stops with a savepoint; the example function, shipped with the examples package,
    drops one key's state; the job restarts from the transformed savepoint and counts that key from zero
    while every other count continues exactly."""
    landing.add_files(4)
    v1 = _start_v1(tmp_path, landing)
    landing.add_files(2)
    conf = {**_upgrade_conf(tmp_path, landing, "examples.pipelines:running_counts"), "drop_keys": "k1"}
    del conf["new_pipeline"], conf["stop"], conf["restore_source"]
    run = load_dag("transform_state_with_savepoint").test(run_conf=conf)
    assert v1.wait(timeout=120) == 0, v1.stderr.read()[-3000:]
    assert set(task_states(run).values()) == {"success"}, task_states(run)
    transformed = xcom(run, "transform")
    new_run = xcom(run, "run_transformed")
    assert new_run["restored_from"]["path"] == transformed and new_run["restored_from"]["kind"] == "savepoint"
    assert xcom(run, "confirm_first_checkpoint")["checkpoint_id"] == new_run["checkpoint_id"]
    storage = JobFolder(str(tmp_path / "root"), "counts")
    origin = storage.resolve_snapshot(transformed).metadata.restored_from
    assert origin["path"] == xcom(run, "take_savepoint")
    assert origin["transformed_with"] == "examples.state_functions:drop_keys" and origin["transformed_store"] == [
        0,
        "default",
    ]
    # Every key but the dropped one is in the transformed state, and its count went on exactly.
    expected = landing.counts_by_key()
    assert origin["transformed_rows"] == len(expected) - 1
    latest = final_counts(tmp_path / "out")
    assert {k: latest[k] for k in expected if k != "k1"} == {k: n for k, n in expected.items() if k != "k1"}
