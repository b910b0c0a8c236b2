"""The triggers' shared polling loop (``StoragePollingTrigger``), run in asyncio as the triggerer runs them,
over real files: what each yields and when it stops, failures, and kwargs serialized before the base class
existed still building the same triggers."""

from __future__ import annotations

import asyncio
import importlib
import logging
from pathlib import Path
from typing import Any

import pytest

from spark_checkpoint_runtime.layout import CompletedCheckpoints, ControlChannel, JobFolder
from tests.support.helpers import checkpoint_metadata, write_checkpoint

# Kwargs as the triggers serialized them before they shared a base class (key order included).
SERIALIZED_BEFORE = {
    "airflow_checkpoint_provider.triggers.checkpoint.CheckpointTrigger": {
        "job_name": "j",
        "checkpoint_root": "/r",
        "newer_than": 3,
        "completed_after_ms": 1000,
        "storage_conn_id": "c",
        "poke_interval": 5.0,
    },
    "airflow_checkpoint_provider.triggers.commits.CheckpointCommitTrigger": {
        "job_name": "j",
        "checkpoint_root": "/r",
        "storage_conn_id": None,
        "poke_interval": 60.0,
    },
    "airflow_checkpoint_provider.triggers.health.RunningJobHealthTrigger": {
        "job_name": "j",
        "checkpoint_root": "/r",
        "started_after_ms": 1000,
        "epoch": 2,
        "window_s": 30.0,
        "start_timeout_s": 60.0,
        "storage_conn_id": None,
        "poke_interval": 5.0,
    },
    "airflow_checkpoint_provider.triggers.savepoint.SavepointTrigger": {
        "job_name": "j",
        "checkpoint_root": "/r",
        "trigger_id": "t",
        "timeout": 120.0,
        "storage_conn_id": None,
        "poll_interval": 2.0,
        "started": 1700000000.0,
    },
}


def _build(classpath: str, kwargs: dict[str, Any]):
    module, _, name = classpath.rpartition(".")
    return getattr(importlib.import_module(module), name)(**kwargs)


@pytest.mark.parametrize("classpath", sorted(SERIALIZED_BEFORE))
def test_a_trigger_serialized_before_the_base_class_builds_the_same_trigger(classpath: str):
    before = SERIALIZED_BEFORE[classpath]
    trigger = _build(classpath, before)
    assert trigger.serialize() == (classpath, before)
    assert _build(*trigger.serialize()).serialize() == (classpath, before)


def test_the_asset_watchers_trigger_keeps_its_identity():
    """The scheduler tells an ``AssetWatcher``'s trigger by a hash of its serialized kwargs, order included:
    the same watcher must not become a new trigger."""
    from airflow.triggers.base import BaseEventTrigger

    classpath = "airflow_checkpoint_provider.triggers.commits.CheckpointCommitTrigger"
    before = SERIALIZED_BEFORE[classpath]
    assert list(_build(classpath, before).serialize()[1]) == list(before)
    assert BaseEventTrigger.hash(*_build(classpath, before).serialize()) == BaseEventTrigger.hash(classpath, before)


async def _events(trigger, count: int, within: float = 10) -> list[dict[str, Any]]:
    """The payloads of the first ``count`` events, then the trigger is closed as the triggerer closes it."""
    found: list[dict[str, Any]] = []
    events = trigger.run()
    try:
        while len(found) < count:
            found.append((await asyncio.wait_for(anext(events), within)).payload)
    finally:
        await events.aclose()
    return found


async def _ended(trigger, within: float = 10) -> list[dict[str, Any]]:
    """Every payload of a trigger that ends by itself."""

    async def every() -> list[dict[str, Any]]:
        return [event.payload async for event in trigger.run()]

    return await asyncio.wait_for(every(), within)


def test_a_wait_ends_at_its_first_event(tmp_path: Path):
    from airflow_checkpoint_provider.triggers import CheckpointTrigger

    storage = JobFolder(str(tmp_path), "orders")
    write_checkpoint(storage, 2, [])
    write_checkpoint(storage, 3, [])
    trigger = CheckpointTrigger(job_name="orders", checkpoint_root=str(tmp_path), newer_than=1, poke_interval=0.05)
    [event] = asyncio.run(_ended(trigger))
    assert event["status"] == "success" and event["checkpoint"]["checkpoint_id"] == 3


def test_a_failed_look_ends_a_wait_with_an_error_event(tmp_path: Path, monkeypatch):
    from airflow_checkpoint_provider.triggers import CheckpointTrigger, SavepointTrigger, checkpoint

    def broken(*args):
        raise PermissionError("access denied")

    monkeypatch.setattr(checkpoint, "find_completed_checkpoint", broken)
    monkeypatch.setattr(ControlChannel, "response", broken)
    looking = CheckpointTrigger(job_name="orders", checkpoint_root=str(tmp_path), poke_interval=0.05)
    assert asyncio.run(_ended(looking)) == [{"status": "error", "message": "PermissionError: access denied"}]
    waiting = SavepointTrigger(
        job_name="orders", checkpoint_root=str(tmp_path), trigger_id="t", timeout=60, poll_interval=0.05
    )
    assert asyncio.run(_ended(waiting)) == [{"status": "error", "reason": "PermissionError: access denied"}]


def test_a_savepoint_wait_yields_the_answer_or_times_out(tmp_path: Path):
    from airflow_checkpoint_provider.triggers import SavepointTrigger

    storage = JobFolder(str(tmp_path), "orders")
    control = ControlChannel(storage)
    control.respond("sp-1", {"status": "accepted"})  # not an answer yet: the wait goes on, then times out

    def waiting(trigger_id: str, timeout: float) -> SavepointTrigger:
        return SavepointTrigger(
            job_name="orders", checkpoint_root=str(tmp_path), trigger_id=trigger_id, timeout=timeout, poll_interval=0.05
        )

    [timed_out] = asyncio.run(_ended(waiting("sp-1", 0.3)))
    assert timed_out == {"status": "timeout", "last_answer": {"status": "accepted"}}
    control.respond("sp-2", {"status": "completed", "savepoint_path": "sp"})
    rebuilt = waiting("sp-2", 60)
    rebuilt.trigger_id = 2  # what the triggerer sets on every trigger it runs: its row id
    assert asyncio.run(_ended(rebuilt)) == [{"status": "completed", "savepoint_path": "sp"}]
    assert rebuilt.serialize()[1]["trigger_id"] == "sp-2"


def test_a_killed_savepoint_wait_withdraws_its_request(tmp_path: Path):
    """``on_kill`` (a person marked the deferred task failed or succeeded, or cleared it): the unanswered
    request goes; one the job already answered stays, with its answer."""
    from airflow_checkpoint_provider.triggers import SavepointTrigger

    control = ControlChannel(JobFolder(str(tmp_path), "orders"))
    control.request("waiting", "savepoint")
    control.request("taken", "savepoint")
    control.respond("taken", {"status": "in_progress"})
    for request_id in ("waiting", "taken"):
        trigger = SavepointTrigger(job_name="orders", checkpoint_root=str(tmp_path), trigger_id=request_id, timeout=60)
        trigger.trigger_id = 5
        asyncio.run(trigger.on_kill())
    assert [r.trigger_id for r in control.pending()] == [] and control.response("taken") is not None
    assert (tmp_path / "orders" / "_control" / "requests" / "taken.json").exists()
    assert not (tmp_path / "orders" / "_control" / "requests" / "waiting.json").exists()


def test_the_health_watch_keeps_judging_the_run_it_found_first(tmp_path: Path, monkeypatch):
    from airflow_checkpoint_provider.triggers import health

    asked: list[int | None] = []
    answers = iter([health.RunHealth("running", "", {"epoch": 4}), health.RunHealth("ended", "done", {"epoch": 4})])

    def judge(storage, started_after_ms, window_s, now_s, epoch=None, start_timeout_s=None):
        asked.append(epoch)
        return next(answers)

    monkeypatch.setattr(health, "judge_running_job", judge)
    trigger = health.RunningJobHealthTrigger(
        job_name="j",
        checkpoint_root=str(tmp_path),
        started_after_ms=0,
        window_s=30,
        start_timeout_s=60,
        poke_interval=0.05,
    )
    assert asyncio.run(_ended(trigger)) == [{"epoch": 4, "status": "ended", "message": "done"}]
    assert asked == [None, 4], "the epoch learnt at the first look is the one judged after"
    assert trigger.serialize()[1]["epoch"] is None, "what the trigger was built with is what it serializes"


def _commit(storage: JobFolder, checkpoint_id: int) -> None:
    meta = checkpoint_metadata(checkpoint_id, [], job=storage.job_name)
    meta.staged_output = {"checkpoint_id": checkpoint_id, "run_id": "r1", "batches": [checkpoint_id * 10]}
    storage.checkpoints.write_metadata(meta)


def test_the_commit_watch_yields_every_new_commit_and_rides_out_a_failed_look(
    tmp_path: Path, monkeypatch, caplog, capsys
):
    from airflow_checkpoint_provider.triggers import CheckpointCommitTrigger, commits

    storage = JobFolder(str(tmp_path), "orders")
    _commit(storage, 1)  # before the watch: not an event
    looks = {"count": 0}
    scan = commits.new_commits

    def flaky(storage: JobFolder, after: int):
        looks["count"] += 1
        if looks["count"] == 2:
            raise ConnectionError("throttled")
        if looks["count"] == 3:  # after the failed look: both arrive, none lost
            _commit(storage, 2)
            _commit(storage, 3)
        return scan(storage, after)

    monkeypatch.setattr(commits, "new_commits", flaky)
    trigger = CheckpointCommitTrigger(job_name="orders", checkpoint_root=str(tmp_path), poke_interval=0.05)
    with caplog.at_level(logging.ERROR):
        found = asyncio.run(_events(trigger, 2))
    assert [(c["checkpoint_id"], c["batches"]) for c in found] == [(2, [20]), (3, [30])]
    logged = caplog.text + capsys.readouterr().out  # Airflow's structlog may write to stdout
    assert "could not look for new commits of job 'orders'; trying again" in logged
    assert "ConnectionError: throttled" in logged


def test_the_commit_watch_raises_when_it_cannot_start(tmp_path: Path, monkeypatch):
    """An error event would be an Asset event (a DAG run): a watch that cannot start fails in the triggerer."""
    from airflow_checkpoint_provider.triggers import CheckpointCommitTrigger

    def unreadable(self):
        raise PermissionError("access denied")

    monkeypatch.setattr(CompletedCheckpoints, "newest_metadata_id", unreadable)
    trigger = CheckpointCommitTrigger(job_name="orders", checkpoint_root=str(tmp_path), poke_interval=0.05)
    with pytest.raises(PermissionError, match="access denied"):
        asyncio.run(_events(trigger, 1))


async def _pairs(stream, count: int, within: float = 10) -> list[tuple[dict[str, Any], int]]:
    found = []
    events = stream.open_stream()
    try:
        while len(found) < count:
            found.append(await asyncio.wait_for(anext(events), within))
    finally:
        await events.aclose()
    return found


def test_the_commit_stream_resumes_after_the_events_airflow_stored(tmp_path: Path):
    """Ack mode: the cursor moves only in ``advance`` (Airflow stored the events); a new stream, as after a
    triggerer restart, sends every commit past the cursor, those made while no stream ran included."""
    from airflow.triggers.shared_stream import AdvanceItem, AdvanceOutcome

    from airflow_checkpoint_provider.triggers import CheckpointCommitTrigger

    storage = JobFolder(str(tmp_path), "orders")
    channel = ControlChannel(storage)
    _commit(storage, 1)  # before the first watch: not an event

    def stream():
        trigger = CheckpointCommitTrigger(job_name="orders", checkpoint_root=str(tmp_path), poke_interval=0.05)
        return trigger.create_shared_stream_producer(trigger.serialize()[1])

    first = stream()

    async def first_event():
        events = first.open_stream()
        pending = asyncio.ensure_future(anext(events))
        while channel.cursor("airflow") is None:  # the stream keeps its start before its first look
            await asyncio.sleep(0.01)
        _commit(storage, 2)
        try:
            return await asyncio.wait_for(pending, 10)
        finally:
            await events.aclose()

    two, two_id = asyncio.run(first_event())
    assert (two["checkpoint_id"], two_id) == (2, 2)
    assert channel.cursor("airflow") == 1, "not stored yet: the cursor stays"
    asyncio.run(first.advance([AdvanceItem(2, AdvanceOutcome(acked=1, failed=0))]))
    assert channel.cursor("airflow") == 2
    _commit(storage, 3)
    _commit(storage, 4)  # made while no stream ran
    second = stream()
    found = asyncio.run(_pairs(second, 2))
    assert [payload["checkpoint_id"] for payload, _ in found] == [3, 4]
    with pytest.raises(RuntimeError, match="checkpoint 4 of job 'orders' was not stored"):
        asyncio.run(
            second.advance(
                [AdvanceItem(3, AdvanceOutcome(acked=1, failed=0)), AdvanceItem(4, AdvanceOutcome(acked=0, failed=1))]
            )
        )
    assert channel.cursor("airflow") == 3, "the stored prefix moves the cursor, the failed event is sent again"
    assert [p["checkpoint_id"] for p, _ in asyncio.run(_pairs(stream(), 1))] == [4]


def test_a_commit_watch_keeps_its_identity_and_names_its_cursor(tmp_path: Path):
    from airflow_checkpoint_provider.triggers import CheckpointCommitTrigger
    from spark_checkpoint_runtime.layout import CheckpointFormatError

    default = CheckpointCommitTrigger(job_name="j", checkpoint_root="/r")
    assert "cursor" not in default.serialize()[1], "a watcher declared before cursors keeps its hash"
    assert default.shared_stream_key() is not None
    named = CheckpointCommitTrigger(job_name="j", checkpoint_root="/r", cursor="prod-eu")
    assert _build(*named.serialize()).cursor == "prod-eu"
    assert CheckpointCommitTrigger(job_name="j", checkpoint_root="/r", cursor=None).shared_stream_key() is None
    with pytest.raises(CheckpointFormatError, match="cursor '../x' is not allowed"):
        CheckpointCommitTrigger(job_name="j", checkpoint_root="/r", cursor="../x")
    storage = JobFolder(str(tmp_path), "orders")
    ControlChannel(storage).commit_cursor("airflow", 3)
    path = tmp_path / "orders" / "_control" / "cursors" / "airflow.json"
    path.write_text('{"checkpoint_id": "three"}')
    with pytest.raises(CheckpointFormatError, match="airflow.json: checkpoint_id must be an integer.*delete it"):
        ControlChannel(storage).cursor("airflow")
