"""Unit tests of the pure pieces: durations, options, the format module, file selection, retention plans."""

from __future__ import annotations

import json
import posixpath
from pathlib import Path

import pytest

from spark_checkpoint_runtime.durations import format_bytes, parse_duration
from spark_checkpoint_runtime.layout import (
    CheckpointFormatError,
    DamagedCheckpoint,
    FileEntry,
    JobFolder,
    NoValidCheckpoint,
    validate_job_name,
)
from spark_checkpoint_runtime.options import OptionsError, parse_options
from spark_checkpoint_runtime.retention import plan_retention
from spark_checkpoint_runtime.state_files import CaptureError, UnsupportedStateStore, select_files
from tests.support.helpers import checkpoint_metadata, write_checkpoint

BASE = ["--job-name", "j", "--checkpoint-root", "/tmp/r", "--pipeline", "m:f"]


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("500ms", 0.5), ("10s", 10), ("1min", 60), ("2 h", 7200), ("1d", 86400), ("250", 0.25), ("1.5s", 1.5)],
)
def test_durations_use_flink_syntax(text, seconds):
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["ten seconds", "10 parsecs", "-1s", "", "1e3s"])
def test_bad_durations_say_what_works(text):
    with pytest.raises(ValueError, match="500ms, 10s, 1min|unknown unit"):
        parse_duration(text, name="--checkpoint-interval")


def test_format_bytes():
    assert format_bytes(512) == "512 B"
    assert format_bytes(1536) == "1.5 KiB"


def test_options_defaults_follow_flink():
    opts = parse_options(BASE)
    assert (opts.checkpoint_interval, opts.checkpoint_timeout, opts.min_pause) == (10, 600, 0)
    assert (opts.num_retained, opts.tolerable_failed_checkpoints) == (3, 0)
    assert opts.externalized_retention == "retain-on-cancellation"
    assert (opts.trigger, opts.restore_from, opts.checkpointing_mode) == ("available-now", "latest", "exactly-once")


def test_spec_file_json_and_yaml_with_cli_override(tmp_path: Path):
    spec = tmp_path / "job.yaml"
    spec.write_text("job-name: from-spec\ncheckpoint_root: /tmp/r\npipeline: m:f\nnum-retained: 5\nconf:\n  a.b: 1\n")
    opts = parse_options(["--spec", str(spec), "--num-retained", "2", "--conf", "c.d=x"])
    assert (opts.job_name, opts.num_retained, opts.conf) == ("from-spec", 2, {"a.b": "1", "c.d": "x"})
    as_json = tmp_path / "job.json"
    as_json.write_text(
        json.dumps({"job_name": "j", "checkpoint_root": "/r", "pipeline": "m:f", "trigger": "continuous"})
    )
    assert parse_options(["--spec", str(as_json)]).trigger == "continuous"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--bogus", "1"], "unrecognized arguments: --bogus"),
        (["--checkpoint-interval", "soon"], "--checkpoint-interval: 'soon' is not a duration"),
        (["--trigger", "sometimes"], "--trigger 'sometimes' is not one of"),
        (["--num-retained", "0"], "--num-retained '0' must be at least 1"),
        (["--sink", "kafka"], "must be parquet:PATH, console or module:Class"),
    ],
)
def test_bad_options_are_named(argv, message):
    with pytest.raises(OptionsError, match=message.replace("(", r"\(")):
        parse_options(BASE + argv)


def test_hostile_specs_are_refused(tmp_path: Path):
    deep = tmp_path / "deep.json"
    nested: dict = {}
    cursor = nested
    for _ in range(50):
        cursor["x"] = {}
        cursor = cursor["x"]
    deep.write_text(json.dumps({"job_name": "j", "conf": nested}))
    with pytest.raises(OptionsError, match="nested deeper"):
        parse_options(["--spec", str(deep)])
    huge = tmp_path / "huge.json"
    huge.write_text('{"job_name": "' + "x" * 2_000_000 + '"}')
    with pytest.raises(OptionsError, match="at most"):
        parse_options(["--spec", str(huge)])
    unknown = tmp_path / "unknown.json"
    unknown.write_text(json.dumps({"job_name": "j", "surprise": 1}))
    with pytest.raises(OptionsError, match="unknown option"):
        parse_options(["--spec", str(unknown)])


@pytest.mark.parametrize("name", ["a/b", "..", "../x", "x y", "", ".", "a\\b", "ü"])
def test_job_names_cannot_escape_the_root(name):
    with pytest.raises(CheckpointFormatError):
        validate_job_name(name)


def test_metadata_roundtrip_and_latest_skips_damaged(tmp_path: Path, caplog):
    storage = JobFolder(str(tmp_path), "j")
    write_checkpoint(storage, 1, ["state/0/0/1.delta"])
    write_checkpoint(storage, 2, ["state/0/0/1.delta", "state/0/0/2.delta"])
    third = write_checkpoint(storage, 3, ["state/0/0/1.delta", "state/0/0/3.delta"])
    assert storage.checkpoints.latest_valid().metadata.id == 3
    assert storage.checkpoints.read(3).files == third.files
    # A missing shared file makes chk-3 invalid; a truncated _metadata makes chk-2 invalid.
    storage.fs.rm_file(storage.job_file(storage.checkpoints.shared_relative_file("r1", "state/0/0/3.delta")))
    metadata = tmp_path / "j" / "chk-2" / "_metadata"
    metadata.write_text(metadata.read_text()[:40])
    found = storage.checkpoints.latest_valid()
    assert found.metadata.id == 1
    assert "chk-3: missing shared/r1/state/0/0/3.delta" in caplog.text
    assert "chk-2: _metadata is not valid JSON" in caplog.text
    assert storage.next_checkpoint_id() == 4
    # With every checkpoint damaged, "latest" refuses instead of starting from empty state.
    (tmp_path / "j" / "chk-1" / "_metadata").write_text("")
    with pytest.raises(NoValidCheckpoint, match="no valid checkpoint .*--restore-from none"):
        storage.checkpoints.latest_valid()


@pytest.mark.parametrize(
    ("mutate", "reason"),
    [
        (lambda d: d.update(format_version=99), "format version 99"),
        (lambda d: d["files"].append({"path": "../other/x", "target": "x", "size": 1, "shared": True}), "leaves"),
        (lambda d: d["files"].append({"path": "/etc/passwd", "target": "x", "size": 1, "shared": True}), "relative"),
        (lambda d: d.update(job_name="other"), "belongs to job 'other'"),
        (lambda d: d.pop("files"), "missing or has a bad field"),
    ],
)
def test_hostile_metadata_is_rejected(tmp_path: Path, mutate, reason):
    storage = JobFolder(str(tmp_path), "j")
    write_checkpoint(storage, 1, [])
    path = tmp_path / "j" / "chk-1" / "_metadata"
    data = json.loads(path.read_text())
    mutate(data)
    path.write_text(json.dumps(data))
    with pytest.raises(DamagedCheckpoint, match=reason):
        storage.checkpoints.validate(1)


def test_restore_paths_must_be_this_jobs_checkpoints(tmp_path: Path):
    storage = JobFolder(str(tmp_path / "root"), "j")
    write_checkpoint(storage, 1, [])
    assert storage.resolve_snapshot(str(tmp_path / "root" / "j" / "chk-1")).metadata.id == 1
    assert storage.resolve_snapshot(f"file://{tmp_path}/root/j/chk-1/_metadata").metadata.id == 1
    # What a killed savepoint or rescale leaves, and a copy cut short elsewhere: files, no _metadata.
    (tmp_path / "root" / "j" / "savepoints" / "savepoint-killed" / "state").mkdir(parents=True)
    (tmp_path / "root" / "j" / "savepoints" / "savepoint-killed" / "state" / "1.delta").write_bytes(b"x")
    (tmp_path / "copied-half" / "offsets").mkdir(parents=True)
    for bad, message in (
        (str(tmp_path / "root" / "j" / "chk-1" / ".." / ".." / "k" / "chk-1"), "outside"),
        (str(tmp_path), "outside"),
        (str(tmp_path / "root" / "j" / "shared"), "not a checkpoint folder"),
        (str(tmp_path / "root" / "j" / "chk-9"), "no _metadata"),
        (str(tmp_path / "root" / "j" / "savepoints" / "savepoint-killed"), "unfinished snapshot"),
        (str(tmp_path / "copied-half"), "unfinished snapshot"),
    ):
        with pytest.raises(CheckpointFormatError, match=message):
            storage.resolve_snapshot(bad)
    # The message names the option the path came in by: rescale's --from, the state command's --savepoint.
    from spark_checkpoint_runtime.derived_savepoint import source_snapshot
    from spark_checkpoint_runtime.state_inspection import snapshot_for

    half = str(tmp_path / "copied-half")
    with pytest.raises(CheckpointFormatError, match=r"^--from '.*copied-half' is an unfinished snapshot"):
        source_snapshot(storage, half)
    with pytest.raises(CheckpointFormatError, match=r"^--savepoint '.*copied-half' is an unfinished snapshot"):
        snapshot_for(storage, None, half)
    with pytest.raises(CheckpointFormatError, match=r"^--restore-from '.*copied-half' is an unfinished snapshot"):
        storage.resolve_snapshot(half)


def _listing(batch: int, deltas: range, snapshots=(), extra=None) -> dict[str, int]:
    files = {"metadata": 45, "sources/0/0": 80, "state/0/_metadata/metadata": 150, "state/0/0/_metadata/schema": 190}
    for n in range(batch + 3):
        files[f"offsets/{n}"] = 1000
        files[f"commits/{n}"] = 29
        files[f".offsets.{n}.crc"] = 12
    for v in deltas:
        files[f"state/0/0/{v}.delta"] = 100 + v
    for v in snapshots:
        files[f"state/0/0/{v}.snapshot"] = 500
    files.update(extra or {})
    return files


def test_selection_leaves_out_later_batches_and_hidden_files():
    chosen = {f.target: f for f in select_files(_listing(4, range(1, 8)), 4)}
    assert {"offsets/3", "offsets/4", "commits/3", "commits/4"} <= set(chosen)
    assert "offsets/5" not in chosen and "commits/5" not in chosen and "offsets/2" not in chosen
    assert [t for t in chosen if t.endswith(".delta")] == [f"state/0/0/{v}.delta" for v in range(1, 6)]
    assert all(chosen[f"state/0/0/{v}.delta"].shared for v in range(1, 6))
    assert not chosen["state/0/0/_metadata/schema"].shared
    assert chosen["sources/0/0"].shared, "source logs are immutable and uploaded once"
    assert not any(".crc" in t for t in chosen)


def test_selection_prefers_stored_snapshot_chains():
    listing = _listing(12, range(1, 15), snapshots=(10,))
    fresh = [f.target for f in select_files(listing, 12) if f.shared and f.target.startswith("state/")]
    assert fresh == ["state/0/0/10.snapshot", "state/0/0/11.delta", "state/0/0/12.delta", "state/0/0/13.delta"]
    # Stored deltas and a snapshot Spark wrote since: a replay of up to 10 deltas (Spark's own snapshot
    # spacing) reuses what is stored; a longer one stores the snapshot, so a restore replays no more than a
    # native restart.
    short = _listing(8, range(1, 11), snapshots=(5,))
    stored = {f"state/0/0/{v}.delta" for v in range(1, 9)}
    incremental = [f.target for f in select_files(short, 8, stored) if f.shared and f.target.startswith("state/")]
    assert incremental == [f"state/0/0/{v}.delta" for v in range(1, 10)], "reuse stored deltas, skip the snapshot"
    stored = {f"state/0/0/{v}.delta" for v in range(1, 13)}
    long = [f.target for f in select_files(listing, 12, stored) if f.shared and f.target.startswith("state/")]
    assert long == ["state/0/0/10.snapshot", "state/0/0/11.delta", "state/0/0/12.delta", "state/0/0/13.delta"]
    stored |= {"state/0/0/10.snapshot"}
    later = _listing(14, range(1, 17), snapshots=(10,))
    reused = [f.target for f in select_files(later, 14, stored) if f.shared and f.target.startswith("state/")]
    assert reused[0] == "state/0/0/10.snapshot", "once stored, the snapshot is the base"


def test_selection_refuses_incomplete_batches_and_unknown_state_layouts():
    with pytest.raises(CaptureError, match="offsets/9"):
        select_files(_listing(4, range(1, 6)), 9)
    with pytest.raises(CaptureError, match="no complete snapshot/delta chain"):
        select_files(_listing(4, [1, 2, 4, 5]), 4)
    with pytest.raises(UnsupportedStateStore, match="mixes HDFS-backed"):
        select_files(_listing(1, range(1, 3), extra={"state/0/0/2.zip": 10}), 1)
    with pytest.raises(UnsupportedStateStore, match="unknown state file state/0/0/2.parquet"):
        select_files(_listing(1, range(1, 3), extra={"state/0/0/2.parquet": 10}), 1)


def test_selection_refuses_a_state_partition_missing_from_the_working_folder():
    listing = _listing(4, range(1, 6))
    for partition in (1, 3):  # partitions 0, 1 and 3 of 4: partition 2 is somewhere the driver cannot see
        listing.update({f"state/0/{partition}/{v}.delta": 100 for v in range(1, 6)})
    with pytest.raises(CaptureError, match=r"state operator 0 has 3 of its 4 partitions .*missing: 2\)"):
        select_files(listing, 4, partitions=4)
    listing.update({f"state/0/2/{v}.delta": 100 for v in range(1, 6)})
    assert len([f for f in select_files(listing, 4, partitions=4) if f.target.endswith(".delta")]) == 20
    # A join keeps several stores per partition; an operator with metadata but no partition at all is refused.
    join = {f"state/1/{p}/left-keyToNumValues/{v}.delta": 10 for p in range(4) for v in range(1, 6)}
    listing.update({"state/1/_metadata/metadata": 150, **join})
    assert len([f for f in select_files(listing, 4, partitions=4) if f.target.endswith(".delta")]) == 40
    listing["state/2/_metadata/metadata"] = 150
    with pytest.raises(CaptureError, match="state operator 2 has 0 of its 4 partitions"):
        select_files(listing, 4, partitions=4)


def test_retention_plan_keeps_newest_and_what_they_reference():
    a, b, c = (FileEntry(f"shared/r/{n}", n, 10, True) for n in "abc")
    checkpoints = {
        1: checkpoint_metadata(1, [a]),
        2: checkpoint_metadata(2, [a, b]),
        3: None,
        4: checkpoint_metadata(4, [b, c]),
        5: checkpoint_metadata(5, [c]),
    }
    shared = {"shared/r/a": 10, "shared/r/b": 10, "shared/r/c": 10, "shared/r/orphan": 10}
    plan = plan_retention(checkpoints, shared, 2, older_than=6)
    assert plan.keep == [4, 5]
    assert plan.delete_checkpoints == [1, 2, 3]
    assert plan.delete_shared == ["shared/r/a", "shared/r/orphan"]
    # A checkpoint at or above `older_than` may be in progress: neither it nor its files go.
    in_progress = plan_retention({**checkpoints, 6: None}, shared, 2, older_than=6)
    assert 6 not in in_progress.delete_checkpoints and in_progress.delete_shared == []


def test_request_decider_applies_interval_and_min_pause():
    from spark_checkpoint_runtime.checkpoint_policy import RequestDecider

    decider = RequestDecider(interval=10, min_pause=4)
    assert decider.due(0)
    decider.triggered(0)
    assert not decider.due(9.9)
    decider.finished(8)  # a slow checkpoint: it completed at t=8
    assert not decider.due(11), "min pause: 4 s after the completion at 8"
    assert decider.due(12)


def test_failure_manager_counts_consecutive_failures():
    from spark_checkpoint_runtime.checkpoint_policy import FailureManager

    failures = FailureManager(tolerable=1)
    assert failures.failed(3, "boom") is None
    failures.succeeded()
    assert failures.failed(5, "boom") is None
    reason = failures.failed(6, "disk full")
    assert reason == (
        "checkpoint 6 failed (disk full); 2 consecutive failed checkpoint(s) exceed --tolerable-failed-checkpoints 1"
    )


def test_restore_links_local_files_instead_of_copying(tmp_path):
    import os

    from spark_checkpoint_runtime.restore import resolve_restore_point
    from spark_checkpoint_runtime.snapshot import materialize
    from spark_checkpoint_runtime.working_copy import WorkingCopy

    storage = JobFolder(str(tmp_path / "root"), "j")
    write_checkpoint(storage, 1, ["state/0/0/1.delta", "sources/0/0"])
    point = resolve_restore_point(storage, "latest")
    working = WorkingCopy(str(tmp_path / "work"), "j", "run-2")
    working.create()
    assert materialize(point.snapshot, working) == 25
    for entry in point.metadata.files:
        stored, restored = point.snapshot.file_path(entry), working.file_path(entry.target)
        assert os.stat(stored).st_ino == os.stat(restored).st_ino, entry.target
    # Spark replaces files by renaming a new one over the name: the stored copy stays as it was.
    replaced = working.file_path("state/0/0/1.delta")
    Path(replaced + ".tmp").write_bytes(b"new")
    os.replace(replaced + ".tmp", replaced)
    assert Path(point.snapshot.file_path(point.metadata.files[0])).read_bytes() == b"x" * 10


def test_a_working_folder_off_the_local_disk_is_frozen_by_size_checked_copies(tmp_path):
    """HDFS or object storage has no hard links: capture copies within it (here fsspec's memory filesystem)."""
    import threading

    from spark_checkpoint_runtime.snapshot import StoredFiles, capture, upload
    from spark_checkpoint_runtime.state_files import CaptureRaced
    from spark_checkpoint_runtime.working_copy import WorkingCopy

    working = WorkingCopy(f"memory://{tmp_path.name}/work", "j", "run-1")
    working.create()
    assert not working.is_local
    pinned = '{"batchWatermarkMs":0,"conf":{"spark.sql.shuffle.partitions":"2"}}'
    files = {"metadata": b"{}", "offsets/0": f"v1\n{pinned}\n{{}}".encode(), "commits/0": b"v1\n{}"}
    files.update({f"state/0/{p}/1.delta": bytes([p]) * (10 + p) for p in range(2)})
    for target, data in files.items():
        working.fs.pipe_file(working.file_path(target), data)
    snap = capture(working, 1, 0, StoredFiles())
    frozen = snap.sources["state/0/1/1.delta"]
    assert frozen.startswith(working.frozen_path) and working.fs.cat_file(frozen) == b"\x01" * 11
    working.fs.rm(working.file_path("state/0/1/1.delta"))  # Spark's maintenance deletes it mid-upload
    storage = JobFolder(str(tmp_path / "root"), "j")
    stored = upload(snap, working, storage, "run-1", StoredFiles(), threading.Event())
    assert {e.target: e.size for e in stored.entries if e.shared} == {"state/0/0/1.delta": 10, "state/0/1/1.delta": 11}
    working.release("chk-1")
    assert not working.fs.exists(posixpath.join(working.frozen_path, "chk-1"))
    # The next checkpoint references what is stored (no copy); a savepoint copies everything again.
    working.fs.pipe_file(working.file_path("state/0/1/1.delta"), b"\x01" * 11)
    following = capture(working, 2, 0, StoredFiles(stored.entries))
    assert set(following.reused) == {"state/0/0/1.delta", "state/0/1/1.delta"}
    assert set(following.sources) == {"metadata", "offsets/0", "commits/0"}
    assert set(capture(working, 3, 0, StoredFiles(stored.entries), reuse=False).sources) == set(files)
    with pytest.raises(CaptureRaced, match=r"metadata changed while it was captured \(3 bytes listed, 2 frozen\)"):
        working.freeze("chk-2", {"metadata": 3})
    # Partition 1 gone before the capture lists: fail the checkpoint, never store partition 0 alone.
    with pytest.raises(CaptureError, match="state operator 0 has 1 of its 2 partitions"):
        working.fs.rm(working.file_path("state/0/1/1.delta"))
        capture(working, 4, 0, StoredFiles())


def test_batch_listener_without_the_slim_proxy_still_forwards_batches():
    """Should a PySpark release stop asking for ``_jlistener``, its own wrapper calls the listener's methods."""
    from types import SimpleNamespace

    from spark_checkpoint_runtime.run.progress import BatchListener

    completed = []
    coordinator = SimpleNamespace(batch_completed=completed.append)
    listener = BatchListener(coordinator, SimpleNamespace(sparkContext=SimpleNamespace(_jvm=None)))
    listener.run_id = "run-a"

    def event(run_id: str, batch: int, rows: int) -> SimpleNamespace:
        return SimpleNamespace(progress=SimpleNamespace(runId=run_id, batchId=batch, numInputRows=rows))

    listener.listener.onQueryProgress(event("run-a", 3, 40))
    listener.listener.onQueryProgress(event("run-b", 4, 50))  # another query in the same session
    assert completed == [3] and listener.rows == {3: 40}


def test_reports_keep_only_the_newest_of_each_kind(tmp_path):
    import os
    import time

    from spark_checkpoint_runtime.layout import JobFolder

    storage = JobFolder(str(tmp_path), "orders")
    for number in range(5):
        url = storage.write_report("retention", f"run-{number}", {"n": number}, keep=3)
        os.utime(url.removeprefix("file://"), (time.time() - 100 + number, time.time() - 100 + number))
    kept = sorted(p.name for p in (tmp_path / "orders" / "_reports").iterdir())
    assert kept == ["retention-run-2.json", "retention-run-3.json", "retention-run-4.json"]


def test_a_poke_with_nothing_new_lists_only_the_job_folder_and_restore_lists_only_referenced_runs(
    tmp_path, monkeypatch
):
    """What a sensor's poke and a restore list: never the whole of ``shared/``, whatever it holds."""
    from spark_checkpoint_runtime.layout import find_completed_checkpoint
    from tests.support.helpers import write_checkpoint

    storage = JobFolder(str(tmp_path), "orders")
    for checkpoint_id in (1, 2, 3):
        write_checkpoint(storage, checkpoint_id, [f"state-{checkpoint_id}"])
    unrelated = tmp_path / "orders" / "shared" / "old-run"
    unrelated.mkdir()
    for n in range(100):
        (unrelated / f"f{n}").write_bytes(b"x")
    listed: list[str] = []
    for name in ("ls", "find"):
        original = getattr(storage.fs, name)

        def recording(path, *args, _original=original, **kwargs):
            listed.append(str(path))
            return _original(path, *args, **kwargs)

        monkeypatch.setattr(storage.fs, name, recording)  # fsspec shares the instance: undone after the test
    assert find_completed_checkpoint(storage, newer_than=3) is None
    assert listed == [storage.job_path], listed  # one listing of the job folder, nothing else
    listed.clear()
    assert storage.checkpoints.latest_valid().metadata.id == 3
    assert not [p for p in listed if "/shared" in p and not p.endswith("/shared/r1")], listed


def test_removing_the_working_folder_outlasts_a_writer_still_creating_files(tmp_path):
    """Spark's maintenance may write into the folder as the run removes it; the removal retries until done."""
    import threading
    import time

    from spark_checkpoint_runtime.working_copy import WorkingCopy

    working = WorkingCopy(str(tmp_path / "work"), "j", "run-1")
    working.create()
    partition = Path(working.file_path("state/0/0/1.delta")).parent
    partition.mkdir(parents=True)
    stop = threading.Event()
    written = []

    def maintenance() -> None:
        # Keeps one partition folder busy with new files for a while, as a snapshot upload would.
        deadline = time.monotonic() + 0.6
        while time.monotonic() < deadline:
            try:
                partition.mkdir(parents=True, exist_ok=True)
                for n in range(50):
                    (partition / f"{len(written)}-{n}.zip").write_bytes(b"x")
            except FileNotFoundError:
                continue  # the removal took the folder mid-way: make it again, as Spark's mkdirs would
            written.append(1)
        stop.set()

    writer = threading.Thread(target=maintenance)
    writer.start()
    time.sleep(0.05)  # the writer is busy: a single recursive delete fails here ("Directory not empty")
    working.remove(pause=0.05)
    writer.join()
    # The removal may have won before the writer stopped; once the writer is done, one more pass must clear it.
    working.remove(pause=0.05)
    assert stop.is_set() and written
    assert not Path(working.run_path).exists()


def test_the_local_listing_retention_uses_answers_as_fsspec_find_does(tmp_path):
    """Retention's fast local listing must see what ``LocalFileSystem.find`` sees, links included."""
    import os

    from fsspec.implementations.local import LocalFileSystem

    from spark_checkpoint_runtime.layout.store import local_files, modified_time

    job = tmp_path / "job"
    (job / "chk-1" / "deep").mkdir(parents=True)
    (job / "chk-1" / "deep" / "a").write_bytes(b"a" * 7)
    (job / "shared").mkdir()
    (job / "shared" / "s").write_bytes(b"s" * 3)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "big").write_bytes(b"b" * 100)
    os.symlink(outside, job / "chk-2")  # a planted folder link: listed as an entry, never walked into
    os.symlink(outside / "big", job / "shared" / "link")  # a file link: its target's size
    os.symlink(tmp_path / "missing", job / "shared" / "dangling")

    fs = LocalFileSystem()
    expected = {
        path: (int(info.get("size") or 0), modified_time(info))
        for path, info in fs.find(str(job), detail=True).items()
        if info.get("type") != "directory"
    }
    assert local_files(str(job)) == expected
    assert local_files(str(job))[str(job / "shared" / "link")][0] == 100
    assert local_files(str(tmp_path / "nothing-here")) == {}
