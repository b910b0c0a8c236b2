"""One run of a checkpointed streaming job: restore, run the query, checkpoint, finish.

The order matters and is the promise to users:

1. resolve the restore point and check compatibility (reads only: bad input leaves the root untouched);
2. build a fresh working folder from the snapshot; a rewind (an older checkpoint, a savepoint) first
   writes a checkpoint of its own above every id in sight, so "latest" follows the new history;
3. recover the sink: publish what the restored snapshot names, abort other staged output, set aside
   published output outside the restored history;
4. run the query; the coordinator checkpoints at batch boundaries; sinks publish per the mode;
5. on finish or stop request: stop between batches, take a final checkpoint, commit, apply the
   externalized-retention policy.
"""

from __future__ import annotations

import importlib
import logging
import threading
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from spark_checkpoint_runtime import faults
from spark_checkpoint_runtime.coordinator import CheckpointConfig, CheckpointCoordinator
from spark_checkpoint_runtime.errors import ExistingOutput, JobFailed, LeaseLost, PipelineError
from spark_checkpoint_runtime.fingerprint import SNAPSHOTTABLE_PROVIDERS, plan_fingerprint, state_store_settings
from spark_checkpoint_runtime.layout import (
    CheckpointFormatError,
    CheckpointMetadata,
    ControlChannel,
    ControlRequest,
    JobFolder,
    LeaseFiles,
    Lineage,
    SavepointFolder,
    StagedOutput,
    now_ms,
)
from spark_checkpoint_runtime.layout.lineage import MAX_RANGES
from spark_checkpoint_runtime.lease import JobLease
from spark_checkpoint_runtime.options import JobOptions
from spark_checkpoint_runtime.restore import (
    RestorePoint,
    check_compatible,
    resolve_restore_point,
    starts_new_branch,
)
from spark_checkpoint_runtime.retention import apply_externalized_retention, externalized_retention_discards
from spark_checkpoint_runtime.sinks import Sink, highest_published_id, load_sink
from spark_checkpoint_runtime.snapshot import StoredFiles, materialize
from spark_checkpoint_runtime.state_files import UnsupportedStateStore
from spark_checkpoint_runtime.stopping import GracefulStop
from spark_checkpoint_runtime.working_copy import WorkingCopy

log = logging.getLogger(__name__)

RECENT_CHECKPOINTS = 20  # the run report lists this many of the run's newest checkpoints, and counts them all

# One listing of _control/ per poll (9,600 a day on object storage); a stop or savepoint request waits at most this.
CONTROL_POLL_SECONDS = 9.0
STOP_MARKER = "checkpointed-job graceful stop"


def create_session(options: JobOptions) -> Any:
    """A SparkSession for the job: spark-submit's settings, or local mode under ``python -m``."""
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(f"checkpointed-job:{options.job_name}")
    for key, value in options.conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return spark


def load_pipeline(spec: str, spark: Any) -> Any:
    """Import ``module:function`` and call it with the session; it must return a streaming DataFrame."""
    module_name, _, function_name = spec.partition(":")
    try:
        function = getattr(importlib.import_module(module_name), function_name)
    except (ImportError, AttributeError) as exc:
        raise PipelineError(
            f"--pipeline {spec!r} cannot be loaded: {exc}; ship the module with --py-files or PYTHONPATH"
        ) from None
    df = function(spark)
    if not getattr(df, "isStreaming", False):
        raise PipelineError(f"--pipeline {spec!r} returned {type(df).__name__}, not a streaming DataFrame")
    return df


class _ProgressProxy:
    """Spark's ``PythonStreamingQueryListener`` interface, implemented over py4j, reading three fields.

    PySpark's own wrapper turns every progress event into Python field by field (dozens of py4j calls
    per batch, for state operators, sources and metrics); this one asks only for the run id, batch id
    and row count.
    """

    def __init__(self, on_progress: Callable[[str, int, int], None]):
        self.on_progress = on_progress

    def onQueryStarted(self, jevent: Any) -> None:
        """The first progress event carries the batch."""

    def onQueryProgress(self, jevent: Any) -> None:
        progress = jevent.progress()
        self.on_progress(progress.runId().toString(), int(progress.batchId()), int(progress.numInputRows()))

    def onQueryIdle(self, jevent: Any) -> None:
        """Idle triggers run no batch, so there is nothing to checkpoint."""

    def onQueryTerminated(self, jevent: Any) -> None:
        """The job loop sees termination through the query handle."""

    class Java:
        implements = ["org.apache.spark.sql.streaming.PythonStreamingQueryListener"]


class _BatchListener:
    """Forwards completed batches of our query to the coordinator and counts rows."""

    def __init__(self, coordinator: CheckpointCoordinator, spark: Any):
        from pyspark.sql.streaming import StreamingQueryListener

        self.coordinator = coordinator
        self.run_id: str | None = None
        self.rows: dict[int, int] = {}
        proxy = _ProgressProxy(self._progress)
        jvm = spark.sparkContext._jvm
        forward = self._progress

        class Listener(StreamingQueryListener):
            """Registered with ``spark.streams`` like any listener; Spark calls the slim proxy.

            ``_jlistener`` is how PySpark hands a listener to the JVM (not public API). Should a PySpark
            release stop using it, Spark calls the methods below through PySpark's own wrapper instead:
            slower, still correct.
            """

            @property
            def _jlistener(self) -> Any:
                # What addListener/removeListener hand to the JVM; built on first use, once addListener has
                # started py4j's callback server.
                if not hasattr(self, "_jlistenerobj"):
                    wrapper = jvm.org.apache.spark.sql.streaming.PythonStreamingQueryListenerWrapper
                    self._jlistenerobj = wrapper(proxy)
                return self._jlistenerobj

            def onQueryStarted(self, event: Any) -> None:
                """The first progress event carries the batch."""

            def onQueryProgress(self, event: Any) -> None:
                progress = event.progress
                forward(str(progress.runId), int(progress.batchId), int(progress.numInputRows))

            def onQueryIdle(self, event: Any) -> None:
                """Idle triggers run no batch, so there is nothing to checkpoint."""

            def onQueryTerminated(self, event: Any) -> None:
                """The job loop sees termination through the query handle."""

        self.listener = Listener()

    def _progress(self, run_id: str, batch_id: int, rows: int) -> None:
        if self.run_id is not None and run_id != self.run_id:
            return
        self.rows[batch_id] = rows
        self.coordinator.batch_completed(batch_id)


class StreamingJob:
    """Runs one job to completion. ``run()`` returns a JSON-able result; failures raise."""

    def __init__(self, options: JobOptions, spark: Any = None):
        self.options = options
        self._spark = spark
        self._stop_requested = threading.Event()
        self._stopping = threading.Event()  # set once the query is being stopped: no new batch may start
        self._stop_savepoint: tuple[ControlRequest, SavepointFolder] | None = None
        self.savepoint: CheckpointMetadata | None = None
        self.savepoint_url: str | None = None
        self.run_id = f"{datetime.now(UTC):%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:8]}"
        # Batches this run staged that no completed snapshot has published yet, and (during a rewind) the
        # restored snapshot's staged output that the rewind checkpoint carries over.
        self._staged: set[int] = set()
        self._carried: StagedOutput | None = None
        self._staged_lock = threading.Lock()
        self.graceful = GracefulStop(self.request_stop, options.stop_timeout)

    def request_stop(self, *_: Any) -> None:
        """Ask for a graceful stop: finish the batch in flight, checkpoint, commit, exit."""
        if not self._stop_requested.is_set():
            log.info("stop requested: finishing the batch in flight, then a final checkpoint")
        self._stop_requested.set()

    def run(self) -> dict[str, Any]:
        """Run the job; with ``--run-key`` the outcome is also written to ``_control/runs/<key>.json``."""
        opts = self.options
        storage = JobFolder(opts.checkpoint_root, opts.job_name, opts.storage_options)
        try:
            if not opts.run_key:
                return self._run(storage)
            control = ControlChannel(storage)
            try:
                result = self._run(storage)
            except Exception as exc:
                control.write_run_report(opts.run_key, {"status": "failed", "error": str(exc), "run_id": self.run_id})
                raise
            control.write_run_report(opts.run_key, result)
            return result
        finally:
            self.graceful.uninstall()

    def _run(self, storage: JobFolder) -> dict[str, Any]:
        opts = self.options
        storage.check_exclusive_create()  # before anything else: a store that cannot is refused untouched
        lease = JobLease(storage, self.run_id, opts.run_key, opts.lease_timeout)
        lease.ensure_free()  # fail fast, before Spark starts, if another live run holds the job
        point = resolve_restore_point(storage, opts.restore_from)
        spark = self._spark or create_session(opts)
        # From here a signal (to the driver, the JVM or both) means "stop gracefully"; the JVM's own hooks wait.
        self.graceful.install(spark, jvm_hook=self._spark is None)
        if self._spark is not None:
            for key, value in opts.conf.items():
                spark.conf.set(key, value)
        df = load_pipeline(opts.pipeline, spark)
        fingerprint = {**plan_fingerprint(df), "state_store": state_store_settings(spark)}
        provider = fingerprint["state_store"]["provider_class"]
        if fingerprint["operators"] and fingerprint["state_store"]["provider"] not in SNAPSHOTTABLE_PROVIDERS:
            raise UnsupportedStateStore(
                f"state store provider {provider}: its file layout is unknown to the runtime, which snapshots "
                f"{' and '.join(SNAPSHOTTABLE_PROVIDERS)}; set spark.sql.streaming.stateStore.providerClass to one "
                "of them"
            )
        restored_operators = None
        if point is not None:
            restored_operators = check_compatible(
                point, fingerprint, spark, allow_non_restored_state=opts.allow_non_restored_state
            )
        sink = load_sink(opts.sink, opts.storage_options)
        if point is None:
            self._check_fresh_start(storage, sink)

        # From here on the run writes: lease, working folder, sink recovery, checkpoints.
        lease.acquire()
        try:
            if opts.restore_from == "latest":
                # The previous holder may have completed a checkpoint since we looked: restore the newest.
                newest = resolve_restore_point(storage, opts.restore_from)
                if newest is not None and (point is None or newest.metadata.id != point.metadata.id):
                    point = newest
                    restored_operators = check_compatible(
                        point, fingerprint, spark, allow_non_restored_state=opts.allow_non_restored_state
                    )
            return self._run_holding(storage, lease, spark, df, fingerprint, point, restored_operators, sink)
        finally:
            lease.release()

    def _run_holding(
        self,
        storage: JobFolder,
        lease: JobLease,
        spark: Any,
        df: Any,
        fingerprint: dict[str, Any],
        point: RestorePoint | None,
        restored_operators: int | None,
        sink: Sink,
    ) -> dict[str, Any]:
        opts = self.options
        working = WorkingCopy(opts.working_dir, opts.job_name, self.run_id)
        working.create()
        if point is not None:
            self._materialize(point, working, restored_operators)
        published = highest_published_id(sink)  # one listing of the sink, now that this run holds the job
        history = self._history(point, sink, published)
        rewind = point is not None and starts_new_branch(storage, point)
        # Ids only grow: above every id in the job folder, in the restored history and in published output.
        next_id = max(storage.next_checkpoint_id(), history.highest + 1, published + 1)
        coordinator = CheckpointCoordinator(
            storage,
            working,
            CheckpointConfig(
                interval=opts.checkpoint_interval,
                min_pause=opts.min_pause,
                timeout=opts.checkpoint_timeout,
                tolerable_failures=opts.tolerable_failed_checkpoints,
                num_retained=opts.num_retained,
                mode=opts.checkpointing_mode,
            ),
            run_id=self.run_id,
            next_id=next_id,
            # A rewind stores the restored state afresh: an old checkpoint's shared files are not the latest
            # checkpoint's, so retention running beside the job may delete them while they are referenced.
            stored=StoredFiles(point.metadata.files if point is not None and not rewind else []),
            fingerprint=fingerprint,
            restored_from=point.describe() if point else None,
            spark_version=spark.version,
            on_completed=self._publisher(sink, point, lease),
            history=history,
            staged_for=self._staged_for,
            fence=lease,
        )
        outcome = "failed"
        control = ControlChannel(storage)
        try:
            pruned = control.prune(opts.control_retention)
            if pruned:
                log.info("pruned %d settled file(s) from _control/", pruned)
        except Exception:  # housekeeping: the next run tries again
            log.warning("could not prune _control/", exc_info=True)
        coordinator.start()
        try:
            if rewind:
                self._start_branch(point, coordinator, sink)
            else:
                sink.recover(point.metadata.staged if point is not None else None, history)
            outcome, final = self._run_query(spark, df, sink, coordinator, working, control, lease)
        finally:
            coordinator.shutdown()
            self._externalized_retention(storage, lease, outcome)
            if self._spark is None:
                spark.stop()  # drains the listener bus before Python's callback server goes away
        working.remove()
        return self._result(storage, point, coordinator, final, outcome)

    def _externalized_retention(self, storage: JobFolder, lease: JobLease, outcome: str) -> None:
        """Flink's externalized-checkpoint policy, only while this run still holds the job (it deletes)."""
        if not externalized_retention_discards(self.options.externalized_retention, outcome):
            return
        try:
            lease.confirm(f"--externalized-retention {self.options.externalized_retention}")
        except LeaseLost:
            return  # another run holds the job: its checkpoints are not ours to delete
        apply_externalized_retention(storage, self.options.externalized_retention, outcome)

    # --- steps ------------------------------------------------------------------------------------
    def _materialize(self, point: RestorePoint, working: WorkingCopy, restored_operators: int | None) -> None:
        meta = point.metadata
        copied = materialize(point.snapshot, working, skip_state_operators=restored_operators)
        log.info(
            "restoring job %r from %s %d (batch %d, %d files, %d bytes) at %s",
            self.options.job_name,
            meta.kind,
            meta.id,
            meta.batch_id,
            len(meta.files),
            copied,
            point.url,
        )

    def _check_fresh_start(self, storage: JobFolder, sink: Sink) -> None:
        """Refuse to start from empty state into published output unless ``--existing-output`` says what to do."""
        published = highest_published_id(sink)
        if published and self.options.existing_output == "fail":
            raise ExistingOutput(
                f"{storage.location} starts fresh, but its sink already holds output published up to checkpoint "
                f"{published}: every row would be published again. Restore from a checkpoint or savepoint, or "
                "pass --existing-output move-aside (set that output aside under _rolled_back/) or keep (keep it "
                "and continue after it)"
            )

    def _history(self, point: RestorePoint | None, sink: Sink, published: int) -> Lineage:
        """The history this run continues: the restored snapshot's, or on a fresh start what output it keeps.

        ``published`` is the sink's highest published (or set-aside) checkpoint id.
        """
        if point is not None:
            return point.metadata.history
        if published and self.options.existing_output == "keep":
            # Exactly the ids published now: output set aside earlier stays aside (a range would bring it back).
            ids = getattr(sink, "published_ids", lambda: set(range(1, published + 1)))()
            kept = Lineage.of((i, i) for i in ids)
            if len(kept.ranges) > MAX_RANGES // 2:
                raise ExistingOutput(
                    f"--existing-output keep: the published output's {len(ids)} checkpoint ids form "
                    f"{len(kept.ranges)} separate ranges, too many to record as a history; use move-aside"
                )
            log.warning("starting fresh; --existing-output keep: %d checkpoint(s) of output stay published", len(ids))
            return kept
        if published:
            log.warning("starting fresh; --existing-output move-aside: published output is set aside")
        log.info("job %r run %s starts fresh", self.options.job_name, self.run_id)
        return Lineage()

    def _start_branch(self, point: RestorePoint, coordinator: CheckpointCoordinator, sink: Sink) -> None:
        """A rewind: a checkpoint of the restored state above every id in sight, then the sink's recovery.

        Until that checkpoint's ``_metadata`` exists, "latest" still continues the old history and nothing
        of it was touched; from then on "latest" continues the new one, which recovery then makes true of
        the output (a crash part-way is finished by the next restore from latest).
        """
        meta = point.metadata
        with self._staged_lock:
            self._carried = meta.staged  # a commit of the restored snapshot cut short is finished from here
        first = coordinator.checkpoint_now(meta.batch_id)
        if first is None:
            raise JobFailed(
                f"could not write the checkpoint that starts a new history from {meta.kind} {meta.id} "
                f"({coordinator.fatal or 'it failed'}); nothing was set aside and latest still continues the "
                "previous history"
            )
        log.info(
            "chk-%d continues %s %d (history %s); output of other histories is set aside",
            first.id,
            meta.kind,
            meta.id,
            first.history.describe(),
        )
        sink.recover(first.staged, first.history)

    def _staged_for(self, checkpoint_id: int, batch_id: int) -> StagedOutput | None:
        """The staged output snapshot ``checkpoint_id`` of ``batch_id`` publishes when it completes."""
        with self._staged_lock:
            if self._carried is not None:
                return self._carried
            batches = tuple(sorted(b for b in self._staged if b <= batch_id))
        return StagedOutput(checkpoint_id, self.run_id, batches) if batches else None

    def _publisher(self, sink: Sink, point: RestorePoint | None, lease: JobLease):
        claimed = point is not None and point.metadata.kind == "savepoint" and self.options.claim_mode == "claim"

        def on_completed(meta: CheckpointMetadata) -> None:
            nonlocal claimed
            staged = meta.staged
            if staged is not None:
                lease.confirm(f"publishing output up to batch {meta.batch_id}")
                sink.commit(staged)
                with self._staged_lock:
                    self._carried = None
                    if staged.run_id == self.run_id:
                        self._staged.difference_update(staged.batches)
            if claimed and meta.kind == "checkpoint":
                # CLAIM: the job owns the savepoint it restored; once a checkpoint of its own exists, it goes.
                claimed = False
                lease.confirm("deleting the claimed savepoint")
                log.info("--claim-mode claim: deleting the restored savepoint %s", point.url)
                SavepointFolder(point.url, self.options.storage_options).discard_listed(point.metadata)

        return on_completed

    def _run_query(
        self,
        spark: Any,
        df: Any,
        sink: Sink,
        coordinator: CheckpointCoordinator,
        working: WorkingCopy,
        control: ControlChannel,
        lease: JobLease,
    ):
        opts = self.options
        at_least_once = opts.checkpointing_mode == "at-least-once"

        def process(batch_df: Any, batch_id: int) -> None:
            if self._stopping.is_set():
                # Refuse the batch instead of being interrupted inside it: the query ends at once, nothing
                # of this batch is committed or staged, and the next run plans it again from the checkpoint.
                raise RuntimeError(f"{STOP_MARKER}: batch {batch_id} left to the next run")
            lease.check(f"staging batch {batch_id}")
            sink.write(batch_id, batch_df, self.run_id)
            if not at_least_once:
                with self._staged_lock:
                    self._staged.add(batch_id)
            faults.reach("batch")
            if at_least_once:
                lease.confirm(f"publishing batch {batch_id}")
                sink.commit(StagedOutput(coordinator.next_checkpoint_id, self.run_id, (batch_id,)))

        listener = _BatchListener(coordinator, spark)
        spark.streams.addListener(listener.listener)
        writer = (
            df.writeStream.outputMode(opts.output_mode)
            .foreachBatch(process)
            .option("checkpointLocation", working.spark_location)
        )
        if opts.trigger == "available-now":
            writer = writer.trigger(availableNow=True)
        else:
            writer = writer.trigger(processingTime=f"{int(opts.batch_interval * 1000)} milliseconds")
        started = time.monotonic()
        started_ms = now_ms()
        next_control_check = 0.0
        query = writer.start()
        listener.run_id = str(query.runId)
        self.rows = listener.rows
        outcome = "finished"
        try:
            while query.isActive:
                if coordinator.fatal or lease.lost:
                    self._stop_between_batches(query)
                    raise JobFailed(lease.lost or coordinator.fatal)
                if time.monotonic() >= next_control_check:
                    next_control_check = time.monotonic() + CONTROL_POLL_SECONDS
                    self._handle_control_requests(control, lease, started_ms, coordinator, working)
                overdue = opts.max_duration is not None and time.monotonic() - started > opts.max_duration
                if self._stop_requested.is_set() or overdue:
                    if overdue:
                        log.info("--max-duration reached: stopping gracefully")
                    self._stop_between_batches(query)
                    outcome = "cancelled"
                    break
                try:
                    query.awaitTermination(0.2)
                except Exception as exc:  # the query died: report it in one line, checkpoints stay valid
                    if self._stopping.is_set() and STOP_MARKER in str(exc):
                        break
                    if lease.lost:
                        raise JobFailed(lease.lost) from None
                    if self._failed_while_stopping(exc):
                        break
                    raise JobFailed(f"the streaming query failed: {_first_line(str(exc))}") from exc
            if self._stop_requested.is_set():
                outcome = "cancelled"  # however the loop ended (a batch failed during the stop), it was asked
            for progress in query.recentProgress:  # the listener is asynchronous: fill in late batches
                listener.rows[int(progress.batchId)] = int(progress.numInputRows)
            error = query.exception()
            stopped_by_us = self._stopping.is_set() and STOP_MARKER in str(error)
            if error is not None and not stopped_by_us and not self._failed_while_stopping(error):
                raise JobFailed(f"the streaming query failed: {_first_line(str(error))}")
            if coordinator.fatal:
                raise JobFailed(coordinator.fatal)
            if self._stop_savepoint is not None:
                final = self._savepoint_and_stop(control, coordinator, working)
            else:
                final = self._final_checkpoint(coordinator, working)
            if coordinator.fatal:
                # A checkpoint that completed while the query ended may have failed to publish: the final
                # checkpoint then finds its batch covered, but the run must not report success.
                raise JobFailed(coordinator.fatal)
        finally:
            if query.isActive:
                query.stop()
            spark.streams.removeListener(listener.listener)
        return outcome, final

    def _failed_while_stopping(self, error: BaseException) -> bool:
        """A batch that failed after a stop was asked for is left to the next run; the stop goes on.

        A signal to the whole process group also reaches the short-lived helpers Hadoop forks (``chmod`` for
        local files) and can fail the batch in flight. That batch never committed: the final checkpoint
        covers the last committed one, and the next run replays the rest.
        """
        if not self._stop_requested.is_set():
            return False
        log.warning(
            "the batch in flight failed while the job was stopping (%s); it is left to the next run",
            _first_line(str(error)),
        )
        return True

    def _handle_control_requests(
        self,
        control: ControlChannel,
        lease: JobLease,
        started_ms: int,
        coordinator: CheckpointCoordinator,
        working: WorkingCopy,
    ) -> None:
        """Answer requests for this run (its run key, or any run if the request names none).

        The same listing confirms the lease: a newer epoch marks it lost, and the query loop stops.
        """
        try:
            listed_at = lease.clock()
            poll = control.poll()
        except Exception:  # storage hiccup: try again at the next poll, never fail the job for it
            log.warning("could not read control requests", exc_info=True)
            return
        try:
            lease.observe(LeaseFiles.listing_of(poll.lease_names), "answering control requests", listed_at)
        except LeaseLost:
            return  # lease.lost is set: the query loop stops the run
        for request in poll.pending:
            if isinstance(request, tuple):
                trigger_id, reason = request
                log.warning("refusing control request %s: %s", trigger_id, reason)
                control.respond(trigger_id, {"status": "rejected", "reason": reason})
                continue
            if request.run_key is not None and request.run_key != self.options.run_key:
                continue  # addressed to another run of this job
            if request.run_key is None and request.created_ms < started_ms:
                control.respond(request.trigger_id, {"status": "expired", "reason": "made before this run started"})
                continue
            log.info(
                "control request %s: %s%s", request.trigger_id, request.action, " and stop" if request.stop else ""
            )
            if request.action == "stop":
                control.respond(request.trigger_id, {"status": "accepted", "action": "stop", "run_id": self.run_id})
                self.request_stop()
                continue
            try:
                self._check_savepoint_target(coordinator.storage, request.target_directory)
                folder = coordinator.storage.savepoints.folder_for(request.trigger_id, request.target_directory)
            except CheckpointFormatError as exc:
                control.respond(request.trigger_id, {"status": "rejected", "reason": str(exc)})
                continue
            control.respond(request.trigger_id, {"status": "in_progress", "run_id": self.run_id})
            if request.stop:
                self._stop_savepoint = (request, folder)
                self.request_stop()
            else:
                self._take_savepoint(control, request, folder, coordinator, working)

    def _take_savepoint(
        self,
        control: ControlChannel,
        request: ControlRequest,
        folder: SavepointFolder,
        coordinator: CheckpointCoordinator,
        working: WorkingCopy,
    ) -> CheckpointMetadata | None:
        """Savepoint the newest completed batch into ``folder`` and answer the request."""
        batches = working.committed_batches()
        if not batches:
            reason = "the job has not completed a batch yet; ask again once it has"
            control.respond(request.trigger_id, {"status": "failed", "reason": reason, "run_id": self.run_id})
            return None
        outcome = coordinator.savepoint_now(batches[-1], folder)
        if outcome.result is None:
            control.respond(request.trigger_id, {"status": "failed", "reason": outcome.reason, "run_id": self.run_id})
            return None
        control.respond(
            request.trigger_id,
            {
                "status": "completed",
                "savepoint_path": folder.url,
                "savepoint_id": outcome.result.id,
                "batch_id": outcome.result.batch_id,
                "stopped": request.stop,
                "run_id": self.run_id,
            },
        )
        self.savepoint = outcome.result
        self.savepoint_url = folder.url
        return outcome.result

    def _check_savepoint_target(self, storage: JobFolder, target: str | None) -> None:
        """A savepoint may go under the job's checkpoint root or a ``--savepoint-targets`` prefix, nowhere else."""
        prefixes = [t.strip() for t in self.options.savepoint_targets.split(",") if t.strip()]
        storage.savepoints.check_target(target, prefixes)

    def _savepoint_and_stop(
        self, control: ControlChannel, coordinator: CheckpointCoordinator, working: WorkingCopy
    ) -> CheckpointMetadata | None:
        """Stop-with-savepoint: the query has stopped between batches; savepoint it (sinks commit on it)."""
        request, folder = self._stop_savepoint
        if self._take_savepoint(control, request, folder, coordinator, working) is None:
            final = self._final_checkpoint(coordinator, working)  # nothing is lost either way
            reason = (control.response(request.trigger_id) or {}).get("reason")
            raise JobFailed(
                f"stop-with-savepoint failed ({reason}); the job stopped after a final checkpoint "
                f"{final.id if final else '(none needed)'} instead"
            )
        return coordinator.latest

    def _stop_between_batches(self, query: Any) -> None:
        """Stop without interrupting a batch: stopping inside a Python foreachBatch can wedge the stream thread.

        An idle query (between triggers) is stopped at once. A busy one finishes the batch in flight; the
        next batch then refuses to start (see ``process``), which ends the query within one batch even when
        a backlog keeps triggers back to back.
        """
        self._stopping.set()
        deadline = time.monotonic() + max(self.options.checkpoint_timeout, 60.0)
        while time.monotonic() < deadline and query.isActive:
            if not query.status.get("isTriggerActive"):
                break
            time.sleep(0.02)
        if query.isActive:
            query.stop()

    def _final_checkpoint(self, coordinator: CheckpointCoordinator, working: WorkingCopy) -> CheckpointMetadata | None:
        batches = working.committed_batches()
        if not batches:
            log.info("no batch ran in this run; nothing new to checkpoint")
            return coordinator.latest
        last = batches[-1]
        if last <= coordinator.covered_batch:
            return coordinator.latest
        for _attempt in range(self.options.tolerable_failed_checkpoints + 1):
            meta = coordinator.checkpoint_now(last)
            if meta is not None and meta.batch_id >= last:
                return meta
            if coordinator.fatal:
                break
        raise JobFailed(
            coordinator.fatal
            or f"the final checkpoint of batch {last} did not complete; output after "
            "the previous checkpoint stays staged and is recomputed on restore"
        )

    def _result(
        self,
        storage: JobFolder,
        point: RestorePoint | None,
        coordinator: CheckpointCoordinator,
        final: CheckpointMetadata | None,
        outcome: str,
    ) -> dict[str, Any]:
        latest = final or coordinator.latest or (point.metadata if point else None)
        rows = getattr(self, "rows", {})
        return {
            "job_name": self.options.job_name,
            "run_id": self.run_id,
            "status": outcome,
            "checkpoint_id": latest.id if latest else None,
            "checkpoint_path": storage.url_of(storage.checkpoints.path(latest.id)) if latest else None,
            "checkpoint_kind": latest.kind if latest else None,
            "batch_id": latest.batch_id if latest else None,
            "restored_from": point.describe() if point else None,
            # Bounded: a continuous run completes a checkpoint every few seconds for weeks.
            "checkpoints_completed": coordinator.completed[-RECENT_CHECKPOINTS:],
            "checkpoints_completed_count": len(coordinator.completed),
            "first_checkpoint_id": coordinator.completed[0] if coordinator.completed else None,
            "batches": len(rows),
            "rows": sum(rows.values()),
            "savepoint_path": self.savepoint_url,
            "savepoint_id": self.savepoint.id if self.savepoint else None,
        }


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else "unknown error"
