"""Hostile or damaged state never crashes a reader: every file of ``tests/unit/hostile/`` in every place, every reader.

Each reader must treat the file as damaged (or the request as rejected), say why in one line, and carry on
with the rest: restore falls back to the valid checkpoint beside it, sensors see that one, retention and the
admin commands finish, the lease treats a damaged grant's holder as unknown.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

from spark_checkpoint_runtime import admin
from spark_checkpoint_runtime.layout import (
    MAX_METADATA_BYTES,
    CheckpointFormatError,
    ControlChannel,
    JobFolder,
    LeaseFiles,
    SavepointFolder,
    find_completed_checkpoint,
)
from spark_checkpoint_runtime.lease import JobLease
from spark_checkpoint_runtime.restore import resolve_restore_point
from spark_checkpoint_runtime.retention import plan_job_retention, subsume
from tests.support.helpers import write_checkpoint

CORPUS = Path(__file__).parent / "hostile"
OVERSIZE = "oversize (made by the test)"
CASES = sorted(p.name for p in CORPUS.iterdir() if p.suffix == ".json") + [OVERSIZE]


def _place(case: str, destination: Path) -> None:
    destination.parent.mkdir(parents=True, exist_ok=True)
    if case == OVERSIZE:
        with open(destination, "wb") as handle:  # sparse: 200 MB on paper, nothing on disk
            handle.truncate(200 * 1024 * 1024)
    else:
        shutil.copyfile(CORPUS / case, destination)


def _one_line(exc: BaseException) -> str:
    text = str(exc)
    assert text and "\n" not in text, f"not one line: {text!r}"
    assert len(text) < 2000, "a reason, not a dump"
    return text


@pytest.fixture
def job(tmp_path: Path) -> JobFolder:
    """A job with one valid checkpoint (chk-1) beside which the hostile files go."""
    storage = JobFolder(str(tmp_path / "root"), "j")
    write_checkpoint(storage, 1, ["state"])
    return storage


def test_the_corpus_has_the_cases_the_format_must_survive():
    assert {"infinity-batch-id.json", "deep-nesting.json", "wrong-types.json", "huge-integer.json"} <= set(CASES)


@pytest.mark.parametrize("case", CASES)
def test_a_hostile_metadata_is_skipped_by_every_reader(job: JobFolder, case: str, caplog, capsys):
    _place(case, Path(job.checkpoints.path(2)) / "_metadata")
    # restore from latest, the sensors' and triggers' condition: the valid chk-1 is used
    assert resolve_restore_point(job, "latest").metadata.id == 1
    assert job.checkpoints.latest_valid().metadata.id == 1
    assert find_completed_checkpoint(job)["checkpoint_id"] == 1
    skipped = [r.getMessage() for r in caplog.records if "skipping damaged checkpoint chk-2" in r.getMessage()]
    assert skipped and all("\n" not in line for line in skipped)
    with pytest.raises(CheckpointFormatError) as refused:
        job.resolve_snapshot(job.checkpoints.path(2))
    _one_line(refused.value)
    # ids keep growing past it; retention plans and runs
    assert job.next_checkpoint_id() == 3
    plan_job_retention(job, num_retained=1, now=time.time())
    # the admin commands finish, the damaged one reported in one line
    args = ["--job-name", "j", "--checkpoint-root", str(Path(job.root_path))]
    assert admin.main(["list", *args]) == 0
    assert admin.main(["inspect", *args, "--checkpoint-id", "2"]) != 0
    error = capsys.readouterr().err.strip()
    assert error.startswith("error: ") and "\n" not in error
    subsume(job, 1, 2)
    assert job.checkpoints.latest_valid().metadata.id == 1, "retention never deletes the last valid checkpoint"


@pytest.mark.parametrize("case", CASES)
def test_a_hostile_savepoint_is_refused_in_one_line(job: JobFolder, case: str):
    folder = Path(job.savepoints.base) / "savepoint-x"
    _place(case, folder / "_metadata")
    assert job.next_checkpoint_id() == 2
    with pytest.raises(CheckpointFormatError) as refused:
        SavepointFolder(str(folder)).validate()
    _one_line(refused.value)
    plan_job_retention(job, num_retained=1, now=time.time())


@pytest.mark.parametrize("case", CASES)
def test_hostile_control_files_are_rejected_or_ignored(job: JobFolder, case: str):
    control = ControlChannel(job)
    base = Path(control.base)
    _place(case, base / "requests" / "t1.json")
    control.request("t2", "stop")
    pending = control.pending()
    assert [p if isinstance(p, tuple) else p.trigger_id for p in pending][1] == "t2", "the rest still answered"
    trigger_id, reason = pending[0]
    assert trigger_id == "t1" and "\n" not in reason
    for kind, read in (("responses", control.response), ("runs", control.run_report)):
        _place(case, base / kind / "t1.json")
        try:
            answer = read("t1")
        except CheckpointFormatError as refused:
            _one_line(refused)
        else:  # a well-formed object with other fields: the caller reads only the fields it knows
            assert isinstance(answer, dict)
    _place(case, base / "alive" / "r1.json")
    assert control.live_runs() == []


@pytest.mark.parametrize("case", CASES)
def test_a_hostile_lease_grant_counts_as_an_unknown_holder_judged_by_its_time(job: JobFolder, case: str):
    files = LeaseFiles(job)
    grant = Path(files.base) / "000000000001.json"
    _place(case, grant)
    assert files.read(1) is None
    # A damaged grant still counts by its file's time (its holder may be alive): silent past the timeout,
    # it is taken over like any other.
    long_ago = time.time() - 60
    os.utime(grant, (long_ago, long_ago))
    lease = JobLease(job, "r2", None, 30.0)
    lease.ensure_free()  # no crash
    assert lease.acquire() == 2
    lease.release()


def test_an_oversized_file_is_refused_without_being_read_whole(job: JobFolder, monkeypatch):
    path = Path(job.checkpoints.path(2)) / "_metadata"
    _place(OVERSIZE, path)
    assert os.path.getsize(path) > 64 * 1024 * 1024
    reads: dict[str, int] = {}
    real_open = job.fs.open

    def counting_open(p, mode="rb", **kwargs):
        handle = real_open(p, mode, **kwargs)
        real_read = handle.read

        def read(n=-1):
            data = real_read(n)
            reads[str(p)] = reads.get(str(p), 0) + len(data)
            return data

        handle.read = read
        return handle

    monkeypatch.setattr(job.fs, "open", counting_open)
    assert job.checkpoints.latest_valid().metadata.id == 1
    # Bounded reads (one ranged GET on object storage): a byte past the largest _metadata we write.
    assert reads[str(path)] == MAX_METADATA_BYTES + 1
