"""The lifecycle of one run, top to bottom; each step lives in a module of its own (see the package doc)."""

from __future__ import annotations

import logging
import uuid
from datetime import datetime, timezone
from typing import Any

from spark_checkpoint_runtime.checkpoint_policy import CheckpointConfig
from spark_checkpoint_runtime.coordinator import CheckpointCoordinator
from spark_checkpoint_runtime.file_merging import FileMerging
from spark_checkpoint_runtime.layout import ControlChannel, JobFolder
from spark_checkpoint_runtime.lease import JobLease
from spark_checkpoint_runtime.options import JobOptions
from spark_checkpoint_runtime.run.control_requests import ControlRequests
from spark_checkpoint_runtime.run.fence import RunFence
from spark_checkpoint_runtime.run.finish import externalized_retention, run_report
from spark_checkpoint_runtime.run.output import Publisher, prune_set_aside, recover_output, restore_working_copy
from spark_checkpoint_runtime.run.plan import RunPlan, RunPlanner
from spark_checkpoint_runtime.run.query_loop import QueryLoop
from spark_checkpoint_runtime.run.session import (
    bounded_working_history,
    create_session,
    job_fingerprint,
    load_pipeline,
)
from spark_checkpoint_runtime.run.state import RunState
from spark_checkpoint_runtime.sinks import Sink, load_sink
from spark_checkpoint_runtime.stopping import GracefulStop
from spark_checkpoint_runtime.working_copy import WorkingCopy

log = logging.getLogger(__name__)


class StreamingJob:
    """Runs one job to completion. ``run()`` returns a JSON-able result; failures raise.

    ``spark``: an existing session to run in (tests, notebooks); without it the job creates its own and
    also stops gracefully on a JVM shutdown (a signal to spark-submit).
    """

    def __init__(self, options: JobOptions, spark: Any = None):
        self.options = options
        self._spark = spark
        self.run_id = f"{datetime.now(timezone.utc):%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:8]}"
        self.state = RunState(self.run_id)
        self.graceful = GracefulStop(
            self.request_stop, options.stop_timeout, on_timeout=self._report_failure, owns_process=spark is None
        )
        self._control: ControlChannel | None = None  # with --run-key: where the run's outcome is reported

    def request_stop(self, *_: Any) -> None:
        """Ask for a graceful stop: finish the batch in flight, checkpoint, commit, exit."""
        self.state.request_stop()

    def run(self) -> dict[str, Any]:
        """Run the job; with ``--run-key`` the outcome is also written to ``_control/runs/<key>.json``."""
        opts = self.options
        storage = JobFolder(opts.checkpoint_root, opts.job_name, opts.storage_options)
        try:
            if not opts.run_key:
                return self._run(storage)
            control = self._control = ControlChannel(storage)
            try:
                result = self._run(storage)
            except Exception as exc:
                self._report_failure(str(exc))
                raise
            control.write_run_report(opts.run_key, result)
            return result
        finally:
            self.graceful.uninstall()

    def record_exit_code(self, code: int) -> None:
        """With ``--run-key``: add the exit status to the failed run's report, for a supervisor that cannot see
        the process's own (a driver on the cluster, whose master says only FAILED)."""
        if self._control is None:
            return
        try:
            report = self._control.run_report(self.options.run_key) or {"status": "failed"}
            self._control.write_run_report(self.options.run_key, {**report, "exit_code": code})
        except Exception:  # the exit status still says it; never fail the exit for the report
            log.warning("could not add the exit status to the run report", exc_info=True)

    def _report_failure(self, reason: str) -> None:
        """With ``--run-key``: the run failed, and why. Also called when a stop outlasts --stop-timeout and the
        process is about to end, so a supervisor reading the report does not take the exit for a kill."""
        if self._control is not None:
            self._control.write_run_report(
                self.options.run_key, {"status": "failed", "error": reason, "run_id": self.run_id}
            )

    def _run(self, storage: JobFolder) -> dict[str, Any]:
        opts, step = self.options, self.state.steps.step
        with step("plan"):
            storage.check_exclusive_create()  # before anything else: a store that cannot is refused untouched
            lease = JobLease(storage, self.run_id, opts.run_key, opts.lease_timeout)
            lease.ensure_free()  # fail fast, before Spark starts, if another live run holds the job
            planner = RunPlanner(storage, opts, self.run_id)
            planner.resolve()
        with step("session"):
            spark = self._spark or create_session(opts)
            # From here a signal (to the driver, the JVM or both) means "stop gracefully"; the JVM's own hooks wait.
            self.graceful.install(spark, jvm_hook=self._spark is None)
            if self._spark is not None:
                for key, value in opts.conf.items():
                    spark.conf.set(key, value)
        with bounded_working_history(spark):
            with step("pipeline"):
                df = load_pipeline(opts.pipeline, spark)
                fingerprint = job_fingerprint(df, spark, planner.pinned_confs())
                planner.check_compatible(fingerprint, spark)
                sink = load_sink(opts.sink, opts.storage_options)
                planner.check_existing_output(sink)

            # From here on the run writes: lease, working folder, sink recovery, checkpoints.
            with step("settle"):
                lease.acquire()
            try:
                with step("settle"):
                    plan = planner.settle(fingerprint, spark, sink)
                result = self._run_holding(storage, RunFence(lease), spark, df, fingerprint, plan, sink)
            finally:
                with step("release"):
                    lease.release()
        return {**result, "step_seconds": self.state.steps.as_dict()}

    def _run_holding(
        self,
        storage: JobFolder,
        fence: RunFence,
        spark: Any,
        df: Any,
        fingerprint: dict[str, Any],
        plan: RunPlan,
        sink: Sink,
    ) -> dict[str, Any]:
        opts, state, step = self.options, self.state, self.state.steps.step
        working = WorkingCopy(opts.working_dir, opts.job_name, self.run_id)
        with step("working_copy"):
            working.create(owner=storage.url_of(storage.job_path))
            working.remove_abandoned()  # the working folders of this job's killed runs: this run holds the job now
            restore_working_copy(plan, working, opts.job_name)
        point = plan.point
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
                merging=FileMerging.for_storage(opts.file_merging, opts.segment_size_mb, storage.fs),
                niceness=opts.checkpoint_niceness,
            ),
            run_id=self.run_id,
            next_id=plan.next_id,
            stored=plan.stored,
            fingerprint=fingerprint,
            restored_from=point.describe() if point else None,
            spark_version=spark.version,
            on_completed=Publisher(sink, plan, state, fence, opts),
            history=plan.history,
            staged=state,
            fence=fence,
        )
        outcome = "failed"
        control = ControlChannel(storage)
        with step("housekeeping"):
            try:
                pruned = control.prune(opts.control_retention)
                if pruned:
                    log.info("pruned %d settled file(s) from _control/", pruned)
                storage.ids.prune()  # earlier runs' id records below the newest few
            except Exception:  # housekeeping: the next run tries again
                log.warning("could not prune _control/ or _ids/", exc_info=True)
        coordinator.start()
        try:
            with step("recover_output"):
                recover_output(plan, coordinator, sink, state, fence)
                prune_set_aside(sink, fence, opts.set_aside_retention)
            requests = ControlRequests(control, opts, state, fence, coordinator, working)
            loop = QueryLoop(opts, state, fence, coordinator, working, requests, bound_stop=self.graceful.bound)
            outcome, final = loop.run(spark, df, sink)
        finally:
            with step("shutdown"):
                coordinator.shutdown()
                externalized_retention(storage, fence, opts, outcome)
                if self._spark is None:
                    spark.stop()  # drains the listener bus before Python's callback server goes away
        with step("working_copy_removal"):
            working.remove()
        return run_report(storage, opts, state, point, coordinator, final, outcome)
