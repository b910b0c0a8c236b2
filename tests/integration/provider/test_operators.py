"""Retention and refusals under dag.test(), over real files; no Spark needed."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from types import SimpleNamespace

from spark_checkpoint_runtime.layout import (
    CheckpointMetadata,
    ControlChannel,
    JobFolder,
    now_ms,
    write_metadata_atomically,
)
from tests.support.airflow_env import load_dag, task_states, xcom
from tests.support.helpers import tree_state, write_checkpoint

DAY = 86400


def _age(path: Path, seconds: float) -> None:
    """Make every file under ``path`` look ``seconds`` old."""
    stamp = time.time() - seconds
    for item in [path, *path.rglob("*")]:
        os.utime(item, (stamp, stamp))


def _savepoint(storage: JobFolder, name: str, age_days: float) -> None:
    folder = Path(storage.savepoints.base) / name
    (folder / "state").mkdir(parents=True)
    (folder / "state" / "1.delta").write_bytes(b"s" * 7)
    meta = CheckpointMetadata(
        id=0,
        kind="savepoint",
        job_name=storage.job_name,
        run_id="r0",
        batch_id=3,
        trigger_timestamp_ms=now_ms() - int(age_days * DAY * 1000) - 5,
        completion_timestamp_ms=now_ms() - int(age_days * DAY * 1000),
        checkpointing_mode="exactly-once",
        files=[],
        state_bytes=0,
        bytes_written=0,
    )
    write_metadata_atomically(storage.fs, str(folder), meta)


def _populate(root: Path) -> JobFolder:
    storage = JobFolder(str(root), "orders")
    for checkpoint_id in (1, 2, 3, 4):
        write_checkpoint(storage, checkpoint_id, ["state/0/0/1.delta", f"state/0/0/{checkpoint_id + 1}.delta"])
    job = root / "orders"
    (job / "chk-5").mkdir()  # abandoned mid-upload two hours ago: an orphan
    (job / "chk-5" / "offsets").mkdir()
    (job / "chk-5" / "offsets" / "4").write_text("v1")
    (job / "chk-6").mkdir()  # the running job's pending checkpoint: too young to touch
    (job / "chk-6" / "metadata").write_text("{}")
    (job / "shared" / "r1" / "old-orphan").write_bytes(b"o" * 11)
    (job / "shared" / "r1" / "new-upload").write_bytes(b"n" * 13)
    killed = job / "savepoints" / "savepoint-killed" / "state"  # a rescale killed two hours ago: no _metadata
    killed.mkdir(parents=True)
    (killed / "1.delta").write_bytes(b"k" * 5)
    _age(job, 2 * 3600)
    writing = job / "savepoints" / "savepoint-writing"  # a savepoint being written now: too young to touch
    writing.mkdir()
    (writing / "offsets").write_text("v1")
    os.utime(job / "chk-6" / "metadata")
    os.utime(job / "shared" / "r1" / "new-upload")
    for name, age in (("savepoint-a", 30), ("savepoint-b", 3), ("savepoint-c", 2), ("savepoint-d", 1)):
        _savepoint(storage, name, age)
    return storage


def test_retention_operator_dry_run_then_for_real(tmp_path: Path):
    root = tmp_path / "root"
    _populate(root)
    before = tree_state(root)
    dry = load_dag("retention_policy").test(run_conf={"root": str(root), "dry_run": True})
    summary = xcom(dry, "retention")
    after = {path: state for path, state in tree_state(root).items() if not path.startswith("orders/_reports/")}
    assert after == before, "a dry run changes nothing but storing its report"
    # XCom holds counts; the full report is stored under the job's _reports/ and named in the summary.
    assert summary["kept"] == {"checkpoints": 2, "savepoints": 2}
    assert summary["deleted"] == {
        "checkpoints": 2,
        "savepoints": 2,
        "orphan_checkpoint_folders": 1,
        "orphan_savepoint_folders": 1,
        "shared_files": 3,
        "pending_uploads": 0,  # multipart uploads: S3 only
    }
    report = json.loads(Path(summary["report_path"].removeprefix("file://")).read_text())
    assert report["dry_run"] is True and summary["dry_run"] is True
    assert report["kept"] == {"checkpoints": [3, 4], "savepoints": ["savepoint-c", "savepoint-d"]}
    assert report["deleted"] == {
        "checkpoints": [1, 2],
        "savepoints": ["savepoint-a", "savepoint-b"],  # b: beyond max count 2; a: also older than 7d
        "orphan_checkpoint_folders": [5],
        "orphan_savepoint_folders": ["savepoint-killed"],
        "shared_files": ["shared/r1/old-orphan", "shared/r1/state/0/0/2.delta", "shared/r1/state/0/0/3.delta"],
        "pending_uploads": [],
    }
    assert report["bytes_freed"] == summary["bytes_freed"] > 0

    real = load_dag("retention_policy").test(run_conf={"root": str(root), "dry_run": False})
    assert task_states(real) == {"retention": "success"}
    job = root / "orders"
    assert sorted(p.name for p in job.glob("chk-*")) == ["chk-3", "chk-4", "chk-6"]
    assert sorted(p.name for p in (job / "savepoints").iterdir()) == ["savepoint-c", "savepoint-d", "savepoint-writing"]
    remaining = {str(p.relative_to(job)) for p in (job / "shared").rglob("*") if p.is_file()}
    assert remaining == {
        "shared/r1/state/0/0/1.delta",
        "shared/r1/state/0/0/4.delta",
        "shared/r1/state/0/0/5.delta",
        "shared/r1/new-upload",
    }
    storage = JobFolder(str(root), "orders")
    assert [storage.checkpoints.validate(i).id for i in (3, 4)] == [3, 4], "retained checkpoints stay valid"


def test_retention_always_keeps_the_newest_savepoint(tmp_path: Path):
    storage = JobFolder(str(tmp_path), "orders")
    write_checkpoint(storage, 1, [])
    _savepoint(storage, "only-one", 400)
    run = load_dag("retention_policy").test(run_conf={"root": str(tmp_path), "dry_run": False})
    assert xcom(run, "retention")["kept"]["savepoints"] == 1
    assert (tmp_path / "orders" / "savepoints" / "only-one" / "_metadata").exists()


def test_refusals_fail_fast_with_clear_messages(tmp_path: Path, capfd):
    run = load_dag("refusals").test(run_conf={"root": str(tmp_path / "empty-root")})
    tries = {ti.task_id: (str(ti.state), ti.try_number) for ti in run.get_task_instances()}
    assert tries == {  # definitive: each failed at its first try, with two retries left unspent
        "restore_without_checkpoint": ("failed", 1),
        "missing_spark_connection": ("failed", 1),
        "bad_job_name": ("failed", 1),
    }, tries
    output = capfd.readouterr().out
    assert "has no checkpoint to restore from; set allow_fresh_start=True" in output
    assert "Spark connection 'no_such_spark' is not defined" in output
    assert "job name '../escape' is not allowed" in output
    assert not (tmp_path / "escape").exists()


def test_savepoint_operator_fails_clearly_without_a_job_or_in_time(tmp_path: Path, capfd):
    # "idle" has checkpoints but no run alive; "silent" looks alive (a fresh heartbeat) but never answers: the
    # savepoint must time out, not hang.
    write_checkpoint(JobFolder(str(tmp_path), "idle"), 1, [])
    ControlChannel(JobFolder(str(tmp_path), "silent")).heartbeat("run-1", None)
    run = load_dag("savepoint_refusals").test(run_conf={"root": str(tmp_path)})
    assert task_states(run) == {"no_running_job": "failed", "times_out": "failed"}
    output = capfd.readouterr().out
    assert "no running job 'idle'" in output
    assert "did not complete within 3s" in output


def test_a_timed_out_savepoint_request_is_withdrawn(tmp_path: Path, capfd):
    """The task gave up: a job slow to look must not take the savepoint (or stop for it) later."""
    silent = ControlChannel(JobFolder(str(tmp_path), "silent"))
    silent.heartbeat("run-1", None)  # alive, never answers
    run = load_dag("savepoint_timeout_in_seconds").test(run_conf={"root": str(tmp_path)})
    assert task_states(run) == {"times_out": "failed"}
    assert "the job never took the request on, and it is withdrawn" in capfd.readouterr().out
    assert silent.pending() == [], "no request left for the job to find later"


def test_a_savepoint_task_killed_while_it_waits_withdraws_its_request(tmp_path: Path):
    """Airflow calls on_kill when the task is killed (marked failed, SIGTERM): the request goes with it."""
    from airflow.sdk.exceptions import AirflowException

    from airflow_checkpoint_provider.operators import SavepointOperator

    silent = ControlChannel(JobFolder(str(tmp_path), "silent"))
    silent.heartbeat("run-1", None)  # alive, never answers
    operator = SavepointOperator(
        task_id="savepoint", job_name="silent", checkpoint_root=str(tmp_path), timeout="4s", poll_interval=0.1
    )
    ti = SimpleNamespace(dag_id="d", task_id="savepoint", run_id="manual__1", map_index=-1, try_number=1)
    outcome: list[BaseException] = []

    def wait() -> None:
        try:
            operator.execute({"ti": ti})
        except AirflowException as exc:
            outcome.append(exc)

    waiting = threading.Thread(target=wait)
    waiting.start()
    deadline = time.monotonic() + 10
    while not silent.pending() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert [r.trigger_id for r in silent.pending()] == ["d.savepoint.manual__1.try1"]
    operator.on_kill()
    assert silent.pending() == [], "the killed task's request is withdrawn"
    waiting.join()
    assert outcome and "did not complete within 4s" in str(outcome[0])


class Responder(threading.Thread):
    """Answers savepoint requests the way a running job does (heartbeat, then an answer in ``_control/``): a
    job that fails the first savepoint and completes the next, and one that refuses every target."""

    def __init__(self, root: Path):
        super().__init__(daemon=True)
        self.flaky = ControlChannel(JobFolder(str(root), "flaky"))
        self.picky = ControlChannel(JobFolder(str(root), "picky"))
        self.asked: list[str] = []
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            for control in (self.flaky, self.picky):
                control.heartbeat("run-1", None)
                for request in control.pending():
                    self.asked.append(request.trigger_id)
                    if control is self.picky:
                        answer = {"status": "rejected", "reason": "target_directory is inside another job"}
                    elif len([t for t in self.asked if t.startswith("savepoint_retries.second_try")]) == 1:
                        answer = {"status": "failed", "reason": "the upload failed", "run_id": "run-1"}
                    else:
                        answer = {"status": "completed", "savepoint_path": "/sp/1", "savepoint_id": 1, "batch_id": 4}
                    control.respond(request.trigger_id, answer)
            time.sleep(0.1)


def test_definitive_savepoint_failures_spend_no_retry_and_each_try_asks_anew(tmp_path: Path, capfd):
    responder = Responder(tmp_path)
    responder.start()
    try:
        run = load_dag("savepoint_retries").test(run_conf={"root": str(tmp_path)})
    finally:
        responder.done.set()
        responder.join()
    tries = {ti.task_id: (str(ti.state), ti.try_number) for ti in run.get_task_instances()}
    assert tries == {
        "no_such_job": ("failed", 1),  # nothing ever ran under that name: retrying cannot help
        "bad_timeout": ("failed", 1),
        "refused": ("failed", 1),  # the job refused the request itself
        "second_try": ("success", 2),  # the first savepoint failed in the job: the retry took a new one
    }, tries
    second = sorted(t for t in responder.asked if t.startswith("savepoint_retries.second_try"))
    assert len(second) == 2 and second[0] != second[1], second
    assert xcom(run, "second_try") == "/sp/1"
    output = capfd.readouterr().out
    assert "there is no job 'never' under" in output and "check job_name and checkpoint_root" in output
    assert "timeout: 'soon'" in output
    assert "rejected: target_directory is inside another job" in output


def test_every_duration_is_templated_from_params(tmp_path: Path, capfd):
    ControlChannel(JobFolder(str(tmp_path), "silent")).heartbeat("run-1", None)  # alive, never answers
    _populate(tmp_path)
    started = time.monotonic()
    run = load_dag("templated_durations").test(run_conf={"root": str(tmp_path), "wait": "3s", "grace": "2d"})
    assert task_states(run) == {"savepoint": "failed", "stop": "success", "retention": "success"}
    assert time.monotonic() - started >= 3
    output = capfd.readouterr().out
    assert "did not complete within 3s" in output, "the rendered timeout, not the param's default"


def test_a_savepoint_timeout_given_as_a_number_is_seconds(tmp_path: Path):
    ControlChannel(JobFolder(str(tmp_path), "silent")).heartbeat("run-1", None)  # alive, never answers
    started = time.monotonic()
    run = load_dag("savepoint_timeout_in_seconds").test(run_conf={"root": str(tmp_path)})
    assert task_states(run) == {"times_out": "failed"}
    assert time.monotonic() - started >= 3, "timeout=3 waited 3 seconds, not 3 milliseconds"


def test_every_example_dag_validates_its_params_with_their_defaults_and_documents_itself():
    for dag_id in ("scheduled_streaming", "restore_automation", "upgrade_with_savepoint", "rescale_with_savepoint"):
        dag = load_dag(dag_id)
        defaults = dag.params.validate()  # what a trigger with the form's defaults is checked against
        # The trigger form treats an empty string as missing: optional params default to None (type null).
        empty = [name for name, value in defaults.items() if value == ""]
        assert not empty, f"{dag_id}: params {empty} default to an empty string"
        assert dag.doc_md and dag.doc_md.strip().splitlines()[0], f"{dag_id} has no doc_md for the UI"
        untitled = [name for name in defaults if not dag.params.get_param(name).schema.get("title")]
        assert not untitled, f"{dag_id}: params {untitled} have no title for the form"
        unexplained = [name for name in defaults if len(dag.params.get_param(name).description or "") < 20]
        assert not unexplained, f"{dag_id}: params {unexplained} have no description a person understands"


def test_on_kill_returns_in_time_when_the_store_does_not_answer(tmp_path: Path, monkeypatch):
    """Airflow 3 sends SIGKILL about 5 s after SIGTERM. With a store that takes 8 s per request (a loopback
    S3 with that latency), spark-submit still gets SIGTERM at once and on_kill returns within
    ``ON_KILL_SECONDS``. A ``sleep`` process stands in for spark-submit: the real job's graceful stop through
    on_kill is ``tests/system/provider/test_jobs.py::test_killed_task_stops_the_job_gracefully_through_on_kill``."""
    import subprocess

    from airflow_checkpoint_provider.hooks.streaming_job import StreamingJobHook
    from airflow_checkpoint_provider.operators import CheckpointedStreamingJobOperator
    from airflow_checkpoint_provider.operators.streaming_job import ON_KILL_SECONDS
    from benchmarks.s3_requests import CountingS3Server

    server = CountingS3Server().start()
    connection = {
        "conn_type": "checkpoint_storage",
        "login": server.options["key"],
        "password": server.options["secret"],
        "extra": {"endpoint_url": server.options["client_kwargs"]["endpoint_url"], "region_name": "us-east-1"},
    }
    monkeypatch.setenv("AIRFLOW_CONN_SLOW_STORE", json.dumps(connection))
    operator = CheckpointedStreamingJobOperator(
        task_id="stream",
        job_name="orders",
        checkpoint_root="s3://checkpoints/root",
        storage_conn_id="slow_store",
        pipeline="examples.pipelines:running_counts",
    )
    spark_submit = subprocess.Popen(["sleep", "600"])
    hook = StreamingJobHook()
    hook._submit_hook = SimpleNamespace(_submit_sp=spark_submit)
    operator._job_hook, operator._run_key = hook, "stream-run"
    try:
        server.latency = 8.0
        started = time.monotonic()
        operator.on_kill()
        took = time.monotonic() - started
        assert took < ON_KILL_SECONDS + 0.5 < 5.0, f"on_kill took {took:.1f} s"
        assert spark_submit.wait(timeout=1) == -15, "SIGTERM reached spark-submit first"
        assert server.in_flight >= 1, "the stop request was still on its way to the store"
    finally:
        spark_submit.kill()
        server.latency = 0.0
        server.stop()
