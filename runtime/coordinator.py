"""The checkpoint coordinator: decides when to checkpoint, runs each checkpoint, completes or aborts it.

It mirrors Flink's split of roles:

- ``RequestDecider`` applies the interval and min pause and ``FailureManager`` counts failures against
  ``tolerable-failed-checkpoints`` (both in ``checkpoint_policy``);
- a ``PendingCheckpoint`` becomes a completed snapshot when its upload finishes and ``_metadata`` is
  written, or it is aborted (failure or ``checkpoint-timeout``);
- where it goes (the run's checkpoints or a savepoint folder) is its ``SnapshotTarget``.

Batches are Spark's unit of progress, so a checkpoint is taken at the first batch boundary after it is
due. The coordinator runs on its own thread and uploads on another, so batches never wait for storage.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from spark_checkpoint_runtime.checkpoint_policy import CheckpointConfig, FailureManager, RequestDecider
from spark_checkpoint_runtime.durations import format_bytes, format_duration
from spark_checkpoint_runtime.errors import LeaseLost
from spark_checkpoint_runtime.layout import (
    KEEP_RECORDS,
    CheckpointMetadata,
    JobFolder,
    Lineage,
    StagedOutput,
    now_ms,
)
from spark_checkpoint_runtime.lease import UNFENCED, Fence
from spark_checkpoint_runtime.retention import MetadataCache, subsume
from spark_checkpoint_runtime.savepoint_freeze import SavepointFreezes
from spark_checkpoint_runtime.snapshot import Capture, StoredFiles, Upload, capture
from spark_checkpoint_runtime.snapshot_targets import CheckpointTarget, SnapshotTarget
from spark_checkpoint_runtime.state_files import CaptureRaced
from spark_checkpoint_runtime.thread_priority import lower_this_thread, start_shared_threads_first
from spark_checkpoint_runtime.working_copy import WorkingCopy

log = logging.getLogger(__name__)

MAX_CONSECUTIVE_DECLINES = 5


class IdTaken(RuntimeError):
    """The id a snapshot was given is reserved already (a checkpoint failure: the next one gets a new id)."""


class StagedOutputs(Protocol):
    """What a snapshot publishes when it completes: the run's staged output up to its batch (``RunState``)."""

    def staged_for(self, checkpoint_id: int, batch_id: int) -> StagedOutput | None: ...


class _NothingStaged:
    def staged_for(self, checkpoint_id: int, batch_id: int) -> StagedOutput | None:
        return None


@dataclass
class SnapshotRequest:
    """A snapshot asked for now (a run's final checkpoint, or a savepoint), ignoring interval and min pause.

    ``target`` is where it goes; None means the run's checkpoints. ``savepoint``: the savepoint this
    checkpoint comes before, whose files are frozen together with the checkpoint's (``prepared``).
    """

    batch_id: int
    target: SnapshotTarget | None = None
    done: threading.Event = field(default_factory=threading.Event)
    result: CheckpointMetadata | None = None
    reason: str | None = None
    savepoint: SnapshotRequest | None = None
    prepared: Capture | None = None
    abandoned: bool = False  # its caller stopped waiting: nothing may be prepared for it any more


@dataclass
class PendingCheckpoint:
    """A triggered checkpoint (or savepoint) whose files are uploading."""

    id: int
    batch_id: int
    trigger_ms: int
    started: float
    capture: Capture
    capture_ms: int
    future: Future[Upload]
    target: SnapshotTarget
    aborted: threading.Event = field(default_factory=threading.Event)
    request: SnapshotRequest | None = None

    @property
    def kind(self) -> str:
        return self.target.kind


class CheckpointCoordinator:
    """Takes numbered checkpoints of one run's working folder into the checkpoint root.

    ``on_completed`` is called with each completed checkpoint's metadata before retention runs (this is
    where two-phase sinks publish); an exception there fails the job. Every snapshot records its history
    (``history``, the restored snapshot's, extended by this run's ids) and the staged output it publishes
    (``staged.staged_for(checkpoint_id, batch_id)``), both written into ``_metadata`` before anything is
    published.
    ``fence`` (the run's ``JobLease``) is asked before every durable write and raises ``LeaseLost`` once
    another run holds the job; that fails the job at once (it is not a checkpoint failure to tolerate).
    """

    def __init__(
        self,
        storage: JobFolder,
        working: WorkingCopy,
        config: CheckpointConfig,
        *,
        run_id: str,
        next_id: int,
        stored: StoredFiles,
        fingerprint: dict[str, Any],
        restored_from: dict[str, Any] | None,
        spark_version: str | None,
        on_completed: Callable[[CheckpointMetadata], None],
        history: Lineage = Lineage(),
        staged: StagedOutputs = _NothingStaged(),
        fence: Fence = UNFENCED,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.storage = storage
        self.working = working
        self.config = config
        self.run_id = run_id
        self.stored = stored
        self.checkpoints = CheckpointTarget(storage, run_id, stored, config.merging)
        self.retained_metadata = MetadataCache()  # retention after each checkpoint reads only the new _metadata
        self.fingerprint = fingerprint
        self.restored_from = restored_from
        self.spark_version = spark_version
        self.on_completed = on_completed
        self.history = history
        self.staged = staged
        self.first_id = next_id  # this run's snapshots extend the restored history from here
        self.fence = fence
        self.clock = clock
        self.decider = RequestDecider(config.interval, config.min_pause)
        self.failures = FailureManager(config.tolerable_failures)
        self.declines = 0  # consecutive captures that raced Spark's maintenance
        self.latest: CheckpointMetadata | None = None
        self.covered_batch = -1  # the newest batch a completed checkpoint (not a savepoint) of this run covers
        self.completed: list[int] = []
        self._next_id = next_id
        self._reserved: list[int] = []  # ids this run reserved in the id record, oldest first
        self._marked = False  # this run recorded that the job has a completed checkpoint
        self._pending: PendingCheckpoint | None = None
        self._latest_batch = -1
        self._requests: list[SnapshotRequest] = []
        self._fatal: str | None = None
        self._changed = threading.Condition()
        self.freezes = SavepointFreezes(working, stored, clock, self._changed)
        self._stop = threading.Event()
        self._uploader = ThreadPoolExecutor(
            max_workers=1,
            thread_name_prefix="checkpoint-upload",
            initializer=lower_this_thread,
            initargs=(config.niceness,),
        )
        self._thread = threading.Thread(target=self._run, name="checkpoint-coordinator", daemon=True)

    # --- called by the job -------------------------------------------------------------------------
    def start(self) -> None:
        """Start the coordinator's thread; it and the upload thread run ``config.niceness`` nice steps below the
        job's CPU priority."""
        start_shared_threads_first()  # before a lowered thread could be the one to start it
        self._thread.start()

    def batch_completed(self, batch_id: int) -> None:
        """A batch finished and its commit entry is written (from the query listener)."""
        with self._changed:
            self._latest_batch = max(self._latest_batch, batch_id)
            self._changed.notify_all()

    @property
    def fatal(self) -> str | None:
        """Why the job must fail (tolerance exceeded, a sink commit failed), or None."""
        return self._fatal

    @property
    def next_checkpoint_id(self) -> int:
        """The id the next triggered checkpoint gets (at-least-once sinks tag published output with it)."""
        return self._next_id

    def checkpoint_now(self, batch_id: int, timeout: float | None = None) -> CheckpointMetadata | None:
        """Checkpoint ``batch_id`` now (ignoring interval and min pause) and wait for it.

        Returns the checkpoint covering it, or None if it failed (``fatal`` says why when the tolerance is
        exceeded). Used for the final checkpoint of a run.
        """
        return self.snapshot_now(SnapshotRequest(batch_id), timeout)

    def savepoint_now(self, batch_id: int, target: SnapshotTarget, timeout: float | None = None) -> SnapshotRequest:
        """Take a savepoint of ``batch_id`` into ``target`` and wait; the returned request says how it went.

        A checkpoint of the same batch comes first, and it publishes the output staged up to the batch. So a
        savepoint publishes nothing itself, and "latest" always covers what any savepoint covers. Were the
        savepoint to publish, a restore from an older checkpoint would set that output aside and publish
        it again, and a downstream reader would count it twice.
        """
        request = SnapshotRequest(batch_id, target)
        try:
            checkpoint = SnapshotRequest(batch_id, savepoint=request)
            if self.snapshot_now(checkpoint, timeout) is None or self.covered_batch < batch_id:
                with self._changed:
                    request.reason = (
                        f"the checkpoint of batch {batch_id} before it did not complete ({self._fatal or 'it failed'})"
                    )
                    request.done.set()
                return request
            self.snapshot_now(request, timeout)
            return request
        finally:
            with self._changed:
                request.abandoned = True
            self.freezes.release(request)  # frozen with the checkpoint but never uploaded

    def snapshot_now(self, request: SnapshotRequest, timeout: float | None = None) -> CheckpointMetadata | None:
        """Queue ``request`` ahead of periodic checkpoints and wait for its result (None on failure)."""
        deadline = self.clock() + (timeout if timeout is not None else self.config.timeout * 2)
        with self._changed:
            self._latest_batch = max(self._latest_batch, request.batch_id)
            self._requests.append(request)
            self._changed.notify_all()
            while not request.done.is_set():
                if self._fatal:
                    request.reason = request.reason or self._fatal
                    break
                if self.clock() > deadline:
                    request.reason = request.reason or "timed out waiting for the snapshot"
                    break
                self._changed.wait(0.1)
            if request in self._requests and not request.done.is_set():
                self._requests.remove(request)
            return request.result

    def shutdown(self) -> None:
        """Stop the coordinator; a checkpoint still uploading is aborted and never completes."""
        self._stop.set()
        self._wake()
        self._thread.join(timeout=30)
        pending = self._pending
        if pending is not None:
            pending.aborted.set()
            self._discard(pending)
        self._uploader.shutdown(wait=False, cancel_futures=True)

    # --- the coordinator thread --------------------------------------------------------------------
    def _wake(self, *_: Any) -> None:
        with self._changed:
            self._changed.notify_all()

    def _run(self) -> None:
        lower_this_thread(self.config.niceness)  # a checkpoint takes the CPU the batches leave (see thread_priority)
        while not self._stop.is_set():
            try:
                self._step()
            except Exception as exc:  # a bug here must fail the job, not silently stop checkpointing
                log.exception("checkpoint coordinator failed")
                self._set_fatal(f"checkpoint coordinator failed: {exc}")
                return
            with self._changed:
                pending = self._pending
                # Wait only with nothing to do: an upload that just ended is finished now, and a request
                # queued while this thread was busy (its notify came before this wait) is served at once.
                waiting_request = pending is None and bool(self._requests)
                if not waiting_request and (pending is None or not pending.future.done()):
                    self._changed.wait(0.05)

    def _step(self) -> None:
        now = self.clock()
        pending = self._pending
        if pending is not None:
            if pending.future.done():
                self._finish(pending)
            elif now - pending.started > self.config.timeout:
                pending.aborted.set()
                self._fail(
                    pending.id,
                    pending.batch_id,
                    f"expired after {format_duration(self.config.timeout)}",
                    pending.request,
                    pending.target,
                )
                self._discard(pending)
            return
        if self._fatal:
            return  # the job is failing (tolerance exceeded, lease lost): take nothing more
        with self._changed:
            latest = self._latest_batch
            request = self._requests[0] if self._requests else None
        if request is not None:
            # A savepoint's checkpoint takes the newest batch, where its savepoint is frozen too; when nothing is
            # newer than what is covered, the savepoint is frozen at once (Spark still has the newest batch).
            newer = request.savepoint is not None and latest > self.covered_batch
            if request.target is None and request.batch_id <= self.covered_batch and not newer:
                if request.savepoint is not None:
                    self.freezes.freeze(request.savepoint, self.covered_batch)
                self._resolve(request, self.latest, None)  # already covered: nothing to take
            else:
                prepared = self.freezes.take(request)
                batch_id = prepared.batch_id if prepared is not None else self._batch_for(request, latest)
                self._trigger(batch_id, request, prepared)
        elif latest > self.covered_batch and self.decider.due(now):
            self._trigger(latest)

    def _batch_for(self, request: SnapshotRequest, latest: int) -> int:
        """The batch a requested snapshot captures: the newest it may.

        While the query runs on, Spark keeps only a short history in the working folder (a run sets
        ``spark.sql.streaming.minBatchesToRetain`` to 10), so the batch a request named may be gone once the
        snapshot queued behind an upload is taken. A checkpoint may cover more than was asked for. A savepoint
        may cover no more than the checkpoints do (it publishes nothing), so it takes the covered batch, which
        the checkpoint just before it made.
        """
        if request.target is None:
            return max(request.batch_id, latest)
        return max(request.batch_id, self.covered_batch)

    def _resolve(self, request: SnapshotRequest, result: CheckpointMetadata | None, reason: str | None) -> None:
        with self._changed:
            request.result, request.reason = result, reason
            if request in self._requests:
                self._requests.remove(request)
            request.done.set()
            self._changed.notify_all()

    def _target_of(self, request: SnapshotRequest | None) -> SnapshotTarget:
        return request.target if request is not None and request.target is not None else self.checkpoints

    def _trigger(self, batch_id: int, request: SnapshotRequest | None = None, prepared: Capture | None = None) -> None:
        """Capture ``batch_id`` (or take ``prepared``, frozen earlier for a savepoint) and start its upload."""
        checkpoint_id = self._next_id
        self._next_id += 1
        started = self.clock()
        self.decider.triggered(started)
        trigger_ms = now_ms()
        target = self._target_of(request)
        try:
            if prepared is not None:
                snap = replace(prepared, checkpoint_id=checkpoint_id)
            else:
                snap = capture(self.working, checkpoint_id, batch_id, self.stored, reuse=target.incremental)
        except CaptureRaced as exc:
            self.working.release(f"chk-{checkpoint_id}")
            self._decline(checkpoint_id, batch_id, str(exc), request)
            return
        except Exception as exc:
            self.working.release(f"chk-{checkpoint_id}")
            self._fail(checkpoint_id, batch_id, f"capture failed: {exc}", request, target)
            return
        capture_ms = int((self.clock() - started) * 1000) if prepared is None else prepared.took_ms or 0
        if request is not None and request.savepoint is not None:
            # Right after the checkpoint's capture, before its upload starts: the batch is still there (the
            # upload's time is when the query runs on and Spark purges), and the checkpoint cannot complete yet.
            self.freezes.freeze(request.savepoint, batch_id)
        aborted = threading.Event()
        future = self._uploader.submit(self._reserve_and_upload, checkpoint_id, target, snap, aborted)
        self._pending = PendingCheckpoint(
            checkpoint_id, batch_id, trigger_ms, started, snap, capture_ms, future, target, aborted, request
        )
        future.add_done_callback(self._wake)  # complete the checkpoint as soon as its upload ends
        log.debug("triggered %s %d for batch %d", self._pending.kind, checkpoint_id, batch_id)

    def _reserve_and_upload(
        self, snapshot_id: int, target: SnapshotTarget, snap: Capture, aborted: threading.Event
    ) -> Upload:
        """On the upload thread: reserve the id in the job's id record, then upload (ids are never reused)."""
        self.fence.check(f"reserving id {snapshot_id}")
        if not self.storage.ids.reserve(snapshot_id, kind=target.kind, run_id=self.run_id, target=target.location):
            raise IdTaken(
                f"id {snapshot_id} is reserved already in {self.storage.location} (another run took it); this "
                "snapshot fails, counting against --tolerable-failed-checkpoints, and the next one takes a higher id"
            )
        self._reserved.append(snapshot_id)
        if len(self._reserved) > KEEP_RECORDS:
            # The highest record alone sets the next id: this run's older ones go, one per snapshot.
            self.storage.ids.forget(self._reserved[:-KEEP_RECORDS])
            del self._reserved[:-KEEP_RECORDS]
        return target.upload(snap, self.working, aborted, self.fence.check)

    def _mark_completed(self, meta: CheckpointMetadata) -> None:
        """Record once per run that the job has a completed checkpoint (a later run never starts empty)."""
        if self._marked:
            return
        try:
            self.storage.ids.mark_completed(meta.id, self.run_id)
            self._marked = True
        except Exception:  # tried again after the next checkpoint
            log.warning("could not record that checkpoint %d completed", meta.id, exc_info=True)

    def _finish(self, pending: PendingCheckpoint) -> None:
        target = pending.target
        try:
            result = pending.future.result()
            meta = self._metadata(pending, result)
            self.fence.confirm(f"writing {pending.kind} {pending.id}")
            target.write_metadata(meta)
            self._fence_written(pending)
        except LeaseLost as exc:
            # Leave the folder alone: after a takeover the new holder may use the same id. Only a _metadata
            # this run wrote is taken back; the new holder's retention removes the rest.
            self._pending = None
            self.working.release(pending.capture.frozen_as)
            target.withdraw(pending.id)
            self._set_fatal(str(exc))
            if pending.request is not None:
                self._resolve(pending.request, None, str(exc))
            return
        except CaptureRaced as exc:
            self._discard(pending)
            self._decline(pending.id, pending.batch_id, str(exc), pending.request)
            return
        except Exception as exc:
            self._fail(pending.id, pending.batch_id, f"{type(exc).__name__}: {exc}", pending.request, pending.target)
            self._discard(pending)
            return
        self._pending = None
        self.working.release(pending.capture.frozen_as)
        if target.subsumes:
            self.stored.replace(meta.files)  # savepoints share nothing with later checkpoints
            self._mark_completed(meta)
        self.failures.succeeded()
        self.declines = 0
        self.decider.finished(self.clock())
        log.info(
            "Completed %s %d for job %r (batch %d): wrote %s of %s total (state %s) in %s%s",
            meta.kind,
            meta.id,
            meta.job_name,
            meta.batch_id,
            format_bytes(meta.bytes_written),
            format_bytes(meta.total_bytes),
            format_bytes(meta.state_bytes),
            format_duration(meta.durations_ms["total"] / 1000),
            target.where,
        )
        failed_after: str | None = None
        try:
            self.on_completed(meta)
            if target.subsumes:
                self.fence.confirm(f"retention after checkpoint {meta.id}")
        except Exception as exc:
            log.exception("after %s %d completed", meta.kind, meta.id)
            failed_after = f"after {meta.kind} {meta.id} completed: {type(exc).__name__}: {exc}"
            self._set_fatal(failed_after)
        else:
            if target.subsumes:
                self._retain(meta.id)
        with self._changed:
            if target.subsumes:
                self.latest = meta
                self.completed.append(meta.id)
                self.covered_batch = max(self.covered_batch, meta.batch_id)
            self._changed.notify_all()
        if pending.request is not None:
            # The snapshot is durable either way (a restore from it publishes what it names), but whoever waits
            # on it must not take a failed publish for success: the run then fails instead of exiting 0.
            self._resolve(pending.request, None if failed_after else meta, failed_after)

    def _retain(self, completed_id: int) -> None:
        """Subsume older checkpoints. A failed delete is not a failed checkpoint: what it left is garbage
        (``_metadata`` goes first), and the next retention deletes it.

        Retention's listing also shows whether a shared file this run reuses went missing (deleted behind
        the job's back): then the checkpoint just completed is damaged, and the next one stores the file
        again instead of referencing it.
        """
        try:
            plan = subsume(self.storage, self.config.num_retained, completed_id, self.retained_metadata)
            if completed_id in plan.damaged:
                log.error(
                    "chk-%d lists shared files that are gone (%s); the next checkpoint stores them again",
                    completed_id,
                    plan.damaged[completed_id],
                )
                self.stored.forget(plan.missing)
        except Exception as exc:
            log.warning(
                "retention after checkpoint %d failed (%s: %s); leftovers go at the next one",
                completed_id,
                type(exc).__name__,
                exc,
            )

    def _fence_written(self, pending: PendingCheckpoint) -> None:
        """Confirm the lease again after ``_metadata``: a run frozen between its check and its write (and taken
        over meanwhile) takes back what it wrote, so only the new holder's snapshots count."""
        try:
            self.fence.confirm(f"keeping {pending.kind} {pending.id}")
        except LeaseLost:
            log.error("withdrawing %s %d: written after this run lost the job", pending.kind, pending.id)
            raise

    def _metadata(self, pending: PendingCheckpoint, result: Upload) -> CheckpointMetadata:
        completion = now_ms()
        staged = self.staged.staged_for(pending.id, pending.batch_id)
        elapsed_ms = int((self.clock() - pending.started) * 1000)
        # A savepoint frozen ahead of its turn was captured before it was triggered: all its elapsed time uploads.
        upload_ms = max(0, elapsed_ms - (pending.capture_ms if pending.capture.took_ms is None else 0))
        return CheckpointMetadata(
            id=pending.id,
            kind=pending.kind,
            job_name=self.storage.job_name,
            run_id=self.run_id,
            batch_id=pending.batch_id,
            trigger_timestamp_ms=pending.trigger_ms,
            completion_timestamp_ms=completion,
            checkpointing_mode=self.config.mode,
            files=result.entries,
            state_bytes=sum(e.size for e in result.entries if e.target.startswith("state/")),
            bytes_written=result.bytes_written,
            durations_ms={
                "capture": pending.capture_ms,
                "upload": upload_ms,
                "total": pending.capture_ms + upload_ms,
            },
            source_offsets=pending.capture.source_offsets,
            restored_from=self.restored_from,
            fingerprint={**self.fingerprint, "pinned_confs": pending.capture.pinned_confs},
            spark_version=self.spark_version,
            lineage=self.history.with_range(self.first_id, pending.id).to_json(),
            staged_output=staged.to_json() if staged is not None else None,
        )

    def _discard(self, pending: PendingCheckpoint) -> None:
        self._pending = None
        try:
            pending.target.discard(pending.id)
        except Exception:  # leftovers have no _metadata: never mistaken for a snapshot; retention removes them
            log.warning("could not clean up failed %s %d", pending.kind, pending.id, exc_info=True)
        self.working.release(pending.capture.frozen_as)

    def _decline(self, checkpoint_id: int, batch_id: int, reason: str, request: SnapshotRequest | None) -> None:
        """Spark's maintenance raced the capture: not a failure of the job's storage, so it is taken again
        (at the next batch, or at once for a requested snapshot) unless it keeps happening."""
        self.declines += 1
        if self.declines > MAX_CONSECUTIVE_DECLINES:
            target = self._target_of(request)
            reason = f"{reason}; declined {self.declines} times in a row"
            self._fail(checkpoint_id, batch_id, reason, request, target)
            return
        log.warning("Checkpoint %d (batch %d) declined: %s; it is taken again", checkpoint_id, batch_id, reason)
        self.decider.finished(self.clock())

    def _fail(
        self,
        checkpoint_id: int,
        batch_id: int,
        reason: str,
        request: SnapshotRequest | None,
        target: SnapshotTarget,
    ) -> None:
        log.warning("%s %d (batch %d) failed: %s", target.kind.capitalize(), checkpoint_id, batch_id, reason)
        self.decider.finished(self.clock())
        # Only the run's own checkpoints count against the tolerance: a failed savepoint fails its request.
        fatal = self.failures.failed(checkpoint_id, reason) if target.subsumes else None
        with self._changed:
            if fatal:
                self._fatal = self._fatal or fatal
            self._changed.notify_all()
        if request is not None:
            self._resolve(request, None, reason)

    def _set_fatal(self, reason: str) -> None:
        with self._changed:
            self._fatal = self._fatal or reason
            self._changed.notify_all()
