"""The job lease on real files, without Spark: exclusive claims, fail-fast, takeover, fencing."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from spark_checkpoint_runtime.errors import JobHeld, LeaseLost
from spark_checkpoint_runtime.layout import CheckpointStorage, ControlChannel, LeaseFiles, SnapshotExists, now_ms
from spark_checkpoint_runtime.lease import JobLease
from tests.conftest import checkpoint_metadata


def storage_at(tmp_path: Path) -> CheckpointStorage:
    return CheckpointStorage(str(tmp_path / "root"), "leased")


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


def test_a_silent_holder_on_another_host_is_taken_over_and_fenced(tmp_path: Path):
    storage = storage_at(tmp_path)
    files = LeaseFiles(storage)
    silent_since = now_ms() - 60_000
    grant = {"run_id": "zombie", "acquired_ms": silent_since, "host": "elsewhere", "pid": 1}
    assert files.create(1, grant)
    ControlChannel(storage)._write(ControlChannel(storage)._path("alive", "zombie"), {"updated_ms": silent_since})
    zombie = JobLease(storage, "zombie", None, timeout=30)
    zombie.epoch = 1  # what the zombie believes it still holds

    taker = JobLease(storage, "taker", None, timeout=30)
    assert taker.acquire() == 2
    with pytest.raises(LeaseLost, match="lost job 'leased' to run taker"):
        zombie.confirm("writing checkpoint 7")
    with pytest.raises(LeaseLost):
        zombie.check("staging batch 3")  # once lost, even the cheap check refuses
    taker.release()


def test_a_holder_whose_process_is_gone_is_taken_over_without_waiting(tmp_path: Path):
    import socket
    import subprocess

    storage = storage_at(tmp_path)
    killed = subprocess.Popen(["sleep", "60"])
    killed.kill()
    killed.wait()
    grant = {"run_id": "killed", "acquired_ms": now_ms(), "host": socket.gethostname(), "pid": killed.pid}
    assert LeaseFiles(storage).create(1, grant)
    lease = JobLease(storage, "next", None, timeout=300)
    assert lease.acquire() == 2
    lease.release()


def test_metadata_is_never_overwritten(tmp_path: Path):
    storage = storage_at(tmp_path)
    storage.write_checkpoint_metadata(checkpoint_metadata(3, [], job="leased"))
    second = checkpoint_metadata(3, [], job="leased")
    second.run_id = "other"
    with pytest.raises(SnapshotExists, match="written by run r1"):
        storage.write_checkpoint_metadata(second)
    on_disk = json.loads((tmp_path / "root" / "leased" / "chk-3" / "_metadata").read_text())
    assert on_disk["run_id"] == "r1"


def test_a_holder_whose_process_is_an_unreaped_zombie_counts_as_gone(tmp_path: Path):
    import socket
    import subprocess
    import time

    storage = storage_at(tmp_path)
    child = subprocess.Popen(["true"])
    time.sleep(0.5)  # exited but not waited for: a zombie, which os.kill(pid, 0) still finds
    grant = {"run_id": "killed", "acquired_ms": now_ms(), "host": socket.gethostname(), "pid": child.pid}
    assert LeaseFiles(storage).create(1, grant)
    lease = JobLease(storage, "next", None, timeout=300)
    assert lease.acquire() == 2
    lease.release()
    child.wait()


def test_a_zombie_cleaning_up_never_deletes_another_runs_checkpoint(tmp_path: Path):
    storage = storage_at(tmp_path)
    storage.write_checkpoint_metadata(checkpoint_metadata(5, [], job="leased"))  # completed by run r1
    storage.discard_own_checkpoint(5, "zombie-run")
    assert [m.id for m in storage.completed_checkpoints()] == [5]
    storage.discard_own_checkpoint(5, "r1")
    assert storage.completed_checkpoints() == []
