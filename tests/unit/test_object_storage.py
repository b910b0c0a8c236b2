"""The checkpoint root on S3: s3fs against moto's S3 server on loopback (a real HTTP server, real requests).

Without Spark: ``_metadata`` created once, and what a poke, a poll, a heartbeat and retention cost in requests.
The crash/restore chain with ``s3://`` as the checkpoint root is ``tests/system/test_object_storage.py``.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from spark_checkpoint_runtime.layout import JobFolder, NoValidCheckpoint, SnapshotExists
from tests.support.helpers import S3_BUCKET as BUCKET
from tests.support.helpers import checkpoint_metadata


def test_metadata_on_s3_is_created_once(s3):
    storage = JobFolder(f"s3://{BUCKET}/unit", "once", s3)
    storage.checkpoints.write_metadata(checkpoint_metadata(1, [], job="once"))
    with pytest.raises(SnapshotExists):
        storage.checkpoints.write_metadata(checkpoint_metadata(1, [], job="once"))
    assert [m.id for m in storage.checkpoints.completed()] == [1]


@pytest.fixture(scope="module")
def counted():
    """A loopback S3 server that counts requests by kind (benchmarks/s3_requests.py)."""
    from benchmarks.s3_requests import CountingS3Server

    server = CountingS3Server().start()
    yield server
    server.stop()


def test_request_goals_a_poke_costs_one_listing_and_retention_deletes_in_batches(counted):
    from benchmarks.request_cost import write_checkpoint as small_checkpoint
    from spark_checkpoint_runtime.layout import find_completed_checkpoint
    from spark_checkpoint_runtime.retention import apply_job_retention, plan_job_retention

    storage = JobFolder(f"s3://{counted.bucket}/goals", "orders", counted.options)
    for checkpoint_id in range(1, 11):
        small_checkpoint(storage, checkpoint_id)
    for n in range(1100):  # an old run's files: never listed by a poke, deleted 1,000 keys per request
        storage.fs.pipe_file(storage.job_file(storage.checkpoints.shared_relative_file("old-run", f"f{n}")), b"x")
    counted.reset()
    assert find_completed_checkpoint(storage, newer_than=10) is None
    assert counted.snapshot()["total"] == 1, counted.snapshot()
    counted.reset()
    apply_job_retention(storage, plan_job_retention(storage, num_retained=3, orphan_grace=0, now=time.time()))
    spent = counted.snapshot()
    assert spent["DELETE"] == 0 and spent["DELETE_BATCH"] <= 7 + 2 + 2, spent  # 7 folders, 1,107 files, metadata
    assert sorted(m.id for m in storage.checkpoints.completed()) == [8, 9, 10]
    assert not storage.fs.exists(storage.job_file("shared/old-run/f0"))


def test_request_goals_an_idle_poll_is_one_listing_and_a_heartbeat_one_put(counted):
    """What an idle running job pays per poll and per renewal; the whole job is ``benchmarks.request_cost``."""
    from spark_checkpoint_runtime.errors import LeaseLost
    from spark_checkpoint_runtime.layout import ControlChannel, LeaseFiles
    from spark_checkpoint_runtime.lease import JobLease

    storage = JobFolder(f"s3://{counted.bucket}/idle", "orders", counted.options)
    control = ControlChannel(storage)
    lease = JobLease(storage, "run-1", "dag.task.try1", timeout=30)
    lease.acquire()
    try:
        control.request("answered", "stop", "someone-else")
        control.respond("answered", {"status": "accepted"})
        control.write_run_report("old-run", {"status": "finished"})
        counted.reset()
        poll = control.poll()
        assert counted.snapshot()["total"] == 1, counted.snapshot()  # requests, answers, lease: one LIST
        assert poll.pending == [] and LeaseFiles.listing_of(poll.lease_names).latest == lease.epoch
        control.request("new", "savepoint")
        counted.reset()
        assert [r.trigger_id for r in control.poll().pending] == ["new"]
        assert counted.snapshot() == {**counted.snapshot(), "LIST": 1, "GET": 1, "total": 2}
        counted.reset()
        control.heartbeat("run-1", "dag.task.try1")
        assert counted.snapshot() == {**counted.snapshot(), "PUT": 1, "total": 1}
        # A newer epoch in the poll's listing marks the lease lost without a listing of its own.
        LeaseFiles(storage).create(lease.epoch + 1, {"run_id": "taker", "acquired_ms": 1})
        counted.reset()
        with pytest.raises(LeaseLost, match="lost job 'orders' to run taker"):
            lease.observe(LeaseFiles.listing_of(control.poll().lease_names), "polling", lease.clock())
        assert counted.snapshot()["LIST"] == 1
    finally:
        lease.release()


def test_request_goals_retention_after_a_checkpoint_reads_only_the_new_metadata(counted):
    """The running job's retention (subsume) after each checkpoint: its requests do not grow with the number of
    checkpoints retained, and a ``_metadata`` replaced behind the job's back is read again (and judged)."""
    from benchmarks.request_cost import write_checkpoint as small_checkpoint
    from spark_checkpoint_runtime.retention import MetadataCache, subsume

    storage = JobFolder(f"s3://{counted.bucket}/aging", "orders", counted.options)
    cache = MetadataCache()
    spent = {}
    for checkpoint_id in range(1, 41):
        small_checkpoint(storage, checkpoint_id)
        counted.reset()
        subsume(storage, 30, checkpoint_id, cache)
        spent[checkpoint_id] = counted.snapshot()
    assert spent[5]["GET"] == spent[40]["GET"] == 1, (spent[5], spent[40])  # only the new _metadata
    assert spent[32] == spent[40], (spent[32], spent[40])  # each deletes one checkpoint: the same requests
    # One listing of the job folder (it shows every chk-<N> too), the new _metadata, and batched deletes from
    # that listing: the old checkpoint's _metadata, then its folder's files (neither listed nor probed), then
    # the shared file only it referenced.
    assert spent[40] == {**spent[40], "LIST": 1, "GET": 1, "HEAD": 0, "DELETE_BATCH": 3, "total": 5}, spent[40]
    assert len(storage.checkpoints.ids()) == 30
    # chk-35's _metadata replaced behind the job's back by garbage of the same size: the listing shows another
    # time, so it is read again, and it is not counted as valid.
    size = storage.fs.size(storage.job_file("chk-35/_metadata"))
    time.sleep(1.1)  # S3 lists modification times in whole seconds
    storage.fs.pipe_file(storage.job_file("chk-35/_metadata"), b" " * size)
    counted.reset()
    plan = subsume(storage, 30, 40, cache)
    assert counted.snapshot()["GET"] == 2  # chk-35, and chk-40: the checkpoint just completed is always read
    assert 35 not in plan.keep and 35 in plan.delete_checkpoints
    # chk-40's _metadata replaced by garbage: read again (always, as the one just completed) and not counted
    # as valid (chk-39 becomes the newest valid one; nothing it needs is deleted).
    storage.fs.pipe_file(storage.job_file("chk-40/_metadata"), b"{not json")
    counted.reset()
    plan = subsume(storage, 30, 40, cache)
    assert counted.snapshot()["GET"] == 1 and plan.keep[-1] == 39 and 40 not in plan.keep
    assert storage.checkpoints.latest_valid().metadata.id == 39


def _working_after_one_batch(tmp_path: Path, partitions: int):
    """A run's working folder after batch 0 of a stateful query: a 50-byte delta file per partition."""
    from spark_checkpoint_runtime.working_copy import WorkingCopy

    working = WorkingCopy(str(tmp_path / "work"), "j", "run-1")
    working.create()
    pinned = json.dumps({"batchWatermarkMs": 0, "conf": {"spark.sql.shuffle.partitions": str(partitions)}})
    files = {"metadata": b"{}", "offsets/0": f"v1\n{pinned}\n{{}}".encode(), "commits/0": b"v1\n{}"}
    files.update({f"state/0/{p}/1.delta": b"d" * 50 for p in range(partitions)})
    for target, data in files.items():
        Path(working.file_path(target)).parent.mkdir(parents=True, exist_ok=True)
        Path(working.file_path(target)).write_bytes(data)
    return working


def test_request_goals_a_new_state_file_costs_one_put(counted, tmp_path):
    """A checkpoint's new state files go up with a PUT each: nothing asks first whether they are stored (a
    HEAD, then a LIST for a missing key, was 3 requests per file: 200 partitions made 600). The PUTs go
    several at a time, up to the runtime's bound, not one after another."""
    import threading

    from spark_checkpoint_runtime.snapshot import PARALLEL_PUTS, StoredFiles, capture
    from spark_checkpoint_runtime.snapshot_targets import CheckpointTarget

    working = _working_after_one_batch(tmp_path, partitions=200)
    storage = JobFolder(f"s3://{counted.bucket}/uploads", "j", counted.options)
    target = CheckpointTarget(storage, "run-1", StoredFiles())
    counted.reset()
    counted.latency = 0.01  # a request still in flight when the next one arrives shows the PUTs overlap
    try:
        first = target.upload(capture(working, 1, 0, StoredFiles()), working, threading.Event(), lambda action: None)
    finally:
        counted.latency = 0.0
    spent = counted.snapshot()
    assert spent["PUT"] == 203 and spent["HEAD"] == spent["LIST"] == 0, spent
    assert 1 < counted.max_in_flight <= PARALLEL_PUTS, counted.max_in_flight
    # A file this run uploaded before (a chain switched back to it) is asked for, and stored again when it
    # is gone meanwhile (retention took it): never referenced without being there.
    gone = next(e for e in first.entries if e.target == "state/0/7/1.delta")
    storage.delete_job_files([gone.path])
    again = target.upload(capture(working, 2, 0, StoredFiles()), working, threading.Event(), lambda action: None)
    assert storage.file_size(gone.path) == 50
    assert {e.path for e in again.entries if e.shared} == {e.path for e in first.entries if e.shared}


def test_a_file_gone_before_a_batched_put_fails_the_checkpoint_and_leaves_nothing(counted, tmp_path):
    """Files PUT together: one that vanished from the working folder fails the checkpoint with its name
    (CaptureRaced: the next checkpoint captures again), and none of the checkpoint's new files stay stored."""
    import os
    import threading

    from spark_checkpoint_runtime.snapshot import StoredFiles, capture
    from spark_checkpoint_runtime.snapshot_targets import CheckpointTarget
    from spark_checkpoint_runtime.state_files import CaptureRaced

    working = _working_after_one_batch(tmp_path, partitions=20)
    storage = JobFolder(f"s3://{counted.bucket}/raced", "j", counted.options)
    snap = capture(working, 1, 0, StoredFiles())
    os.remove(snap.sources["state/0/11/1.delta"])
    target = CheckpointTarget(storage, "run-1", StoredFiles())
    with pytest.raises(CaptureRaced, match=r"state/0/11/1\.delta vanished before it was uploaded"):
        target.upload(snap, working, threading.Event(), lambda action: None)
    assert not storage.checkpoints.shared_files(), "a failed checkpoint's new files must not stay"


def test_batched_puts_go_a_chunk_at_a_time_and_stop_between_chunks(counted, tmp_path):
    """The lease and abort checks run before each chunk, so a fenced or aborted upload stops within one chunk;
    a chunk is bounded in files and in bytes (s3fs holds each file it puts in memory)."""
    from spark_checkpoint_runtime.snapshot import PARALLEL_PUTS, PUT_BYTES_IN_FLIGHT, PutFile, _chunks, put_together
    from spark_checkpoint_runtime.working_copy import WorkingCopy

    working = WorkingCopy(str(tmp_path / "work"), "j", "run-1")
    folder = tmp_path / "files"
    folder.mkdir()
    storage = JobFolder(f"s3://{counted.bucket}/chunks", "j", counted.options)
    files = []
    for n in range(2 * PARALLEL_PUTS + 5):
        (folder / f"{n}.bin").write_bytes(b"x" * 10)
        files.append(PutFile(str(folder / f"{n}.bin"), storage.job_file(f"objects/{n}.bin"), f"{n}.bin", 10))
    checks = []

    def before_chunk() -> None:
        checks.append(len(checks))
        if len(checks) == 2:
            raise RuntimeError("fenced: another run holds the job")

    with pytest.raises(RuntimeError, match="fenced"):
        put_together(working, storage.fs, files, before_chunk, "upload")
    assert len(storage.fs.find(storage.job_file("objects"))) == PARALLEL_PUTS, "only the first chunk went up"

    big = PUT_BYTES_IN_FLIGHT // 3
    sizes = [
        [f.size for f in chunk] for chunk in _chunks([PutFile("s", "d", "t", size) for size in (big,) * 4 + (10,)])
    ]
    assert sizes == [[big, big, big], [big, 10]]
    huge = [PutFile("s", "d", "t", PUT_BYTES_IN_FLIGHT * 2)]
    assert [len(chunk) for chunk in _chunks(huge)] == [1], "a file larger than the bound goes alone"


def test_retention_aborts_the_multipart_uploads_a_killed_writer_left(counted):
    """A writer killed mid-upload of a large file leaves a multipart upload: no listing shows it, and its parts
    are billed until it is aborted. Retention aborts those under the job folder once older than the orphan
    grace (a running job's upload is younger), and no other job's."""
    import boto3

    from benchmarks.request_cost import write_checkpoint as small_checkpoint
    from spark_checkpoint_runtime.retention import apply_job_retention, plan_job_retention

    storage = JobFolder(f"s3://{counted.bucket}/uploads", "orders", counted.options)
    small_checkpoint(storage, 1)
    client = boto3.client(
        "s3",
        endpoint_url=counted.options["client_kwargs"]["endpoint_url"],
        aws_access_key_id=counted.options["key"],
        aws_secret_access_key=counted.options["secret"],
        region_name="us-east-1",
    )

    def begin(key: str) -> None:
        upload = client.create_multipart_upload(Bucket=counted.bucket, Key=key)
        client.upload_part(Bucket=counted.bucket, Key=key, UploadId=upload["UploadId"], PartNumber=1, Body=b"x" * 1024)

    ours, theirs = "uploads/orders/shared/run-1/000012.sst", "uploads/orders-2/shared/run-1/000012.sst"
    begin(ours)
    begin(theirs)  # another job whose name starts with this one's
    # Ages count from the store's initiation time (moto reports a fixed one, so "now" is set from it).
    listed = client.list_multipart_uploads(Bucket=counted.bucket, Prefix=ours)["Uploads"]
    initiated = listed[0]["Initiated"].timestamp()
    assert plan_job_retention(storage, num_retained=1, orphan_grace=3600, now=initiated + 60).abort_uploads == []
    plan = plan_job_retention(storage, num_retained=1, orphan_grace=3600, now=initiated + 3601)
    assert [upload.path for upload in plan.abort_uploads] == [f"{counted.bucket}/{ours}"]
    assert plan.as_report(dry_run=False)["deleted"]["pending_uploads"] == [f"{counted.bucket}/{ours}"]
    apply_job_retention(storage, plan)
    left = client.list_multipart_uploads(Bucket=counted.bucket, Prefix="uploads/").get("Uploads", [])
    assert [upload["Key"] for upload in left] == [theirs]
    local = JobFolder("/tmp/no-such-root", "orders")
    assert local.pending_uploads(0, time.time()) == [], "stores without multipart uploads have none"


def test_request_goals_a_sink_commit_on_s3_copies_its_parts_together_and_deletes_them_in_batches(counted):
    """At 200 partitions a batch has 200 part files: one copy each, run together, and one delete per
    ``MOVES_AT_ONCE`` of them (one at a time, copy then delete, took longer than a 10 s checkpoint interval)."""
    from spark_checkpoint_runtime.layout import Lineage, StagedOutput
    from spark_checkpoint_runtime.sinks import MOVES_AT_ONCE, ParquetSink

    root = f"s3://{counted.bucket}/sink-commit"
    sink = ParquetSink(root, counted.options)
    parts = [f"part-{n:05d}.parquet" for n in range(250)]
    for batch_id in (3, 4):
        sink.fs.pipe({f"{sink.staging}/r1/batch-{batch_id}/{name}": f"{batch_id}:{name}".encode() for name in parts})
    counted.reset()
    sink.commit(StagedOutput(7, "r1", (3, 4)))
    spent = counted.snapshot()
    assert spent["COPY"] == 500 and spent["DELETE"] == 0, spent
    assert spent["DELETE_BATCH"] <= 2 * (-(-250 // MOVES_AT_ONCE)) + 4, spent  # the parts, then each batch's folders
    published = {p.rsplit("/", 1)[1] for p in sink.fs.ls(sink.path, detail=False) if "/c7-" in p}
    assert published == {f"c7-b{b}-{name}" for b in (3, 4) for name in parts}
    sink.recover(StagedOutput(7, "r1", (3, 4)), Lineage.of([(1, 7)]))  # a repeated commit publishes nothing twice
    assert {p.rsplit("/", 1)[1] for p in sink.fs.ls(sink.path, detail=False) if "/c7-" in p} == published


def test_set_aside_output_on_s3_is_pruned_under_one_lease_confirmation(counted):
    """The Parquet sink on S3 prunes aborted batches and rolled-back output past the retention: the run's lease
    is confirmed once, before the first delete, and the emptied run prefixes need no request of their own."""
    import time

    from spark_checkpoint_runtime.sinks import ParquetSink

    sink = ParquetSink(f"s3://{counted.bucket}/prune", counted.options)
    for folder in ("_aborted/r1/batch-3", "_aborted/r2/batch-9", "_rolled_back/restore-4"):
        sink.fs.pipe_file(f"{sink.path}/{folder}/c1-b0-part-0.parquet", b"rows")
    sink.fs.pipe_file(f"{sink.path}/c5-b2-part-0.parquet", b"published")
    confirmed = []
    assert sink.prune(7 * 86400, before_delete=lambda: confirmed.append(True)) == 0
    assert confirmed == [], "nothing due: no confirmation (a LIST of the lease folder)"
    later = time.time() + 8 * 86400
    assert sink.prune(7 * 86400, now=later, before_delete=lambda: confirmed.append(True)) == 3
    assert confirmed == [True]
    assert sink.fs.find(sink.path) == [f"{sink.path}/c5-b2-part-0.parquet"], "published output is never pruned"


def test_a_sink_on_a_store_whose_rm_takes_one_path_moves_each_file(monkeypatch):
    """HDFS through pyarrow (and webhdfs) have no rename fsspec uses here, and an ``rm`` of one path only: the
    copies still go by the chunk, the deletes one by one."""
    from fsspec.implementations.memory import MemoryFileSystem

    from spark_checkpoint_runtime.layout import StagedOutput
    from spark_checkpoint_runtime.sinks import ParquetSink

    rm = MemoryFileSystem.rm

    def one_path_only(self, path, *args, **kwargs):
        if not isinstance(path, str):
            raise TypeError(f"expected string or bytes-like object, got {type(path).__name__!r}")
        return rm(self, path, *args, **kwargs)

    monkeypatch.setattr(MemoryFileSystem, "rm", one_path_only)
    sink = ParquetSink("memory://one-path-rm/out")
    assert not getattr(sink.fs, "async_impl", False)
    parts = [f"part-{n:05d}.parquet" for n in range(5)]
    sink.fs.pipe({f"{sink.staging}/r1/batch-2/{name}": name.encode() for name in parts})
    sink.commit(StagedOutput(4, "r1", (2,)))
    published = {p.rsplit("/", 1)[1]: sink.fs.cat_file(p) for p in sink.fs.ls(sink.path, detail=False) if "/c4-" in p}
    assert published == {f"c4-b2-{name}": name.encode() for name in parts}
    assert not sink.fs.exists(f"{sink.staging}/r1/batch-2")


def test_control_housekeeping_on_s3_is_one_listing_and_prunes_what_is_settled(counted):
    """A run's start prunes ``_control/``: one LIST for every kind of file (it was one per kind, two for a
    missing folder), and heartbeats are read only when an old unanswered request needs them."""
    from spark_checkpoint_runtime.layout import ControlChannel

    control = ControlChannel(JobFolder(f"s3://{counted.bucket}/housekeeping", "orders", counted.options))
    control.request("answered", "savepoint")
    control.respond("answered", {"status": "completed"})
    control.write_run_report("run-a", {"status": "finished"})
    control.heartbeat("run-b-id", "run-b")
    counted.reset()
    assert control.prune(7 * 86400) == 0  # everything is fresh: nothing read, nothing deleted
    assert counted.snapshot() == {**counted.snapshot(), "LIST": 1, "total": 1}

    control.request("for-ended-run", "stop", "run-a")  # run-a reported: nothing will answer it
    control.request("waiting", "stop", "run-b")  # run-b is alive
    later = int(time.time() * 1000) + 8 * 86400 * 1000  # a week on: the store's times are old by then
    assert control.prune(7 * 86400, now_ms_=later) == 5  # the answered pair, the report, for-ended-run, the beat
    left = sorted(p.split("/_control/", 1)[1] for p in control.fs.find(control.base))
    assert left == ["requests/waiting.json"]  # run-b's heartbeat was old too, but a request for it stays


def test_request_goals_a_restart_settles_with_one_listing_of_the_job_folder(counted, tmp_path):
    """Settling a restart's plan under the lease (a newer checkpoint? a rewind? the next id?) lists the job
    folder once: it was four listings, a HEAD per ``_metadata`` looked up twice, and two more listings for a
    missing ``savepoints/``. No bucket is probed on the way (fsspec's makedirs on S3 is a request)."""
    from spark_checkpoint_runtime.lease import JobLease
    from spark_checkpoint_runtime.options import options_from_mapping
    from spark_checkpoint_runtime.run.plan import RunPlanner
    from spark_checkpoint_runtime.sinks import ParquetSink
    from tests.support.helpers import write_checkpoint

    root = f"s3://{counted.bucket}/settle"
    storage = JobFolder(root, "orders", counted.options)
    for checkpoint_id in (1, 2, 3):
        write_checkpoint(storage, checkpoint_id, [f"state/0/{p}/{checkpoint_id}.delta" for p in range(4)])
    storage.ids.mark_completed(1, "r1")
    previous = JobLease(storage, "r1", None, 30.0)
    previous.acquire()
    previous.release()
    options = options_from_mapping(
        {"job_name": "orders", "checkpoint_root": root, "pipeline": "m:f", "sink": f"parquet:{tmp_path / 'out'}"}
    )
    planner = RunPlanner(storage, options, "r2")
    assert planner.resolve().metadata.id == 3
    lease = JobLease(storage, "r2", None, 30.0)
    counted.reset()
    lease.acquire()
    try:
        acquired = counted.snapshot()
        counted.reset()
        plan = planner.settle({}, None, ParquetSink(str(tmp_path / "out")))
        settled = counted.snapshot()
    finally:
        lease.release()
    assert (plan.point.metadata.id, plan.rewind, plan.next_id) == (3, False, 4)
    # The lease folder once (old grants pruned from that listing), the grant and the heartbeat: no bucket HEAD.
    assert acquired == {**acquired, "LIST": 1, "PUT": 2, "HEAD": 0}, acquired
    # The job folder and _ids/ once each, chk-3/_metadata read back (unchanged?) and looked up (a rewind?).
    assert settled == {**settled, "LIST": 2, "GET": 1, "HEAD": 1, "total": 4}, settled


def test_request_goals_a_restored_runs_first_checkpoint_does_not_ask_the_size_of_the_segments_it_reuses(
    counted, tmp_path
):
    """Compaction weighs each reused segment's live ranges against its size. A restored run knows those sizes
    from the listing that validated its restore point (segments never change), so its first checkpoint sends
    no HEAD per segment; it did, one per segment, on every restart."""
    import threading

    from spark_checkpoint_runtime.file_merging import FileMerging
    from spark_checkpoint_runtime.restore import resolve_restore_point
    from spark_checkpoint_runtime.run.plan import RunPlan
    from spark_checkpoint_runtime.snapshot import StoredFiles, capture
    from spark_checkpoint_runtime.snapshot_targets import CheckpointTarget
    from tests.support.helpers import checkpoint_metadata

    working = _working_after_one_batch(tmp_path, partitions=8)
    storage = JobFolder(f"s3://{counted.bucket}/restored-sizes", "j", counted.options)
    merging = FileMerging.for_storage("auto", 64, storage.fs)
    uploaded = CheckpointTarget(storage, "run-1", StoredFiles(), merging).upload(
        capture(working, 1, 0, StoredFiles()), working, threading.Event(), lambda action: None
    )
    storage.checkpoints.write_metadata(checkpoint_metadata(1, uploaded.entries, job="j"))
    segments = {e.path for e in uploaded.entries if e.offset is not None}
    assert segments, "the files went into a segment"

    point = resolve_restore_point(storage, "latest")
    assert dict(point.snapshot.listed_sizes) == {p: storage.file_size(p) for p in segments}
    plan = RunPlan(point=point, restored_operators=None, history=point.metadata.history, rewind=False, next_id=2)
    counted.reset()
    dead = CheckpointTarget(storage, "run-2", plan.stored, merging).compaction.mostly_dead(point.metadata.files)
    assert dead == set() and counted.snapshot()["total"] == 0, counted.snapshot()


def test_request_goals_validating_a_checkpoint_that_references_many_runs_lists_shared_once(counted):
    """A job restarted often keeps referencing older runs' segments: validating its newest checkpoint lists
    ``shared/`` once, not once per run it references (a restart used to add a LIST to every later restart)."""
    from spark_checkpoint_runtime.layout import FileEntry
    from tests.support.helpers import checkpoint_metadata

    storage = JobFolder(f"s3://{counted.bucket}/many-runs", "j", counted.options)
    files = []
    for run in range(1, 8):
        relative = storage.checkpoints.shared_relative_file(f"run-{run}", f"state/0/{run}/1.delta")
        storage.fs.pipe_file(storage.job_file(relative), b"d" * 10)
        files.append(FileEntry(relative, f"state/0/{run}/1.delta", 10, True))
    storage.checkpoints.write_metadata(checkpoint_metadata(1, files, job="j"))
    counted.reset()
    assert storage.checkpoints.latest_valid().metadata.id == 1
    # The job folder, shared/ and chk-1/ (the files it owns): three listings; its _metadata: one GET.
    assert counted.snapshot() == {**counted.snapshot(), "LIST": 3, "GET": 1, "total": 4}, counted.snapshot()
    storage.fs.rm(storage.job_file(files[3].path))  # one run's file gone: still found out
    with pytest.raises(NoValidCheckpoint, match="run-4"):
        storage.checkpoints.latest_valid()
