"""Savepoint and stop requests from Airflow, answered by the running job.

Airflow writes a request under ``_control/`` keyed by its trigger id; the job polls for it (one listing,
which also confirms the lease), answers ``in_progress``, takes the savepoint (or stops), and answers with the
outcome. A stop-with-savepoint is kept until the query has stopped between batches.
"""

from __future__ import annotations

import logging

from spark_checkpoint_runtime.coordinator import CheckpointCoordinator
from spark_checkpoint_runtime.errors import JobFailed
from spark_checkpoint_runtime.layout import (
    CheckpointFormatError,
    CheckpointMetadata,
    ControlChannel,
    ControlRequest,
    JobFolder,
    SavepointFolder,
)
from spark_checkpoint_runtime.options import JobOptions
from spark_checkpoint_runtime.run.fence import RunFence
from spark_checkpoint_runtime.run.finish import final_checkpoint
from spark_checkpoint_runtime.run.state import RunState
from spark_checkpoint_runtime.snapshot_targets import SavepointTarget
from spark_checkpoint_runtime.working_copy import WorkingCopy

log = logging.getLogger(__name__)

# One listing of _control/ per poll (9,600 a day on object storage); a stop or savepoint request waits at most this.
CONTROL_POLL_SECONDS = 9.0


def check_savepoint_target(storage: JobFolder, options: JobOptions, target: str | None) -> None:
    """A savepoint may go under the job's checkpoint root or a ``--savepoint-targets`` prefix, nowhere else."""
    prefixes = [t.strip() for t in options.savepoint_targets.split(",") if t.strip()]
    storage.savepoints.check_target(target, prefixes)


class ControlRequests:
    """Answers the requests addressed to this run (its run key, or any run if the request names none)."""

    def __init__(
        self,
        control: ControlChannel,
        options: JobOptions,
        state: RunState,
        fence: RunFence,
        coordinator: CheckpointCoordinator,
        working: WorkingCopy,
    ):
        self.control = control
        self.options = options
        self.state = state
        self.fence = fence
        self.coordinator = coordinator
        self.working = working
        self.stop_savepoint: tuple[ControlRequest, SavepointFolder] | None = None

    def poll(self, started_ms: int) -> None:
        """Read and answer pending requests; requests made before ``started_ms`` without a run key expire.

        The same listing confirms the lease: a newer epoch marks it lost, and the query loop stops.
        """
        control = self.control
        try:
            listed_at = self.fence.clock()
            poll = control.poll()
        except Exception:  # storage hiccup: try again at the next poll, never fail the job for it
            log.warning("could not read control requests", exc_info=True)
            return
        if not self.fence.observe(poll.lease_names, "answering control requests", listed_at):
            return  # the lease is lost: the query loop stops the run
        run_id = self.state.run_id
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
                control.respond(request.trigger_id, {"status": "accepted", "action": "stop", "run_id": run_id})
                self.state.request_stop()
                continue
            storage = self.coordinator.storage
            try:
                check_savepoint_target(storage, self.options, request.target_directory)
                folder = storage.savepoints.folder_for(request.trigger_id, request.target_directory)
            except CheckpointFormatError as exc:
                control.respond(request.trigger_id, {"status": "rejected", "reason": str(exc)})
                continue
            control.respond(request.trigger_id, {"status": "in_progress", "run_id": run_id})
            if request.stop:
                self.stop_savepoint = (request, folder)
                self.state.request_stop()
            else:
                self.take_savepoint(request, folder)

    def take_savepoint(self, request: ControlRequest, folder: SavepointFolder) -> CheckpointMetadata | None:
        """Savepoint the newest completed batch into ``folder`` and answer the request."""
        control, run_id = self.control, self.state.run_id
        batches = self.working.committed_batches()
        if not batches:
            reason = "the job has not completed a batch yet; ask again once it has"
            control.respond(request.trigger_id, {"status": "failed", "reason": reason, "run_id": run_id})
            return None
        outcome = self.coordinator.savepoint_now(batches[-1], SavepointTarget(folder))
        if outcome.result is None:
            control.respond(request.trigger_id, {"status": "failed", "reason": outcome.reason, "run_id": run_id})
            return None
        control.respond(
            request.trigger_id,
            {
                "status": "completed",
                "savepoint_path": folder.url,
                "savepoint_id": outcome.result.id,
                "batch_id": outcome.result.batch_id,
                "stopped": request.stop,
                "run_id": run_id,
            },
        )
        self.state.savepoint = outcome.result
        self.state.savepoint_url = folder.url
        return outcome.result

    def savepoint_and_stop(self) -> CheckpointMetadata | None:
        """Stop-with-savepoint: the query has stopped between batches; savepoint it (sinks commit on it)."""
        request, folder = self.stop_savepoint
        if self.take_savepoint(request, folder) is None:
            final = final_checkpoint(self.coordinator, self.working, self.options)  # nothing is lost either way
            reason = (self.control.response(request.trigger_id) or {}).get("reason")
            raise JobFailed(
                f"stop-with-savepoint failed ({reason}); the job stopped after a final checkpoint "
                f"{final.id if final else '(none needed)'} instead"
            )
        return self.coordinator.latest
