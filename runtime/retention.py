"""Checkpoint retention: which checkpoints and shared files to keep, and deleting the rest safely.

Planning is pure (``plan_retention``) so the same rules serve the runtime's subsume step after each
completed checkpoint and a dry run. A shared file is deleted only when no retained checkpoint
references it; a checkpoint's ``_metadata`` is deleted before its folder, so a crash part-way leaves
garbage that later retention removes, never a checkpoint that claims files it no longer has.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from runtime.layout import CheckpointMetadata, CheckpointStorage, DamagedCheckpoint, referenced_files

log = logging.getLogger(__name__)


@dataclass
class RetentionPlan:
    """What retention keeps and deletes. Paths are job-relative."""

    keep: list[int]
    delete_checkpoints: list[int]
    delete_shared: list[str]
    bytes_freed: int = 0
    kept_metadata: list[CheckpointMetadata] = field(default_factory=list)

    def as_report(self) -> dict:
        return {
            "kept": self.keep,
            "deleted_checkpoints": self.delete_checkpoints,
            "deleted_shared_files": len(self.delete_shared),
            "bytes_freed": self.bytes_freed,
        }


def plan_retention(
    checkpoints: dict[int, CheckpointMetadata | None],
    shared_files: dict[str, int],
    num_retained: int,
    *,
    older_than: int,
    checkpoint_sizes: dict[int, int] | None = None,
    pinned: set[str] = frozenset(),
) -> RetentionPlan:
    """Keep the ``num_retained`` newest completed checkpoints.

    ``checkpoints`` maps every ``chk-<N>`` id to its parsed metadata, or None when it has no readable
    ``_metadata``. Only folders with an id below ``older_than`` may be deleted: anything at or above it
    may be a checkpoint in progress. ``pinned`` holds shared files that must survive regardless.
    """
    if num_retained < 1:
        raise ValueError("num_retained must be at least 1")
    completed = sorted((i for i, m in checkpoints.items() if m is not None), reverse=True)
    keep = sorted(completed[:num_retained])
    delete = sorted(i for i in checkpoints if i not in keep and i < older_than)
    kept_metadata = [checkpoints[i] for i in keep]
    still_needed = referenced_files(kept_metadata) | set(pinned)
    # Checkpoints newer than `older_than` may be in progress: their shared files stay too.
    still_needed |= referenced_files(m for i, m in checkpoints.items() if m is not None and i >= older_than)
    unreadable_newer = [i for i, m in checkpoints.items() if m is None and i >= older_than]
    delete_shared = [] if unreadable_newer else sorted(p for p in shared_files if p not in still_needed)
    freed = sum(shared_files[p] for p in delete_shared) + sum((checkpoint_sizes or {}).get(i, 0) for i in delete)
    return RetentionPlan(keep, delete, delete_shared, freed, kept_metadata)


def subsume(storage: CheckpointStorage, num_retained: int, completed_id: int) -> RetentionPlan:
    """After checkpoint ``completed_id`` completes: drop older checkpoints beyond ``num_retained``.

    Runs between checkpoints (no upload in flight), so any shared file not referenced by a retained
    checkpoint is garbage, including leftovers of checkpoints that failed or were cut off by a crash.
    """
    checkpoints: dict[int, CheckpointMetadata | None] = {}
    for checkpoint_id in storage.checkpoint_ids():
        try:
            checkpoints[checkpoint_id] = storage.read_checkpoint(checkpoint_id)
        except DamagedCheckpoint:
            checkpoints[checkpoint_id] = None
    plan = plan_retention(checkpoints, storage.shared_files(), num_retained, older_than=completed_id + 1)
    apply_plan(storage, plan)
    return plan


def apply_plan(storage: CheckpointStorage, plan: RetentionPlan) -> None:
    """Carry out a plan: checkpoints first (``_metadata`` before files), then unreferenced shared files."""
    for checkpoint_id in plan.delete_checkpoints:
        storage.discard_checkpoint(checkpoint_id)
    for relative in plan.delete_shared:
        storage.delete_job_file(relative)
    if plan.delete_checkpoints or plan.delete_shared:
        log.info(
            "retention kept %s, deleted checkpoints %s and %d shared file(s)",
            ", ".join(f"chk-{i}" for i in plan.keep),
            ", ".join(f"chk-{i}" for i in plan.delete_checkpoints) or "none",
            len(plan.delete_shared),
        )


# Flink's externalized-checkpoint retention: which run outcomes discard the job's checkpoints.
_DISCARD_ON = {
    "retain-on-cancellation": set(),
    "delete-on-cancellation": {"finished", "cancelled"},
    "no-externalized": {"finished", "cancelled", "failed"},
}


def apply_externalized_retention(storage: CheckpointStorage, policy: str, outcome: str) -> list[int]:
    """Discard the job's checkpoints (never savepoints) if ``policy`` says so for ``outcome``.

    ``outcome`` is ``finished`` (available-now drained), ``cancelled`` (stopped on request) or ``failed``.
    Returns the ids deleted.
    """
    if outcome not in _DISCARD_ON.get(policy, set()):
        return []
    ids = storage.checkpoint_ids()
    for checkpoint_id in ids:
        storage.discard_checkpoint(checkpoint_id)
    for relative in storage.shared_files():
        storage.delete_job_file(relative)
    log.warning(
        "--externalized-retention %s: the run %s, so checkpoints %s were deleted; the next run starts fresh",
        policy,
        outcome,
        ", ".join(f"chk-{i}" for i in ids) or "(none)",
    )
    return ids
