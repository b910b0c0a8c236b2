"""A requested snapshot captures the newest batch it may, since Spark keeps a short history while the query runs.

A run cuts Spark's history in the working folder to 10 batches (``spark.sql.streaming.minBatchesToRetain``).
A savepoint request names the newest batch when it arrives, but its checkpoint and savepoint may wait behind an
upload while the query runs on and Spark purges that batch. A real coordinator over a working folder laid out
as Spark writes it (no Spark needed): the checkpoint takes the newest batch, the savepoint the batch that
checkpoint covered, and a batch that is really gone is refused naming the conf.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from spark_checkpoint_runtime.layout import JobFolder, SavepointFolder
from spark_checkpoint_runtime.snapshot_targets import SavepointTarget
from spark_checkpoint_runtime.state_files import CaptureError
from spark_checkpoint_runtime.state_files.selection import select_files
from tests.support.coordinator import (
    local_coordinator,
    purge_history_before,
    running_coordinator,
    spark_like_working_folder,
)


def test_a_savepoint_asked_for_a_batch_spark_has_since_purged_takes_the_newest_batch(tmp_path: Path):
    storage = JobFolder(str(tmp_path / "root"), "j")
    working = spark_like_working_folder(tmp_path, batch=12)
    purge_history_before(tmp_path, 3)  # the request named batch 2; the query ran on to batch 12 meanwhile
    with running_coordinator(storage, working) as coordinator:
        coordinator.batch_completed(12)
        taken = coordinator.savepoint_now(2, SavepointTarget(SavepointFolder(str(tmp_path / "sp"))))
    assert taken.result is not None, taken.reason
    assert taken.result.batch_id == 12
    [checkpoint] = storage.checkpoints.completed()
    assert checkpoint.batch_id == 12, "the checkpoint before the savepoint covers what the savepoint holds"
    assert SavepointFolder(str(tmp_path / "sp")).read_metadata().batch_id == 12


def test_a_checkpoint_asked_for_a_batch_spark_has_since_purged_takes_the_newest_batch(tmp_path: Path):
    storage = JobFolder(str(tmp_path / "root"), "j")
    working = spark_like_working_folder(tmp_path, batch=12)
    purge_history_before(tmp_path, 3)  # the request named batch 2; the query ran on to batch 12 meanwhile
    coordinator = local_coordinator(storage, working)
    coordinator.batch_completed(12)
    coordinator.decider.triggered(coordinator.clock())  # no periodic checkpoint for an hour: only the request
    coordinator.start()
    try:
        taken = coordinator.checkpoint_now(2)
    finally:
        coordinator.shutdown()
    assert taken is not None and taken.batch_id == 12, "a checkpoint may cover more than was asked for"
    assert [c.batch_id for c in storage.checkpoints.completed()] == [12]


def test_a_batch_gone_from_the_working_folder_is_refused_naming_the_conf(tmp_path: Path):
    working = spark_like_working_folder(tmp_path, batch=12)
    purge_history_before(tmp_path, 3)
    with pytest.raises(CaptureError, match="no longer in Spark's working folder.*minBatchesToRetain"):
        select_files(working.listing(), 2, frozenset(), working.read_bytes, 2)
    with pytest.raises(CaptureError, match="batch 13 is not complete"):
        select_files(working.listing(), 13, frozenset(), working.read_bytes, 2)
