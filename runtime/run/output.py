"""Step 3 of a run, and the sink's side of every snapshot: restore the working folder, recover the output,
publish what each completed snapshot names.

Two-phase commit: batches are staged while they run; a snapshot's ``_metadata`` names the staged output it
publishes, and only once that ``_metadata`` is durable does the sink publish it (``Publisher``). A restore
publishes exactly what the restored snapshot names and aborts the rest (``recover_output``).
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable

from spark_checkpoint_runtime.coordinator import CheckpointCoordinator
from spark_checkpoint_runtime.errors import JobFailed, LeaseLost
from spark_checkpoint_runtime.layout import CheckpointMetadata, SavepointFolder
from spark_checkpoint_runtime.options import JobOptions
from spark_checkpoint_runtime.run.fence import RunFence
from spark_checkpoint_runtime.run.plan import RunPlan
from spark_checkpoint_runtime.run.state import RunState
from spark_checkpoint_runtime.sinks import Sink
from spark_checkpoint_runtime.snapshot import materialize
from spark_checkpoint_runtime.working_copy import WorkingCopy

log = logging.getLogger(__name__)


def restore_working_copy(plan: RunPlan, working: WorkingCopy, job_name: str) -> None:
    """Build the run's fresh working folder from the restored snapshot (never on top of a newer one)."""
    point = plan.point
    if point is None:
        return
    meta = point.metadata
    try:
        copied = materialize(point.snapshot, working, skip_state_operators=plan.restored_operators)
    except FileNotFoundError as exc:
        # Validated when resolved, gone since (deleted by hand, or by a retention that keeps fewer): a failed
        # run, not a bad restore point, so that a retry validates again and, with "latest", takes the newest
        # valid checkpoint. Nothing is written yet but this run's working folder, which the next run removes.
        raise JobFailed(
            f"{point.url}: a file its _metadata names went missing while this run restored from it "
            f"({exc.filename or exc}); it was deleted after the restore point was resolved, and nothing was "
            "written. Run again: the restore point is validated anew (with --restore-from latest the newest "
            "valid checkpoint is taken); find what deletes files under the checkpoint root"
        ) from exc
    log.info(
        "restoring job %r from %s %d (batch %d, %d files, %d bytes) at %s",
        job_name,
        meta.kind,
        meta.id,
        meta.batch_id,
        len(meta.files),
        copied,
        point.url,
    )


def recover_output(
    plan: RunPlan, coordinator: CheckpointCoordinator, sink: Sink, state: RunState, fence: RunFence
) -> None:
    """Make the sink's output match the history the run continues, before the query runs.

    Recovery moves output (publishes, aborts, sets aside), so it runs only under a confirmed lease: a run
    that lost the job between taking the lease and getting here moves nothing.
    """
    if plan.rewind:
        _start_branch(plan, coordinator, sink, state, fence)
    else:
        fence.confirm("recovering the sink's output")
        sink.recover(plan.point.metadata.staged if plan.point is not None else None, plan.history)


def _start_branch(
    plan: RunPlan, coordinator: CheckpointCoordinator, sink: Sink, state: RunState, fence: RunFence
) -> None:
    """A rewind: a checkpoint of the restored state above every id in sight, then the sink's recovery.

    Until that checkpoint's ``_metadata`` exists, "latest" still continues the old history and nothing
    of it was touched; from then on "latest" continues the new one, which recovery then makes true of
    the output (a crash part-way is finished by the next restore from latest).
    """
    meta = plan.point.metadata
    state.carry(meta.staged)  # a commit of the restored snapshot cut short is finished from here
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
    fence.confirm("recovering the sink's output")
    sink.recover(first.staged, first.history)


def prune_set_aside(sink: Sink, fence: RunFence, older_than_s: float) -> None:
    """Delete output the sink set aside longer than ``--set-aside-retention`` ago (a sink that can)."""
    prune = getattr(sink, "prune", None)
    if prune is None:
        return

    def confirm() -> None:
        fence.confirm("pruning output set aside")

    try:
        if _accepts(prune, "before_delete"):
            # Confirmed only before a delete: most runs find nothing due, and on an object store it is a LIST.
            prune(older_than_s, before_delete=confirm)
        else:  # a sink written to the older protocol
            confirm()
            prune(older_than_s)
    except LeaseLost:
        raise
    except Exception:  # housekeeping: the next run tries again
        log.warning("could not prune the sink's set-aside output", exc_info=True)


def _accepts(function: Callable[..., object], name: str) -> bool:
    """Does ``function`` take a keyword argument ``name``? (False when its signature cannot be read.)"""
    try:
        return name in inspect.signature(function).parameters
    except (TypeError, ValueError):
        return False


class Publisher:
    """The coordinator's ``on_completed``: publish what a completed snapshot names, then (claim mode) drop
    the restored savepoint once the run has a checkpoint of its own."""

    def __init__(self, sink: Sink, plan: RunPlan, state: RunState, fence: RunFence, options: JobOptions):
        self.sink = sink
        self.point = plan.point
        self.state = state
        self.fence = fence
        self.storage_options = options.storage_options
        point = plan.point
        self.claimed = point is not None and point.metadata.kind == "savepoint" and options.claim_mode == "claim"

    def __call__(self, meta: CheckpointMetadata) -> None:
        staged = meta.staged
        if staged is not None:
            self.fence.confirm(f"publishing output up to batch {meta.batch_id}")
            self.sink.commit(staged)
            self.state.published(staged)
        if self.claimed and meta.kind == "checkpoint":
            # CLAIM: the job owns the savepoint it restored; once a checkpoint of its own exists, it goes.
            self.claimed = False
            self.fence.confirm("deleting the claimed savepoint")
            log.info("--claim-mode claim: deleting the restored savepoint %s", self.point.url)
            SavepointFolder(self.point.url, self.storage_options).discard_listed(self.point.metadata)
