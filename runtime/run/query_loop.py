"""Step 4 of a run: the streaming query, its batches, and stopping it between batches.

Each batch stages its output in the sink (exactly-once) or publishes it at once (at-least-once); the
listener tells the coordinator when a batch completed. The loop watches for a failed query, a lost lease, a
failed coordinator, control requests and stop requests, and ends the query only between batches: stopping
inside a Python ``foreachBatch`` can wedge Spark's stream thread.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from spark_checkpoint_runtime import faults
from spark_checkpoint_runtime.coordinator import CheckpointCoordinator
from spark_checkpoint_runtime.errors import JobFailed
from spark_checkpoint_runtime.layout import CheckpointMetadata, StagedOutput, now_ms
from spark_checkpoint_runtime.options import JobOptions
from spark_checkpoint_runtime.run.control_requests import CONTROL_POLL_SECONDS, ControlRequests
from spark_checkpoint_runtime.run.fence import RunFence
from spark_checkpoint_runtime.run.finish import final_checkpoint
from spark_checkpoint_runtime.run.progress import BatchListener
from spark_checkpoint_runtime.run.state import RunState
from spark_checkpoint_runtime.sinks import Sink
from spark_checkpoint_runtime.spark_versions import progress_batch_rows
from spark_checkpoint_runtime.working_copy import WorkingCopy

log = logging.getLogger(__name__)

STOP_MARKER = "checkpointed-job graceful stop"


class QueryLoop:
    """Runs the query until it finishes, is asked to stop, or fails; returns ``(outcome, final snapshot)``.

    ``bound_stop(cause, savepoint_seconds)`` is called once the run starts to stop (asked to, past
    ``--max-duration``, or failed): the stop timeout then applies to the rest of the run, as it does to a
    signal's stop, with ``savepoint_seconds`` more for a stop that takes a savepoint first.
    """

    def __init__(
        self,
        options: JobOptions,
        state: RunState,
        fence: RunFence,
        coordinator: CheckpointCoordinator,
        working: WorkingCopy,
        requests: ControlRequests,
        bound_stop: Callable[[str, float], None],
    ):
        self.options = options
        self.state = state
        self.fence = fence
        self.coordinator = coordinator
        self.working = working
        self.requests = requests
        self.bound_stop = bound_stop

    def run(self, spark: Any, df: Any, sink: Sink) -> tuple[str, CheckpointMetadata | None]:
        opts, state, coordinator = self.options, self.state, self.coordinator
        listener = BatchListener(coordinator, spark, state.rows)
        spark.streams.addListener(listener.listener)
        writer = (
            df.writeStream.outputMode(opts.output_mode)
            .foreachBatch(self._batch_function(sink))
            .option("checkpointLocation", self.working.spark_location)
        )
        if opts.trigger == "available-now":
            writer = writer.trigger(availableNow=True)
        else:
            writer = writer.trigger(processingTime=f"{int(opts.batch_interval * 1000)} milliseconds")
        started, started_ms = time.monotonic(), now_ms()  # before the start: a request made meanwhile counts
        with state.steps.step("query"):
            query = writer.start()
        listener.run_id = str(query.runId)
        try:
            with state.steps.step("query"):
                outcome = self._await_end(query, started, started_ms)
            with state.steps.step("final_checkpoint"):
                if self.requests.stop_savepoint is not None:
                    final = self.requests.savepoint_and_stop()
                else:
                    final = final_checkpoint(coordinator, self.working, opts)
            if coordinator.fatal:
                # A checkpoint that completed while the query ended may have failed to publish: the final
                # checkpoint then finds its batch covered, but the run must not report success.
                raise JobFailed(coordinator.fatal)
        finally:
            if query.isActive:
                query.stop()
            spark.streams.removeListener(listener.listener)
        return outcome, final

    def _await_end(self, query: Any, started: float, started_ms: int) -> str:
        """Watch the running query (started at ``started``, monotonic, and ``started_ms``, epoch) until it ends
        or is stopped between batches; its outcome.

        Raises ``JobFailed`` when the query, the coordinator or the lease fails.
        """
        opts, state, fence, coordinator = self.options, self.state, self.fence, self.coordinator
        next_control_check = 0.0
        outcome = "finished"
        while query.isActive:
            if coordinator.fatal or fence.lost:
                failure = fence.lost or coordinator.fatal
                self._stop_between_batches(query, f"a failure ({failure})")
                raise JobFailed(failure)
            if time.monotonic() >= next_control_check:
                next_control_check = time.monotonic() + CONTROL_POLL_SECONDS
                self.requests.poll(started_ms)
            overdue = opts.max_duration is not None and time.monotonic() - started > opts.max_duration
            if state.stop_requested.is_set() or overdue:
                if overdue:
                    log.info("--max-duration reached: stopping gracefully")
                self._stop_between_batches(query, "--max-duration" if overdue else "a stop request")
                outcome = "cancelled"
                break
            try:
                query.awaitTermination(0.2)
            except Exception as exc:  # the query died: report it in one line, checkpoints stay valid
                if state.stopping.is_set() and STOP_MARKER in str(exc):
                    break
                fence.fail_if_lost()
                if self._failed_while_stopping(exc):
                    break
                raise JobFailed(f"the streaming query failed: {first_line(str(exc))}") from exc
        if state.stop_requested.is_set():
            outcome = "cancelled"  # however the loop ended (a batch failed during the stop), it was asked
        for progress in query.recentProgress:  # the listener is asynchronous: fill in late batches
            batch_id, rows = progress_batch_rows(progress)
            state.rows[batch_id] = rows
        error = query.exception()
        stopped_by_us = state.stopping.is_set() and STOP_MARKER in str(error)
        if error is not None and not stopped_by_us and not self._failed_while_stopping(error):
            raise JobFailed(f"the streaming query failed: {first_line(str(error))}")
        if coordinator.fatal:
            raise JobFailed(coordinator.fatal)
        return outcome

    def _batch_function(self, sink: Sink):
        """``foreachBatch``'s function: stage (or, at-least-once, publish) one batch's output."""
        state, fence, coordinator = self.state, self.fence, self.coordinator
        at_least_once = self.options.checkpointing_mode == "at-least-once"

        def process(batch_df: Any, batch_id: int) -> None:
            if state.stopping.is_set():
                # Refuse the batch instead of being interrupted inside it: the query ends at once, nothing
                # of this batch is committed or staged, and the next run plans it again from the checkpoint.
                raise RuntimeError(f"{STOP_MARKER}: batch {batch_id} left to the next run")
            fence.check(f"staging batch {batch_id}")
            sink.write(batch_id, batch_df, state.run_id)
            if not at_least_once:
                state.staged(batch_id)
            faults.reach("batch")
            if at_least_once:
                fence.confirm(f"publishing batch {batch_id}")
                sink.commit(StagedOutput(coordinator.next_checkpoint_id, state.run_id, (batch_id,)))

        return process

    def _failed_while_stopping(self, error: BaseException) -> bool:
        """A batch that failed after a stop was asked for is left to the next run; the stop goes on.

        A signal to the whole process group also reaches the short-lived helpers Hadoop forks (``chmod`` for
        local files) and can fail the batch in flight. That batch never committed: the final checkpoint
        covers the last committed one, and the next run replays the rest.
        """
        if not self.state.stop_requested.is_set():
            return False
        log.warning(
            "the batch in flight failed while the job was stopping (%s); it is left to the next run",
            first_line(str(error)),
        )
        return True

    def _stop_between_batches(self, query: Any, cause: str) -> None:
        """Stop without interrupting a batch: stopping inside a Python foreachBatch can wedge the stream thread.

        An idle query (between triggers) is stopped at once. A busy one finishes the batch in flight; the
        next batch then refuses to start (see ``process``), which ends the query within one batch even when
        a backlog keeps triggers back to back.
        """
        self.state.stopping.set()
        with_savepoint = self.requests.stop_savepoint is not None
        self.bound_stop(cause, self.options.checkpoint_timeout if with_savepoint else 0.0)
        deadline = time.monotonic() + max(self.options.checkpoint_timeout, 60.0)
        while time.monotonic() < deadline and query.isActive:
            if not query.status.get("isTriggerActive"):
                break
            time.sleep(0.02)
        if query.isActive:
            query.stop()


def first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else "unknown error"
