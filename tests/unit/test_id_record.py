"""Ids come from a durable record and are never used twice; a stray folder cannot poison them (issue 28, holes 3
and 6). No Spark: a real coordinator snapshots a working folder laid out as Spark writes it."""

from __future__ import annotations

import logging
from pathlib import Path

from spark_checkpoint_runtime.layout import JobFolder, SavepointFolder
from spark_checkpoint_runtime.snapshot_targets import SavepointTarget
from tests.support.coordinator import running_coordinator, spark_like_working_folder
from tests.support.helpers import write_checkpoint


def test_a_savepoint_written_elsewhere_keeps_its_id_from_every_later_checkpoint(tmp_path: Path):
    storage = JobFolder(str(tmp_path / "root"), "j")
    working = spark_like_working_folder(tmp_path, batch=0)
    with running_coordinator(storage, working) as coordinator:
        taken = coordinator.savepoint_now(0, SavepointTarget(SavepointFolder(str(tmp_path / "elsewhere" / "sp"))))
    assert taken.result is not None, taken.reason
    # The next run restores from the latest checkpoint (older than the savepoint): its ids go past the savepoint's.
    assert storage.checkpoints.ids() == [taken.result.id - 1]
    assert storage.next_checkpoint_id() == taken.result.id + 1
    assert storage.ids.ids() == [taken.result.id - 1, taken.result.id]


def test_the_id_record_keeps_only_its_newest_records(tmp_path: Path):
    storage = JobFolder(str(tmp_path / "root"), "j")
    for snapshot_id in range(1, 26):
        assert storage.ids.reserve(snapshot_id, kind="checkpoint", run_id="r1")
    assert not storage.ids.reserve(25, kind="checkpoint", run_id="r2"), "a reserved id is never given twice"
    assert storage.ids.prune() == 15
    assert storage.ids.ids() == list(range(16, 26)) and storage.next_checkpoint_id() == 26


def test_a_stray_folder_far_above_every_id_is_reported_and_ignored(tmp_path: Path, caplog):
    storage = JobFolder(str(tmp_path / "root"), "j")
    write_checkpoint(storage, 1, ["state/0/0/1.delta"])
    (tmp_path / "root" / "j" / "chk-2").mkdir()  # what a killed attempt leaves: counted, never reused
    (tmp_path / "root" / "j" / f"chk-{2**62}").mkdir()  # a bad copy or a typo
    with caplog.at_level(logging.WARNING):
        assert storage.next_checkpoint_id() == 3
    assert f"ignoring chk-{2**62}" in caplog.text
    # With the id record, only what a run reserved counts.
    storage.ids.reserve(7, kind="checkpoint", run_id="r1")
    (tmp_path / "root" / "j" / "chk-9").mkdir()
    assert storage.next_checkpoint_id() == 8
