"""Step 5 of a run: the final checkpoint, Flink's externalized-retention policy, and the run report."""

from __future__ import annotations

import logging
from typing import Any

from spark_checkpoint_runtime.coordinator import CheckpointCoordinator
from spark_checkpoint_runtime.errors import JobFailed
from spark_checkpoint_runtime.layout import CheckpointMetadata, JobFolder
from spark_checkpoint_runtime.options import JobOptions
from spark_checkpoint_runtime.restore import RestorePoint
from spark_checkpoint_runtime.retention import apply_externalized_retention, externalized_retention_discards
from spark_checkpoint_runtime.run.fence import RunFence
from spark_checkpoint_runtime.run.state import RunState
from spark_checkpoint_runtime.working_copy import WorkingCopy

log = logging.getLogger(__name__)

RECENT_CHECKPOINTS = 20  # the run report lists this many of the run's newest checkpoints, and counts them all


def final_checkpoint(
    coordinator: CheckpointCoordinator, working: WorkingCopy, options: JobOptions
) -> CheckpointMetadata | None:
    """Checkpoint the run's last committed batch unless a checkpoint covers it already.

    Retried up to ``--tolerable-failed-checkpoints`` times; ``JobFailed`` if it never completes (output
    after the previous checkpoint stays staged and is recomputed on restore).
    """
    batches = working.committed_batches()
    if not batches:
        log.info("no batch ran in this run; nothing new to checkpoint")
        return coordinator.latest
    last = batches[-1]
    if last <= coordinator.covered_batch:
        return coordinator.latest
    for _attempt in range(options.tolerable_failed_checkpoints + 1):
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


def externalized_retention(storage: JobFolder, fence: RunFence, options: JobOptions, outcome: str) -> None:
    """Flink's externalized-checkpoint policy, only while this run still holds the job (it deletes)."""
    if not externalized_retention_discards(options.externalized_retention, outcome):
        return
    if not fence.holds(f"--externalized-retention {options.externalized_retention}"):
        return  # another run holds the job: its checkpoints are not ours to delete
    apply_externalized_retention(storage, options.externalized_retention, outcome)


def run_report(
    storage: JobFolder,
    options: JobOptions,
    state: RunState,
    point: RestorePoint | None,
    coordinator: CheckpointCoordinator,
    final: CheckpointMetadata | None,
    outcome: str,
) -> dict[str, Any]:
    """The run's JSON-able result (printed by the CLI, written to ``_control/runs/<key>.json``)."""
    latest = final or coordinator.latest or (point.metadata if point else None)
    rows = state.rows
    return {
        "job_name": options.job_name,
        "run_id": state.run_id,
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
        "savepoint_path": state.savepoint_url,
        "savepoint_id": state.savepoint.id if state.savepoint else None,
    }
