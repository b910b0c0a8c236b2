"""What the sensors and triggers decide, without Airflow's database: the moment a sensor counts from, the
checkpoint trigger in an event loop, the commit watch's scan, over checkpoints written to real files. The sensors
under dag.test() are ``tests/integration/provider/test_sensors.py``."""

from __future__ import annotations

from pathlib import Path

import pytest

from spark_checkpoint_runtime.layout import JobFolder, now_ms
from tests.support.helpers import write_checkpoint


def test_completed_after_refuses_what_is_not_a_moment():
    from airflow.sdk.exceptions import AirflowException

    from airflow_checkpoint_provider.sensors.checkpoint import parse_instant_ms

    assert parse_instant_ms("2026-01-01 00:00:00+00:00") == parse_instant_ms("2026-01-01T00:00:00") == 1767225600000
    assert parse_instant_ms("") is None and parse_instant_ms(None) is None
    with pytest.raises(AirflowException, match="is not a date and time"):
        parse_instant_ms("yesterday")


def test_a_bad_argument_is_named_as_the_dag_author_wrote_it():
    from airflow.sdk.exceptions import AirflowFailException

    from airflow_checkpoint_provider.sensors import CheckpointSensor, RunningJobHealthSensor

    sensor = CheckpointSensor(task_id="confirm", job_name="orders", checkpoint_root="/ck", at_least="chk-3")
    with pytest.raises(AirflowFailException, match=r"^at_least 'chk-3' is not a checkpoint id"):
        sensor._newer_than()
    watch = RunningJobHealthSensor(
        task_id="watch", job_name="orders", checkpoint_root="/ck", started_after="yesterday", checkpoint_interval=30
    )
    with pytest.raises(AirflowFailException, match=r"^started_after 'yesterday' is not a date and time"):
        watch._started_after_ms()


def test_checkpoint_trigger_fires_only_for_a_checkpoint_completed_after_the_moment(tmp_path: Path):
    """The trigger as the triggerer runs it: in an event loop, storage read in threads, real files."""
    import asyncio

    from airflow_checkpoint_provider.triggers.checkpoint import CheckpointTrigger

    storage = JobFolder(str(tmp_path), "orders")
    write_checkpoint(storage, 3, [], completion_ms=now_ms() - 60_000)
    trigger = CheckpointTrigger(
        job_name="orders", checkpoint_root=str(tmp_path), completed_after_ms=now_ms() - 1000, poke_interval=0.2
    )
    _, kwargs = trigger.serialize()
    assert kwargs["completed_after_ms"] == trigger.completed_after_ms  # survives the trip to the triggerer

    async def first_event():
        events = trigger.run()
        waiting = asyncio.ensure_future(anext(events))
        await asyncio.sleep(1)
        assert not waiting.done(), "checkpoint 3 completed before the moment: it does not count"
        await asyncio.to_thread(write_checkpoint, storage, 4, [])
        return await asyncio.wait_for(waiting, 10)

    event = asyncio.run(first_event())
    assert event.payload["status"] == "success" and event.payload["checkpoint"]["checkpoint_id"] == 4


def test_commit_watch_passes_over_an_abandoned_checkpoint_and_waits_at_one_in_progress(tmp_path: Path):
    """``CheckpointCommitTrigger``'s scan: one event per commit, none lost behind a folder a crash left."""
    import pickle

    from airflow_checkpoint_provider.triggers.commits import new_commits
    from spark_checkpoint_runtime.layout import DamagedCheckpoint
    from tests.support.helpers import checkpoint_metadata

    storage = JobFolder(str(tmp_path), "orders")

    def complete(checkpoint_id: int, published: bool) -> None:
        meta = checkpoint_metadata(checkpoint_id, [], job="orders")
        if published:  # its completion published the output staged by its batch
            meta.staged_output = {"checkpoint_id": checkpoint_id, "run_id": "r1", "batches": [checkpoint_id * 10]}
        storage.checkpoints.write_metadata(meta)

    complete(1, True)
    complete(2, True)
    (tmp_path / "orders" / "chk-3").mkdir()  # a crashed run's folder, never completed
    complete(4, True)
    complete(5, False)  # a checkpoint that published nothing (no new rows)
    (tmp_path / "orders" / "chk-6").mkdir()  # in progress: nothing completed after it yet
    commits, seen = new_commits(storage, 1)
    assert seen == 5, "passed over chk-3 (chk-4 completed after it), stopped at chk-6"
    assert [(c["checkpoint_id"], c["batches"]) for c in commits] == [(2, [20]), (4, [40])]
    assert new_commits(storage, seen) == ([], 5), "nothing new: the same place"
    complete(6, True)
    assert [c["checkpoint_id"] for c in new_commits(storage, seen)[0]] == [6], "picked up once it completed"
    # The pages' reader process sends these across processes.
    damaged = pickle.loads(pickle.dumps(DamagedCheckpoint("chk-3", "no _metadata")))
    assert (damaged.location, damaged.reason) == ("chk-3", "no _metadata")
