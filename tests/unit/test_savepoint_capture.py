"""A savepoint's files are frozen together with the checkpoint taken just before it, so its batch cannot be purged
by Spark while that checkpoint uploads (a run keeps 10 batches of Spark's history).

A real coordinator over a working folder laid out as Spark writes it (no Spark needed). A fence, asked before
every write of the upload as a run's lease is, plays the query running on: when the upload first asks it, the
query reaches batch 25 and Spark purges its history before batch 16.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from spark_checkpoint_runtime.coordinator import CheckpointCoordinator
from spark_checkpoint_runtime.layout import JobFolder, SavepointFolder
from spark_checkpoint_runtime.snapshot_targets import SavepointTarget
from spark_checkpoint_runtime.working_copy import WorkingCopy
from tests.support.coordinator import local_coordinator, purge_history_before, spark_like_working_folder


class _RunsOnDuringTheUpload:
    """The query runs on to batch 25, and Spark purges before 16, when the first upload asks the fence; the
    upload may also be held until ``go`` is set."""

    def __init__(self, tmp_path: Path, hold: bool = False):
        self.tmp_path, self.coordinator = tmp_path, None
        self.uploading, self.go = threading.Event(), threading.Event()
        if not hold:
            self.go.set()

    def confirm(self, action: str) -> None:
        return None

    def check(self, action: str) -> None:
        if action.startswith("uploading checkpoint") and not self.uploading.is_set():
            self.uploading.set()
            self.go.wait(30)
            spark_like_working_folder(self.tmp_path, batch=25)
            purge_history_before(self.tmp_path, 16)
            self.coordinator.batch_completed(25)


def _coordinator(tmp_path: Path, fence: _RunsOnDuringTheUpload) -> tuple[CheckpointCoordinator, JobFolder, WorkingCopy]:
    storage = JobFolder(str(tmp_path / "root"), "j")
    working = spark_like_working_folder(tmp_path, batch=12)
    coordinator = fence.coordinator = local_coordinator(storage, working, fence=fence)
    coordinator.batch_completed(12)
    return coordinator, storage, working


def _savepoint(coordinator: CheckpointCoordinator, tmp_path: Path, timeout: float | None = None):
    return coordinator.savepoint_now(12, SavepointTarget(SavepointFolder(str(tmp_path / "sp"))), timeout)


def _frozen(working: WorkingCopy) -> list[str]:
    frozen = Path(working.frozen_path)
    return sorted(p.name for p in frozen.iterdir()) if frozen.exists() else []


@pytest.mark.parametrize("freeze_seconds", [0, 0.3], ids=["quick-freeze", "slow-freeze"])
def test_a_savepoint_is_frozen_with_its_checkpoint_so_a_long_upload_cannot_lose_its_batch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, freeze_seconds: float
):
    """Frozen before the checkpoint's upload starts: a freeze that takes a while (a large state, a remote
    working folder) still finds the batch, though the query runs on as soon as the upload does."""
    fence = _RunsOnDuringTheUpload(tmp_path)
    coordinator, storage, working = _coordinator(tmp_path, fence)
    _patch_early_freeze(monkeypatch, _slow(freeze_seconds))
    coordinator.decider.triggered(coordinator.clock())  # no periodic checkpoint: the savepoint's comes first
    coordinator.start()
    try:
        taken = _savepoint(coordinator, tmp_path)
    finally:
        coordinator.shutdown()
    assert fence.uploading.is_set(), "the query ran on while the checkpoint uploaded"
    assert taken.result is not None, taken.reason
    assert SavepointFolder(str(tmp_path / "sp")).read_metadata().batch_id == 12
    assert [c.batch_id for c in storage.checkpoints.completed()] == [12]
    assert _frozen(working) == [], "every frozen capture is released"


def test_a_savepoint_asked_while_a_checkpoint_of_its_batch_uploads_takes_the_batch_the_query_reached(
    tmp_path: Path,
):
    fence = _RunsOnDuringTheUpload(tmp_path, hold=True)
    coordinator, storage, working = _coordinator(tmp_path, fence)
    coordinator.start()  # its first periodic checkpoint takes batch 12 at once, and its upload waits for go
    try:
        assert fence.uploading.wait(10)
        result: list = []
        asking = threading.Thread(target=lambda: result.append(_savepoint(coordinator, tmp_path)))
        asking.start()
        time.sleep(0.3)  # the request waits behind the upload (served after it either way)
        fence.go.set()
        asking.join(30)
    finally:
        coordinator.shutdown()
    [taken] = result
    assert taken.result is not None, taken.reason
    assert [c.batch_id for c in storage.checkpoints.completed()] == [12, 25]
    assert SavepointFolder(str(tmp_path / "sp")).read_metadata().batch_id == 25
    assert _frozen(working) == []


def _savepoint_whose_freeze(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, freeze_early, timeout=None):
    """A savepoint of batch 12 taken alone (no periodic checkpoint, the query not running on), its early freeze
    done by ``freeze_early(freeze)``, where ``freeze()`` is the real one; returns the request and working copy."""
    fence = _RunsOnDuringTheUpload(tmp_path)
    fence.uploading.set()  # the query does not run on here
    coordinator, _, working = _coordinator(tmp_path, fence)
    _patch_early_freeze(monkeypatch, freeze_early)
    coordinator.decider.triggered(coordinator.clock())
    coordinator.start()
    try:
        return _savepoint(coordinator, tmp_path, timeout), working
    finally:
        coordinator.shutdown()  # waits for the coordinator thread, so for the early freeze


def _patch_early_freeze(monkeypatch: pytest.MonkeyPatch, freeze_early) -> None:
    """Every savepoint's early freeze done by ``freeze_early(freeze)``, where ``freeze()`` is the real one."""
    real = WorkingCopy.freeze

    def freeze(self, name, sizes):
        if name.startswith("savepoint-"):
            return freeze_early(lambda: real(self, name, sizes))
        return real(self, name, sizes)

    monkeypatch.setattr(WorkingCopy, "freeze", freeze)


def _slow(seconds: float):
    def freeze_early(freeze):
        time.sleep(seconds)  # a large state copied on a remote working filesystem
        return freeze()

    return freeze_early


def test_a_savepoint_whose_early_freeze_fails_is_captured_at_its_turn_and_leaves_nothing_frozen(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    def disk_full(freeze):
        freeze()  # linked, then the disk fills up
        raise OSError(28, "No space left on device")

    taken, working = _savepoint_whose_freeze(tmp_path, monkeypatch, disk_full)
    assert taken.result is not None and taken.result.batch_id == 12, taken.reason
    assert _frozen(working) == []


def test_a_savepoint_whose_caller_stopped_waiting_leaves_nothing_frozen(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    taken, working = _savepoint_whose_freeze(tmp_path, monkeypatch, _slow(1.0), timeout=0.3)
    assert taken.result is None
    assert _frozen(working) == [], "the savepoint frozen for a caller gone is released"


def test_a_savepoint_frozen_ahead_records_that_freeze_as_its_capture_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    taken, _ = _savepoint_whose_freeze(tmp_path, monkeypatch, _slow(0.3))
    assert taken.result is not None, taken.reason
    durations = SavepointFolder(str(tmp_path / "sp")).read_metadata().durations_ms  # readable: no negative field
    assert durations["capture"] >= 300 and durations["upload"] >= 0
    assert durations["total"] == durations["capture"] + durations["upload"]
