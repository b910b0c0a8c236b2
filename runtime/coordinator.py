"""The checkpoint coordinator: decides when to checkpoint, runs each checkpoint, completes or aborts it.

It mirrors Flink's split of roles:

- ``RequestDecider`` applies the interval and min pause (one checkpoint at a time, as in Flink's default
  ``max-concurrent-checkpoints: 1``);
- a ``PendingCheckpoint`` becomes a completed checkpoint when its upload finishes and ``_metadata`` is
  written, or it is aborted (failure or ``checkpoint-timeout``);
- ``FailureManager`` counts consecutive failed checkpoints against ``tolerable-failed-checkpoints``.

Batches are Spark's unit of progress, so a checkpoint is taken at the first batch boundary after it is
due. The coordinator runs on its own thread and uploads on another, so batches never wait for storage.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from runtime.durations import format_bytes, format_duration
from runtime.layout import CheckpointMetadata, CheckpointStorage, now_ms
from runtime.retention import subsume
from runtime.snapshot import Capture, StoredFiles, Upload, capture, upload
from runtime.working_copy import WorkingCopy

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CheckpointConfig:
    """Flink's checkpoint options, in seconds."""

    interval: float = 10.0
    min_pause: float = 0.0
    timeout: float = 600.0
    tolerable_failures: int = 0
    num_retained: int = 3
    mode: str = "exactly-once"


class RequestDecider:
    """Is a periodic checkpoint due? Interval since the last trigger, min pause since the last completion."""

    def __init__(self, interval: float, min_pause: float):
        self.interval = interval
        self.min_pause = min_pause
        self.last_trigger: float | None = None
        self.last_completion: float | None = None

    def due(self, now: float) -> bool:
        if self.last_trigger is not None and now - self.last_trigger < self.interval:
            return False
        return self.last_completion is None or now - self.last_completion >= self.min_pause

    def triggered(self, now: float) -> None:
        self.last_trigger = now

    def finished(self, now: float) -> None:
        self.last_completion = now


class FailureManager:
    """Counts consecutive failed checkpoints; past the tolerable number the job must fail."""

    def __init__(self, tolerable: int):
        self.tolerable = tolerable
        self.consecutive = 0
        self.total = 0

    def failed(self, checkpoint_id: int, reason: str) -> str | None:
        """Record a failure; return the job's failure reason once the tolerance is exceeded."""
        self.consecutive += 1
        self.total += 1
        if self.consecutive > self.tolerable:
            return (
                f"checkpoint {checkpoint_id} failed ({reason}); {self.consecutive} consecutive failed "
                f"checkpoint(s) exceed --tolerable-failed-checkpoints {self.tolerable}"
            )
        return None

    def succeeded(self) -> None:
        self.consecutive = 0


@dataclass
class PendingCheckpoint:
    """A triggered checkpoint whose files are uploading."""

    id: int
    batch_id: int
    trigger_ms: int
    started: float
    capture: Capture
    capture_ms: int
    future: Future[Upload]
    aborted: threading.Event = field(default_factory=threading.Event)


class CheckpointCoordinator:
    """Takes numbered checkpoints of one run's working folder into the checkpoint root.

    ``on_completed`` is called with each completed checkpoint's metadata before retention runs (this is
    where two-phase sinks publish); an exception there fails the job.
    """

    def __init__(
        self,
        storage: CheckpointStorage,
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
        clock: Callable[[], float] = time.monotonic,
    ):
        self.storage = storage
        self.working = working
        self.config = config
        self.run_id = run_id
        self.stored = stored
        self.fingerprint = fingerprint
        self.restored_from = restored_from
        self.spark_version = spark_version
        self.on_completed = on_completed
        self.clock = clock
        self.decider = RequestDecider(config.interval, config.min_pause)
        self.failures = FailureManager(config.tolerable_failures)
        self.latest: CheckpointMetadata | None = None
        self.covered_batch = -1  # the newest batch a completed checkpoint of this run covers
        self.completed: list[int] = []
        self._next_id = next_id
        self._pending: PendingCheckpoint | None = None
        self._latest_batch = -1
        self._forced_batch = -1
        self._fatal: str | None = None
        self._changed = threading.Condition()
        self._stop = threading.Event()
        self._uploader = ThreadPoolExecutor(max_workers=1, thread_name_prefix="checkpoint-upload")
        self._thread = threading.Thread(target=self._run, name="checkpoint-coordinator", daemon=True)

    # --- called by the job -------------------------------------------------------------------------
    def start(self) -> None:
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
        deadline = self.clock() + (timeout if timeout is not None else self.config.timeout * 2)
        with self._changed:
            failures_before = self.failures.total
            self._forced_batch = max(self._forced_batch, batch_id)
            self._latest_batch = max(self._latest_batch, batch_id)
            self._changed.notify_all()
            while self.covered_batch < batch_id:
                if self._fatal or self.failures.total > failures_before or self.clock() > deadline:
                    return None
                self._changed.wait(0.1)
            return self.latest

    def shutdown(self) -> None:
        """Stop the coordinator; a checkpoint still uploading is aborted and never completes."""
        self._stop.set()
        with self._changed:
            self._changed.notify_all()
        self._thread.join(timeout=30)
        pending = self._pending
        if pending is not None:
            pending.aborted.set()
            self._discard(pending)
        self._uploader.shutdown(wait=False, cancel_futures=True)

    # --- the coordinator thread --------------------------------------------------------------------
    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self._step()
            except Exception as exc:  # a bug here must fail the job, not silently stop checkpointing
                log.exception("checkpoint coordinator failed")
                self._set_fatal(f"checkpoint coordinator failed: {exc}")
                return
            with self._changed:
                self._changed.wait(0.05)

    def _step(self) -> None:
        now = self.clock()
        pending = self._pending
        if pending is not None:
            if pending.future.done():
                self._finish(pending)
            elif now - pending.started > self.config.timeout:
                pending.aborted.set()
                self._fail(pending.id, pending.batch_id, f"expired after {format_duration(self.config.timeout)}")
                self._discard(pending)
            return
        with self._changed:
            latest, forced = self._latest_batch, self._forced_batch
        if forced > self.covered_batch:
            self._trigger(forced)
        elif latest > self.covered_batch and self.decider.due(now):
            self._trigger(latest)

    def _trigger(self, batch_id: int) -> None:
        checkpoint_id = self._next_id
        self._next_id += 1
        started = self.clock()
        self.decider.triggered(started)
        trigger_ms = now_ms()
        try:
            snap = capture(self.working, checkpoint_id, batch_id, self.stored)
        except Exception as exc:
            self.working.release(f"chk-{checkpoint_id}")
            self._fail(checkpoint_id, batch_id, f"capture failed: {exc}")
            return
        capture_ms = int((self.clock() - started) * 1000)
        aborted = threading.Event()
        future = self._uploader.submit(upload, snap, self.working, self.storage, self.run_id, self.stored, aborted)
        self._pending = PendingCheckpoint(
            checkpoint_id, batch_id, trigger_ms, started, snap, capture_ms, future, aborted
        )
        log.debug("triggered checkpoint %d for batch %d", checkpoint_id, batch_id)

    def _finish(self, pending: PendingCheckpoint) -> None:
        try:
            result = pending.future.result()
            meta = self._metadata(pending, result)
            self.storage.write_checkpoint_metadata(meta)
        except Exception as exc:
            self._fail(pending.id, pending.batch_id, f"{type(exc).__name__}: {exc}")
            self._discard(pending)
            return
        self._pending = None
        self.working.release(f"chk-{pending.id}")
        self.stored.replace(meta.files)
        self.failures.succeeded()
        self.decider.finished(self.clock())
        log.info(
            "Completed checkpoint %d for job %r (batch %d): wrote %s of %s total (state %s) in %s",
            meta.id,
            meta.job_name,
            meta.batch_id,
            format_bytes(meta.bytes_written),
            format_bytes(meta.total_bytes),
            format_bytes(meta.state_bytes),
            format_duration(meta.durations_ms["total"] / 1000),
        )
        try:
            self.on_completed(meta)
            subsume(self.storage, self.config.num_retained, meta.id)
        except Exception as exc:
            log.exception("after checkpoint %d completed", meta.id)
            self._set_fatal(f"after checkpoint {meta.id} completed: {type(exc).__name__}: {exc}")
        with self._changed:
            self.latest = meta
            self.covered_batch = max(self.covered_batch, meta.batch_id)
            self.completed.append(meta.id)
            self._changed.notify_all()

    def _metadata(self, pending: PendingCheckpoint, result: Upload) -> CheckpointMetadata:
        completion = now_ms()
        total_ms = int((self.clock() - pending.started) * 1000)
        return CheckpointMetadata(
            id=pending.id,
            kind="checkpoint",
            job_name=self.storage.job_name,
            run_id=self.run_id,
            batch_id=pending.batch_id,
            trigger_timestamp_ms=pending.trigger_ms,
            completion_timestamp_ms=completion,
            checkpointing_mode=self.config.mode,
            files=result.entries,
            state_bytes=sum(e.size for e in result.entries if e.shared),
            bytes_written=result.bytes_written,
            durations_ms={"capture": pending.capture_ms, "upload": total_ms - pending.capture_ms, "total": total_ms},
            source_offsets=pending.capture.source_offsets,
            restored_from=self.restored_from,
            fingerprint={**self.fingerprint, "pinned_confs": pending.capture.pinned_confs},
            spark_version=self.spark_version,
        )

    def _discard(self, pending: PendingCheckpoint) -> None:
        self._pending = None
        try:
            self.storage.discard_checkpoint(pending.id)
        except Exception:  # leftovers are garbage without _metadata; retention removes them later
            log.warning("could not clean up failed checkpoint %d", pending.id, exc_info=True)
        self.working.release(f"chk-{pending.id}")

    def _fail(self, checkpoint_id: int, batch_id: int, reason: str) -> None:
        log.warning("Checkpoint %d (batch %d) failed: %s", checkpoint_id, batch_id, reason)
        self.decider.finished(self.clock())
        fatal = self.failures.failed(checkpoint_id, reason)
        with self._changed:
            if fatal:
                self._fatal = self._fatal or fatal
            self._changed.notify_all()

    def _set_fatal(self, reason: str) -> None:
        with self._changed:
            self._fatal = self._fatal or reason
            self._changed.notify_all()
