"""Data-aware scheduling under a real Airflow: scheduler, DAG processor, API server on a loopback port.

The job operator declares its Parquet output as an Asset; each run that commits output emits an Asset event
whose extra carries ``checkpoint_id``, ``batch_id`` and ``rows``; a DAG scheduled on that Asset runs after
each commit and sees the extra. For a continuous job, an ``AssetWatcher`` with ``CheckpointCommitTrigger``
(in the triggerer) turns each commit into an event while the job runs. Not ``dag.test``: the scheduler, the
LocalExecutor, the triggerer and the execution API do the work. The restore automation example's stall that
ends in a graceful stop is here too (its watch runs beside the job, which ``dag.test`` cannot do).
"""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

import pytest

from spark_checkpoint_runtime.layout import ControlChannel, JobFolder, LeaseFiles
from tests.support.helpers import REPO, Landing, continuous_counts_args, final_counts, start_module
from tests.support.local_airflow import LocalAirflow

pytestmark = [pytest.mark.spark, pytest.mark.slow]

PRODUCER = """
from datetime import datetime

from airflow.sdk import DAG

from airflow_checkpoint_provider.operators import CheckpointedStreamingJobOperator

with DAG(dag_id="asset_producer", schedule=None, start_date=datetime(2026, 1, 1), catchup=False):
    CheckpointedStreamingJobOperator(
        task_id="run_job",
        job_name="orders",
        checkpoint_root={root!r},
        pipeline="examples.pipelines:running_counts",
        sink="parquet:{output}",
        output_mode="update",
        checkpoint_interval="1s",
        conf={{"spark.example.landing": {landing!r}, "spark.sql.shuffle.partitions": "2", "spark.ui.enabled": "false"}},
        py_files=[{examples!r}],
    )
"""
CONSUMER = '''
import json
from datetime import datetime

from airflow.sdk import DAG, Asset, task

with DAG(dag_id="asset_consumer", schedule=[Asset(uri={uri!r})], start_date=datetime(2026, 1, 1), catchup=False):

    @task
    def record(triggering_asset_events=None):
        """Append what the triggering events carried to a file the test reads."""
        with open({record!r}, "a") as handle:
            for asset, events in triggering_asset_events.items():
                for event in events:
                    handle.write(json.dumps({{"uri": asset.uri, "extra": dict(event.extra)}}) + "\\n")

    record()
'''


def test_each_committing_run_emits_an_asset_event_that_schedules_the_downstream_dag(tmp_path: Path, landing: Landing):
    output, record, dags = tmp_path / "out", tmp_path / "events.jsonl", tmp_path / "dags"
    dags.mkdir()
    uri = f"file://{output}"
    settings = {"root": str(tmp_path / "root"), "output": str(output), "landing": str(landing.path)}
    (dags / "producer.py").write_text(PRODUCER.format(**settings, examples=str(REPO / "examples")))
    (dags / "consumer.py").write_text(CONSUMER.format(uri=uri, record=str(record)))
    airflow = LocalAirflow(tmp_path / "airflow-home", dags)
    try:
        airflow.start(("api-server", "scheduler", "dag-processor"))
        parsed = "SELECT dag_id FROM dag WHERE dag_id IN ('asset_producer', 'asset_consumer')"
        airflow.wait_for(lambda: len(airflow.query(parsed)) == 2, 120, "both DAGs to be parsed")
        for number, files in enumerate((3, 2), start=1):
            landing.add_files(files)
            triggered = airflow.airflow("dags", "trigger", "asset_producer")
            assert triggered.returncode == 0, triggered.stderr[-2000:]

            def finished(dag_id: str, count: int = number):
                runs = airflow.dag_runs(dag_id)
                assert not any(state == "failed" for _, state in runs), (dag_id, runs, airflow.log_tail("scheduler"))
                return len([s for _, s in runs if s == "success"]) >= count

            airflow.wait_for(lambda: finished("asset_producer"), 300, f"producer run {number}")
            airflow.wait_for(lambda: finished("asset_consumer"), 120, f"consumer run {number} (scheduled by the Asset)")
    finally:
        airflow.stop()
    events = [json.loads(line) for line in record.read_text().splitlines()]
    assert [e["uri"] for e in events] == [uri, uri]
    first, second = (e["extra"] for e in events)
    assert first["rows"] == 30 and second["rows"] == 20, events
    assert second["checkpoint_id"] > first["checkpoint_id"] and second["batch_id"] > first["batch_id"]
    assert first["job_name"] == "orders"
    # The extra is what the runtime reported: the checkpoint that published the output.
    assert (tmp_path / "root" / "orders" / f"chk-{second['checkpoint_id']}" / "_metadata").exists()


WATCHED_CONSUMER = """
import json
from datetime import datetime

from airflow.sdk import DAG, Asset, AssetWatcher, task

from airflow_checkpoint_provider.triggers.commits import CheckpointCommitTrigger

commits = CheckpointCommitTrigger(job_name="orders", checkpoint_root={root!r}, poke_interval=1)
output = Asset(uri={uri!r}, watchers=[AssetWatcher(name="orders-commits", trigger=commits)])
with DAG(dag_id="after_each_commit", schedule=[output], start_date=datetime(2026, 1, 1), catchup=False):

    @task
    def record(triggering_asset_events=None):
        with open({record!r}, "a") as handle:
            for events in triggering_asset_events.values():
                for event in events:
                    handle.write(json.dumps(dict(event.extra)) + "\\n")

    record()
"""


SAVEPOINT_OF_IDLE_JOB = """
from datetime import datetime

from airflow.sdk import DAG

from airflow_checkpoint_provider.operators import SavepointOperator

with DAG(dag_id="savepoint_of_idle_job", schedule=None, start_date=datetime(2026, 1, 1), catchup=False):
    SavepointOperator(task_id="take", job_name="idle", checkpoint_root={root!r}, deferrable=True, timeout="10min")
"""


def _commit_ids(root: Path, job: str) -> list[int]:
    """Ids of the job's checkpoints whose completion published output."""
    found = []
    for metadata in (root / job).glob("chk-*/_metadata"):
        staged = json.loads(metadata.read_text()).get("staged_output")
        if staged and staged.get("batches"):
            found.append(int(metadata.parent.name.removeprefix("chk-")))
    return sorted(found)


def test_an_asset_watcher_turns_each_commit_of_a_running_job_into_an_event(tmp_path: Path, landing: Landing):
    """Events come while the job runs, one per commit, and schedule the consumer; the triggerer is restarted
    between two commits and resumes from its cursor: the commit made while it was down arrives, and none the
    cursor had passed at the stop arrives twice (Airflow's stored Asset events are the record: a consumer run may
    take several). Only an event Airflow stored in the moment before the stop, whose acknowledgement had not yet
    reached the trigger, may arrive again (Airflow's ack mode redelivers what it never acknowledged). In the same
    Airflow a deferred savepoint whose task is cleared withdraws its request (the trigger's ``on_kill``)."""
    root, output, record, dags = tmp_path / "root", tmp_path / "out", tmp_path / "events.jsonl", tmp_path / "dags"
    dags.mkdir()
    (dags / "consumer.py").write_text(
        WATCHED_CONSUMER.format(root=str(root), uri=f"file://{output}", record=str(record))
    )
    (dags / "savepoint.py").write_text(SAVEPOINT_OF_IDLE_JOB.format(root=str(root)))
    airflow = LocalAirflow(tmp_path / "airflow-home", dags)
    cursor = ControlChannel(JobFolder(str(root), "orders"))
    job = None
    try:
        airflow.start()
        watching = "SELECT count(*) FROM trigger WHERE classpath LIKE '%CheckpointCommitTrigger'"
        airflow.wait_for(lambda: airflow.query(watching)[0][0] == 1, 180, "the watcher's trigger in the triggerer")
        # The watch keeps its start as its cursor at once: from then on no commit is missed.
        airflow.wait_for(lambda: cursor.cursor("airflow") == 0, 120, "the watch to start")
        landing.add_files(2)
        args = continuous_counts_args(
            "orders",
            root,
            tmp_path / "work",
            landing,
            output,
            num_retained="100",  # every checkpoint an event named is still there to compare with
        )
        job = start_module(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)

        def events() -> list[dict]:
            assert job.poll() is None, job.stderr.read()[-3000:]
            return [json.loads(line) for line in record.read_text().splitlines()] if record.exists() else []

        def stored() -> list[dict]:
            """The Asset events Airflow stored (the consumer's runs may each take several)."""
            return [json.loads(extra) for (extra,) in airflow.query("SELECT extra FROM asset_event ORDER BY id")]

        def event_ids() -> set[int]:
            return {e["payload"]["checkpoint_id"] for e in stored()}

        airflow.wait_for(lambda: events(), 300, "the first commit's event to schedule the consumer")
        landing.add_files(2)  # more commits while the job runs: more events, more consumer runs
        airflow.wait_for(lambda: len({e["payload"]["checkpoint_id"] for e in events()}) >= 2, 180, "a second run")
        assert job.poll() is None, "the events came while the job ran, not at its end"

        # The cursor follows what Airflow stored; then the triggerer goes down and the job commits meanwhile.
        newest = max(_commit_ids(root, "orders"))
        airflow.wait_for(lambda: cursor.cursor("airflow") == newest, 60, "the cursor to reach the newest commit")
        assert newest in event_ids()
        airflow.stop_process("triggerer")
        # The job may have committed again before the triggerer went down: only a commit after that is missed.
        at_stop = max(_commit_ids(root, "orders"))
        acknowledged = cursor.cursor("airflow")  # where the watch resumes: every event up to it is settled
        assert acknowledged >= newest
        landing.add_files(2)
        airflow.wait_for(lambda: max(_commit_ids(root, "orders")) > at_stop, 180, "a commit while no triggerer ran")
        missed = max(_commit_ids(root, "orders"))
        assert missed not in event_ids()
        airflow.start_process("triggerer")
        airflow.wait_for(lambda: missed in event_ids(), 180, "the missed commit's event after the restart")
        seen = stored()

        # A deferred savepoint of a job that never answers; clearing the task withdraws its request.
        idle = ControlChannel(JobFolder(str(root), "idle"))
        idle.heartbeat("idle-run", None)  # a run that looks alive (30 s) and never reads its requests
        assert airflow.airflow("dags", "trigger", "savepoint_of_idle_job").returncode == 0
        deferred = "SELECT count(*) FROM task_instance WHERE dag_id = 'savepoint_of_idle_job' AND state = 'deferred'"
        airflow.wait_for(lambda: airflow.query(deferred)[0][0] == 1, 180, "the savepoint task to defer")
        requests = root / "idle" / "_control" / "requests"
        [asked] = [p.name for p in requests.glob("*.json")]
        assert asked.endswith(".try1.json"), asked
        cleared = airflow.airflow("tasks", "clear", "savepoint_of_idle_job", "-t", "take", "-y")
        assert cleared.returncode == 0, cleared.stderr[-2000:]
        airflow.wait_for(lambda: not (requests / asked).exists(), 120, "the cleared task's request to be withdrawn")
        # By the trigger: its log (written by the triggerer, which may lag under load) says so.
        logs = airflow.home / "logs" / "dag_id=savepoint_of_idle_job"
        airflow.wait_for(
            lambda: any(
                "withdrew savepoint request" in log.read_text() for log in logs.rglob("attempt=1.log.trigger.*")
            ),
            60,
            "the trigger's log of the withdrawal",
        )
    finally:
        if job is not None and job.poll() is None:
            job.send_signal(signal.SIGTERM)
            job.wait(timeout=120)
        airflow.stop()
    for event in seen:
        payload = event["payload"]
        assert event["from_trigger"] is True and payload["job_name"] == "orders"
        metadata = json.loads((root / "orders" / f"chk-{payload['checkpoint_id']}" / "_metadata").read_text())
        assert metadata["staged_output"]["batches"] == payload["batches"], "each event is a commit of output"
    ids = sorted(e["payload"]["checkpoint_id"] for e in seen)
    again = sorted(i for i in set(ids) if ids.count(i) > 1)
    # Sent again only if stored before the stop yet past the cursor then, and only once more.
    assert all(acknowledged < i <= at_stop and ids.count(i) == 2 for i in again), (
        f"one event per commit, none the cursor had passed sent twice: {ids} (cursor {acknowledged} at the stop)"
    )
    assert sorted(set(ids)) == [i for i in _commit_ids(root, "orders") if i <= max(ids)], "no commit without its event"


def test_restore_automation_restores_a_stalled_job_that_answered_its_stop(tmp_path: Path):
    """A stall whose driver is alive (checkpoints come slower than the health window allows) ends with a
    graceful stop, not a kill: the job task succeeds, and the restore must still run. The example DAG under a
    real scheduler and triggerer; the frozen-driver case (a kill) is in ``tests/system/test_cluster.py``."""
    dags, demo = tmp_path / "dags", tmp_path / "demo"
    dags.mkdir()
    for name in ("restore_automation.py", "example_settings.py"):
        (dags / name).symlink_to(REPO / "dags" / name)
    landing = Landing(demo / "landing")
    landing.add_files(3)
    storage = JobFolder(str(demo / "checkpoints"), "event-counts")
    airflow = LocalAirflow(tmp_path / "airflow-home", dags, {"CHECKPOINT_DEMO_HOME": str(demo)})
    try:
        airflow.start()
        parsed = "SELECT count(*) FROM dag WHERE dag_id = 'restore_automation'"
        airflow.wait_for(lambda: airflow.query(parsed)[0][0] == 1, 180, "the DAG to be parsed")
        # A checkpoint a minute against a 20 s window: the watch sees a stall while the driver still answers.
        conf = {"max_age": "20s", "checkpoint_interval": "1min", "stop_timeout": "2min", "max_duration": "10min"}
        triggered = airflow.airflow("dags", "trigger", "restore_automation", "--conf", json.dumps(conf))
        assert triggered.returncode == 0, triggered.stderr[-2000:]
        run_id = airflow.wait_for(lambda: airflow.dag_runs("restore_automation"), 60, "the run")[-1][0]
        airflow.wait_for(lambda: LeaseFiles(storage).unreleased_grant(), 300, "the job to take its lease")
        grant = LeaseFiles(storage).unreleased_grant()
        landing.add_files(2)  # arrive while the job runs: the stop or the restore counts them
        state, tasks = airflow.finished_run("restore_automation", run_id, 600)
        assert tasks == {
            "run_job": "success",  # it answered the stop: a final checkpoint, output committed, exit 0
            "first_checkpoint": "success",
            "watch_health": "failed",  # the stall
            "stop_stalled_job": "success",
            "restore_from_latest": "success",  # restored although nothing failed but the watch
        }, (tasks, airflow.log_tail("scheduler"))
        assert state == "success"
        stopped = airflow.xcom("restore_automation", run_id, "stop_stalled_job")
        assert stopped["outcome"] == "stopped" and stopped["run_key"] == grant["run_key"], stopped
        assert ControlChannel(storage).run_report(grant["run_key"])["status"] == "cancelled"
        newest = storage.checkpoints.completed()[-1]
        assert newest.restored_from is not None and newest.restored_from["kind"] == "checkpoint", newest
    finally:
        airflow.stop()
    assert final_counts(demo / "output") == landing.counts_by_key()
