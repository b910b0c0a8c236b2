"""The job lease on real files, without Spark: exclusive claims, fail-fast, takeover, fencing."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import pytest

from spark_checkpoint_runtime.errors import JobHeld, LeaseLost
from spark_checkpoint_runtime.layout import ControlChannel, JobFolder, LeaseFiles, SnapshotExists, now_ms
from spark_checkpoint_runtime.lease import JobLease
from tests.support.helpers import checkpoint_metadata


def storage_at(tmp_path: Path) -> JobFolder:
    return JobFolder(str(tmp_path / "root"), "leased")


def test_of_runs_racing_for_one_job_exactly_one_wins(tmp_path: Path):
    storage = storage_at(tmp_path)
    leases = [JobLease(storage, f"run-{n}", None, timeout=30) for n in range(8)]
    outcomes: dict[str, str] = {}
    start = threading.Barrier(len(leases))

    def claim(lease: JobLease) -> None:
        start.wait()
        try:
            lease.acquire()
            outcomes[lease.run_id] = "holds"
        except JobHeld as exc:
            outcomes[lease.run_id] = str(exc)

    threads = [threading.Thread(target=claim, args=(lease,)) for lease in leases]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    holders = [run for run, outcome in outcomes.items() if outcome == "holds"]
    assert len(holders) == 1, outcomes
    for run, outcome in outcomes.items():
        if run != holders[0]:
            assert holders[0] in outcome, "the refusal names the run that holds the job"
    for lease in leases:
        lease.release()


def test_a_live_holder_is_named_and_a_released_job_is_free_at_once(tmp_path: Path):
    storage = storage_at(tmp_path)
    first = JobLease(storage, "first", "dag.task.try1", timeout=30)
    first.acquire()
    with pytest.raises(JobHeld, match=r"held by run first \(lease epoch 1, run key dag.task.try1"):
        JobLease(storage, "second", None, timeout=30).ensure_free()
    first.release()
    second = JobLease(storage, "second", None, timeout=30)
    assert second.acquire() == 2
    second.release()


def _grant(storage, epoch: int, run_id: str, *, silent_for: float, **grant) -> None:
    """A grant and heartbeat of ``run_id`` last written ``silent_for`` seconds ago, by the store's clock."""
    files, control = LeaseFiles(storage), ControlChannel(storage)
    assert files.create(epoch, {"run_id": run_id, "acquired_ms": now_ms(), "host": "elsewhere", "pid": 1, **grant})
    control.heartbeat(run_id, None)
    then = time.time() - silent_for
    for path in (files._path(epoch, "json"), control._path("alive", run_id)):
        os.utime(path, (then, then))


def test_a_silent_holder_on_another_host_is_taken_over_and_fenced(tmp_path: Path):
    storage = storage_at(tmp_path)
    _grant(storage, 1, "zombie", silent_for=60)
    zombie = JobLease(storage, "zombie", None, timeout=30)
    zombie.epoch = 1  # what the zombie believes it still holds

    taker = JobLease(storage, "taker", None, timeout=30)
    taker.ensure_free()
    assert taker.acquire() == 2
    with pytest.raises(LeaseLost, match="lost job 'leased' to run taker"):
        zombie.confirm("writing checkpoint 7")
    with pytest.raises(LeaseLost):
        zombie.check("staging batch 3")  # once lost, even the cheap check refuses
    taker.release()


def test_a_holder_that_just_died_is_waited_out_not_refused(tmp_path: Path):
    """Killed a moment ago (no release, no renewal): the next run waits until the timeout, then takes over."""
    storage = storage_at(tmp_path)
    _grant(storage, 1, "killed", silent_for=0.5)
    lease = JobLease(storage, "next", None, timeout=2)
    started = time.monotonic()
    lease.ensure_free()
    assert 1.0 < time.monotonic() - started < 4.0
    assert lease.acquire() == 2
    lease.release()


def test_a_holder_that_renews_while_watched_is_refused_within_a_renewal(tmp_path: Path):
    storage = storage_at(tmp_path)
    holder = JobLease(storage, "holder", "dag.task.try1", timeout=2)  # renews every 0.5 s
    holder.acquire()
    started = time.monotonic()
    with pytest.raises(JobHeld, match="held by run holder"):
        JobLease(storage, "second", None, timeout=2).ensure_free()
    assert time.monotonic() - started < 2.0
    holder.release()


def test_liveness_never_looks_up_a_pid_or_trusts_a_writers_clock(tmp_path: Path):
    """A grant naming this host and a pid that does not exist, and a heartbeat whose own timestamp says a day
    ago: both were written just now by the store's clock, so the holder is alive until it falls silent."""
    import socket
    import subprocess

    storage = storage_at(tmp_path)
    gone = subprocess.Popen(["true"])
    gone.wait()
    assert LeaseFiles(storage).create(
        1, {"run_id": "r", "acquired_ms": 0, "host": socket.gethostname(), "pid": gone.pid}
    )
    control = ControlChannel(storage)
    control._write(control._path("alive", "r"), {"run_id": "r", "updated_ms": now_ms() - 86_400_000})
    lease = JobLease(storage, "next", None, timeout=30)
    with pytest.raises(JobHeld):
        lease.acquire()


def test_metadata_is_never_overwritten(tmp_path: Path):
    storage = storage_at(tmp_path)
    storage.checkpoints.write_metadata(checkpoint_metadata(3, [], job="leased"))
    second = checkpoint_metadata(3, [], job="leased")
    second.run_id = "other"
    with pytest.raises(SnapshotExists, match="written by run r1"):
        storage.checkpoints.write_metadata(second)
    on_disk = json.loads((tmp_path / "root" / "leased" / "chk-3" / "_metadata").read_text())
    assert on_disk["run_id"] == "r1"


def test_a_zombie_cleaning_up_never_deletes_another_runs_checkpoint(tmp_path: Path):
    storage = storage_at(tmp_path)
    storage.checkpoints.write_metadata(checkpoint_metadata(5, [], job="leased"))  # completed by run r1
    storage.checkpoints.discard_own(5, "zombie-run")
    assert [m.id for m in storage.checkpoints.completed()] == [5]
    storage.checkpoints.discard_own(5, "r1")
    assert storage.checkpoints.completed() == []
