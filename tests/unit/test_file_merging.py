"""File merging: a checkpoint's small new files packed into segment objects (``runtime/file_merging.py``).

Against a loopback S3 server that counts requests (moto), and on local disk for the retention rules: a
checkpoint's 203 new files cost one PUT; ``_metadata`` records ranges (format version 2); a restore rebuilds
every file byte for byte in a few reads; retention keeps a segment while any retained checkpoint references
a range of it; a segment shorter than ``_metadata`` says makes the checkpoint damaged, never a cut file.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from spark_checkpoint_runtime.file_merging import MIB, Compaction, FileMerging, read_ranges
from spark_checkpoint_runtime.layout import CheckpointMetadata, JobFolder, missing_files
from spark_checkpoint_runtime.retention import apply_job_retention, plan_job_retention
from spark_checkpoint_runtime.snapshot import StoredFiles, capture, materialize
from spark_checkpoint_runtime.snapshot_targets import CheckpointTarget
from spark_checkpoint_runtime.working_copy import WorkingCopy
from tests.support.helpers import checkpoint_metadata

PARTITIONS = 200


@pytest.fixture(scope="module")
def counted():
    from benchmarks.s3_requests import CountingS3Server

    server = CountingS3Server().start()
    yield server
    server.stop()


def spark_files(
    working: WorkingCopy, version: int, partitions: int = PARTITIONS, kind: str = "delta"
) -> dict[str, bytes]:
    """What Spark's HDFS-backed store and its logs leave after batch ``version - 1``: a delta (or a
    snapshot) per partition."""
    pinned = f'{{"batchWatermarkMs":0,"conf":{{"spark.sql.shuffle.partitions":"{partitions}"}}}}'
    files = {"metadata": b"{}", f"offsets/{version - 1}": f"v1\n{pinned}\n{{}}".encode()}
    files[f"commits/{version - 1}"] = b"v1\n{}"
    files.update({f"state/0/{p}/{version}.{kind}": f"{version}-{p}-".encode() * (5 + p % 7) for p in range(partitions)})
    for target, data in files.items():
        Path(working.file_path(target)).parent.mkdir(parents=True, exist_ok=True)
        Path(working.file_path(target)).write_bytes(data)
    return files


def checkpoint(target: CheckpointTarget, working: WorkingCopy, checkpoint_id: int, stored: StoredFiles):
    snap = capture(working, checkpoint_id, checkpoint_id - 1, stored)
    done = target.upload(snap, working, threading.Event(), lambda action: None)
    meta = checkpoint_metadata(checkpoint_id, done.entries, job="j")
    target.storage.checkpoints.write_metadata(meta)
    stored.replace(meta.files)
    return meta


def test_a_checkpoints_small_files_go_up_in_one_segment_and_restore_byte_for_byte(counted, tmp_path):
    working = WorkingCopy(str(tmp_path / "work"), "j", "run-1")
    working.create()
    files = spark_files(working, 1)
    storage = JobFolder(f"s3://{counted.bucket}/merged", "j", counted.options)
    target = CheckpointTarget(storage, "run-1", StoredFiles(), FileMerging(enabled=True))
    counted.reset()
    done = target.upload(capture(working, 1, 0, StoredFiles()), working, threading.Event(), lambda action: None)
    spent = counted.snapshot()
    assert spent["PUT"] == 1 and spent["total"] == 1, spent
    assert len(done.entries) == len(files) and {e.path for e in done.entries} == {done.new_shared[0]}
    assert done.new_shared[0].startswith("shared/run-1/_segments/chk-1-")

    meta = checkpoint_metadata(1, done.entries, job="j")
    storage.checkpoints.write_metadata(meta)
    text = storage.fs.cat_file(storage.job_file("chk-1/_metadata"))
    assert json.loads(text)["format_version"] == 2, "ranges need a runtime that reads them"
    read_back = CheckpointMetadata.from_json(text, location="chk-1")
    assert sorted((e.target, e.offset, e.size) for e in read_back.files) == sorted(
        (e.target, e.offset, e.size) for e in done.entries
    )

    restored = WorkingCopy(str(tmp_path / "restored"), "j", "run-2")
    restored.create()
    counted.reset()
    assert materialize(storage.checkpoints.latest_valid(), restored) == sum(map(len, files.values()))
    assert counted.snapshot()["GET"] <= 2, "the segment in one read (the metadata is the other)"
    for name, data in files.items():
        assert Path(restored.file_path(name)).read_bytes() == data, name


def test_segments_stay_under_their_size_and_large_files_stay_objects_of_their_own(tmp_path):
    working = WorkingCopy(str(tmp_path / "work"), "j", "run-1")
    working.create()
    spark_files(working, 1, partitions=40)
    Path(working.file_path("state/0/3/1.delta")).write_bytes(b"x" * (5 * MIB))  # a large file
    storage = JobFolder(str(tmp_path / "root"), "j")
    target = CheckpointTarget(storage, "run-1", StoredFiles(), FileMerging(enabled=True, segment_bytes=200))
    meta = checkpoint(target, working, 1, StoredFiles())
    large = [e for e in meta.files if e.target == "state/0/3/1.delta"]
    assert large[0].offset is None and large[0].path == "shared/run-1/state/0/3/1.delta"
    segments = {e.path for e in meta.files if e.offset is not None}
    assert len(segments) > 5 and all((tmp_path / "root" / "j" / s).stat().st_size <= 200 for s in segments)


def test_retention_keeps_a_segment_while_a_retained_checkpoint_references_a_range_of_it(tmp_path):
    """Checkpoint 2 references the first's deltas (its segment) and adds its own; once no retained checkpoint
    references a range of a segment, retention deletes it; a range's segment is never deleted before."""
    working = WorkingCopy(str(tmp_path / "work"), "j", "run-1")
    working.create()
    storage = JobFolder(str(tmp_path / "root"), "j")
    target = CheckpointTarget(storage, "run-1", StoredFiles(), FileMerging(enabled=True))
    stored = StoredFiles()
    spark_files(working, 1, partitions=4)
    first = checkpoint(target, working, 1, stored)
    spark_files(working, 2, partitions=4)  # version 2's deltas are new; version 1's are still needed
    second = checkpoint(target, working, 2, stored)
    first_segment = {e.path for e in first.files}
    assert first_segment <= {e.path for e in second.files}, "the second references ranges of the first's segment"
    plan = plan_job_retention(storage, num_retained=1, orphan_grace=0, now=time.time() + 3600)
    apply_job_retention(storage, plan)
    assert [m.id for m in storage.checkpoints.completed()] == [2]
    assert all((tmp_path / "root" / "j" / path).exists() for path in first_segment)
    materialize(storage.checkpoints.latest_valid(), _fresh(tmp_path / "r1"))

    # A third checkpoint after a snapshot of the store: nothing of the first segment is needed any more.
    for path in Path(working.file_path("state")).rglob("*.delta"):
        path.unlink()
    spark_files(working, 3, partitions=4, kind="snapshot")
    checkpoint(target, working, 3, stored)
    apply_job_retention(storage, plan_job_retention(storage, num_retained=1, orphan_grace=0, now=time.time() + 3600))
    assert not any((tmp_path / "root" / "j" / path).exists() for path in first_segment)


def _fresh(folder: Path) -> WorkingCopy:
    working = WorkingCopy(str(folder), "j", "run-x")
    working.create()
    return working


def test_a_segment_shorter_than_metadata_says_makes_the_checkpoint_damaged_never_a_cut_file(tmp_path):
    working = WorkingCopy(str(tmp_path / "work"), "j", "run-1")
    working.create()
    spark_files(working, 1, partitions=8)
    storage = JobFolder(str(tmp_path / "root"), "j")
    meta = checkpoint(
        CheckpointTarget(storage, "run-1", StoredFiles(), FileMerging(enabled=True)), working, 1, StoredFiles()
    )
    segment = tmp_path / "root" / "j" / meta.files[0].path
    whole = segment.read_bytes()
    segment.write_bytes(whole[: len(whole) - 3])
    listing = {meta.files[0].path: len(whole) - 3}
    assert "expected at least" in missing_files(meta.files, listing)
    with pytest.raises(Exception, match="expected at least"):
        storage.checkpoints.validate(1)
    ranged = [(e, str(segment)) for e in meta.files if e.offset + e.size > len(whole) - 3]
    with pytest.raises(FileNotFoundError, match="holds"):
        list(read_ranges(storage.fs, ranged))


def test_a_checkpoint_that_fails_during_its_segment_upload_leaves_no_segment(tmp_path):
    working = WorkingCopy(str(tmp_path / "work"), "j", "run-1")
    working.create()
    spark_files(working, 1, partitions=8)
    storage = JobFolder(str(tmp_path / "root"), "j")
    target = CheckpointTarget(storage, "run-1", StoredFiles(), FileMerging(enabled=True, segment_bytes=64))
    calls = []

    def fence(action: str) -> None:
        calls.append(action)
        if len(calls) > 12:  # the lease is lost midway: several segments were written
            raise RuntimeError("lease lost")

    with pytest.raises(RuntimeError, match="lease lost"):
        target.upload(capture(working, 1, 0, StoredFiles()), working, threading.Event(), fence)
    assert not list((tmp_path / "root" / "j").rglob("*.seg"))


def test_merging_is_on_for_object_stores_by_default_and_never_for_savepoints():
    import fsspec

    assert FileMerging.for_storage("auto", 64, fsspec.filesystem("s3", anon=True)).enabled
    assert not FileMerging.for_storage("auto", 64, fsspec.filesystem("file")).enabled
    assert FileMerging.for_storage("on", 8, fsspec.filesystem("file")) == FileMerging(True, 8 * MIB)
    assert not FileMerging.for_storage("off", 64, fsspec.filesystem("s3", anon=True)).enabled


def _second_version_mostly_snapshots(working: WorkingCopy) -> None:
    """Batch 1 of 8 partitions: 0-5 write a snapshot (their version 1 deltas are dead), 6-7 a delta."""
    for p in range(6):
        Path(working.file_path(f"state/0/{p}/1.delta")).unlink()
        Path(working.file_path(f"state/0/{p}/2.snapshot")).write_bytes(f"snap-{p}".encode())
    for p in (6, 7):
        Path(working.file_path(f"state/0/{p}/2.delta")).write_bytes(f"delta-{p}".encode())
    for name, data in {"offsets/1": Path(working.file_path("offsets/0")).read_bytes(), "commits/1": b"v1\n{}"}.items():
        Path(working.file_path(name)).write_bytes(data)


def test_a_mostly_unused_segment_is_compacted_into_the_next_checkpoint_and_then_deleted(counted, tmp_path):
    """Partitions 0-5 got a new snapshot file, 6-7 still need their first delta: the first segment is mostly
    dead, so checkpoint 2 copies the two live ranges into its own segment (one ranged read) and references
    nothing of the first; retention then deletes it. Storage follows live state, and the restore is exact."""
    working = WorkingCopy(str(tmp_path / "work"), "j", "run-1")
    working.create()
    spark_files(working, 1, partitions=8)
    storage = JobFolder(f"s3://{counted.bucket}/compaction", "j", counted.options)
    target = CheckpointTarget(storage, "run-1", StoredFiles(), FileMerging(enabled=True))
    target.compaction = Compaction(storage, min_dead_bytes=0)  # these files are bytes, not megabytes
    stored = StoredFiles()
    first = checkpoint(target, working, 1, stored)
    first_segment = {e.path for e in first.files}
    _second_version_mostly_snapshots(working)
    counted.reset()
    second = checkpoint(target, working, 2, stored)
    spent = counted.snapshot()
    assert not first_segment & {e.path for e in second.files}, "nothing of the first segment is referenced"
    assert spent["PUT"] == 2 and spent["GET"] == 1, spent  # segment + _metadata; the live ranges in one read
    apply_job_retention(storage, plan_job_retention(storage, num_retained=1, orphan_grace=0, now=time.time() + 3600))
    assert not any(storage.fs.exists(storage.job_file(path)) for path in first_segment)
    restored = _fresh(tmp_path / "restored")
    materialize(storage.checkpoints.latest_valid(), restored)
    for p in (6, 7):
        assert Path(restored.file_path(f"state/0/{p}/1.delta")).read_bytes() == (f"1-{p}-" * (5 + p % 7)).encode()
    assert Path(restored.file_path("state/0/0/2.snapshot")).read_bytes() == b"snap-0"


def test_a_segment_with_little_dead_data_is_referenced_not_rewritten(counted, tmp_path):
    """A mostly dead segment whose dead bytes are under MIN_COMPACTED_DEAD_BYTES stays referenced: rewriting
    kilobytes at every checkpoint of a small job costs requests and saves nothing that matters."""
    working = WorkingCopy(str(tmp_path / "work"), "j", "run-1")
    working.create()
    spark_files(working, 1, partitions=8)
    storage = JobFolder(f"s3://{counted.bucket}/small-dead", "j", counted.options)
    target = CheckpointTarget(storage, "run-1", StoredFiles(), FileMerging(enabled=True))
    stored = StoredFiles()
    first = checkpoint(target, working, 1, stored)
    _second_version_mostly_snapshots(working)
    counted.reset()
    second = checkpoint(target, working, 2, stored)
    assert counted.snapshot()["GET"] == 0, "nothing read back to be rewritten"
    first_segment = {e.path for e in first.files}
    kept = {e.target for e in second.files if e.path in first_segment}
    assert {"state/0/6/1.delta", "state/0/7/1.delta"} <= kept


def test_ranged_reads_on_s3_raise_what_failed_and_empty_files_cost_no_request(counted):
    from spark_checkpoint_runtime.layout import FileEntry

    storage = JobFolder(f"s3://{counted.bucket}/ranges", "j", counted.options)
    segment = storage.job_file("shared/r/_segments/chk-1-0.seg")
    storage.fs.pipe_file(segment, b"abcdef")
    empty = FileEntry("shared/r/_segments/chk-1-0.seg", "logs/1.log", 0, True, 6)  # at the very end
    whole = FileEntry("shared/r/_segments/chk-1-0.seg", "state/0/0/1.delta", 6, True, 0)
    counted.reset()
    assert list(read_ranges(storage.fs, [(empty, segment)])) == [(empty, b"")]
    assert counted.snapshot()["total"] == 0
    assert [data for _, data in read_ranges(storage.fs, [(whole, segment), (empty, segment)])] == [b"abcdef", b""]
    gone = storage.job_file("shared/r/_segments/chk-9-0.seg")
    with pytest.raises(FileNotFoundError):
        list(read_ranges(storage.fs, [(whole, gone)]))


def test_a_checkpoint_a_newer_runtime_wrote_stops_retention_from_deleting_shared_files(tmp_path):
    """A ``_metadata`` of a format version this runtime does not read may reference any shared file: while
    one is in the job folder, retention keeps it and deletes nothing shared (an older worker's retention
    operator next to a newer job must not take the newer job's segments)."""
    working = WorkingCopy(str(tmp_path / "work"), "j", "run-1")
    working.create()
    storage = JobFolder(str(tmp_path / "root"), "j")
    target = CheckpointTarget(storage, "run-1", StoredFiles(), FileMerging(enabled=True))
    stored = StoredFiles()
    spark_files(working, 1, partitions=4)
    checkpoint(target, working, 1, stored)
    newer = json.loads(storage.checkpoints.read(1).to_json())
    newer.update(id=2, format_version=99)
    (tmp_path / "root" / "j" / "chk-2").mkdir()
    (tmp_path / "root" / "j" / "chk-2" / "_metadata").write_text(json.dumps(newer))
    orphan = tmp_path / "root" / "j" / "shared" / "run-0" / "old.delta"
    orphan.parent.mkdir(parents=True)
    orphan.write_bytes(b"old")
    plan = plan_job_retention(storage, num_retained=1, orphan_grace=0, now=time.time() + 3600)
    assert plan.delete_shared == [] and 2 not in plan.delete_checkpoints
    apply_job_retention(storage, plan)
    assert orphan.exists() and (tmp_path / "root" / "j" / "chk-2" / "_metadata").exists()

    from spark_checkpoint_runtime.retention import subsume

    spark_files(working, 3, partitions=4, kind="snapshot")
    for path in Path(working.file_path("state")).rglob("1.delta"):
        path.unlink()
    checkpoint(target, working, 3, stored)
    kept = subsume(storage, 1, 3)
    assert kept.delete_shared == [] and 2 not in kept.delete_checkpoints
    assert orphan.exists()
