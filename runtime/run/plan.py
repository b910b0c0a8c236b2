"""Step 2 of a run: what it restores, from where, with which checks, and how it continues.

The restore point is resolved here and nowhere else: once before Spark starts (bad input fails fast and
leaves the root untouched), checked against the new pipeline, and once more when the run holds the job
(``settle``): with ``--restore-from latest`` the previous holder may have completed a checkpoint since.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from spark_checkpoint_runtime.errors import ExistingOutput
from spark_checkpoint_runtime.layout import (
    CheckpointFormatError,
    CheckpointMetadata,
    JobFolder,
    JobListing,
    Lineage,
    NoValidCheckpoint,
)
from spark_checkpoint_runtime.layout.lineage import MAX_RANGES, MAX_WRITTEN_RANGES
from spark_checkpoint_runtime.options import JobOptions
from spark_checkpoint_runtime.restore import RestorePoint, check_compatible, resolve_restore_point, starts_new_branch
from spark_checkpoint_runtime.sinks import Sink, highest_published_id
from spark_checkpoint_runtime.snapshot import StoredFiles

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunPlan:
    """What a run restores and how it continues, settled while it holds the job."""

    point: RestorePoint | None
    restored_operators: int | None  # with --allow-non-restored-state, how many operators' state is restored
    history: Lineage  # the history the run continues: the restored snapshot's, or the output it keeps
    rewind: bool  # the restore leaves a newer history behind (an older checkpoint, a savepoint)
    next_id: int  # ids only grow: above every id in the job folder, the history and the published output

    @property
    def stored(self) -> StoredFiles:
        """Files the run's first checkpoint may reference instead of storing again.

        A rewind stores the restored state afresh: an old checkpoint's shared files are not the latest
        checkpoint's, so retention running beside the job may delete them while they are referenced.
        """
        if self.point is None or self.rewind:
            return StoredFiles()
        return StoredFiles(self.point.metadata.files, self.point.snapshot.listed_sizes)


class RunPlanner:
    """Resolves and checks a run's restore point, then settles its plan under the lease."""

    def __init__(self, storage: JobFolder, options: JobOptions, run_id: str):
        self.storage = storage
        self.options = options
        self.run_id = run_id
        self.point: RestorePoint | None = None
        self.restored_operators: int | None = None
        self._has_own_history: bool | None = None

    def resolve(self) -> RestorePoint | None:
        """Resolve ``--restore-from`` (reads only); None starts fresh."""
        self.point = resolve_restore_point(self.storage, self.options.restore_from)
        return self.point

    def pinned_confs(self) -> dict[str, str] | None:
        """The confs Spark pinned in the snapshot to restore (None for a fresh start): a restored query runs
        with these, whatever the session says."""
        if self.point is None:
            return None
        return {str(k): str(v) for k, v in (self.point.metadata.fingerprint.get("pinned_confs") or {}).items()}

    def check_compatible(self, fingerprint: dict[str, Any], spark: Any) -> None:
        """Refuse a restore whose snapshot the new pipeline cannot continue (nothing is written yet)."""
        if self.point is not None:
            self._check_compatible(fingerprint, spark)

    def check_existing_output(self, sink: Sink) -> None:
        """Refuse to write over published output that the restored history does not own, unless
        ``--existing-output`` says what to do: a fresh start, or a savepoint of another job."""
        if self.point is None:
            self._check_fresh_start(sink)
        elif self._foreign():
            self._check_foreign_savepoint(sink)

    def _foreign(self) -> bool:
        """Is the restore point a savepoint of another job, restored into a job with a history of its own?

        A job with no checkpoint of its own yet restoring another job's savepoint continues that job (an
        upgrade under a new name, writing the same sink): the savepoint's history owns the sink's output. A job
        that has completed checkpoints has output of its own there, which the other job's ids do not name.
        """
        if self.point is None or self.point.metadata.job_name == self.storage.job_name:
            return False
        if self._has_own_history is None:
            self._has_own_history = self._own_history_besides(self.point.metadata)
        return self._has_own_history

    def _own_history_besides(self, savepoint: CheckpointMetadata) -> bool:
        """Has this job completed checkpoints that do not continue ``savepoint`` itself?

        A job whose newest checkpoint was restored from this very savepoint (an earlier attempt of the same
        restore, cut short) continues it: asking again is the same restore. Unreadable counts as a history.
        """
        newest = self.storage.checkpoints.newest_metadata_id()
        if newest is None:
            return self.storage.ids.completed() is not None
        try:
            restored = self.storage.checkpoints.read(newest).restored_from or {}
        except CheckpointFormatError:
            return True
        return not (restored.get("kind") == "savepoint" and restored.get("id") == savepoint.id)

    def settle(self, fingerprint: dict[str, Any], spark: Any, sink: Sink) -> RunPlan:
        """The plan, now that the run holds the job: the newest restore point, history, rewind and first id."""
        # One listing of the job folder answers every question below: this run holds the job now.
        listing = self.storage.listing()
        if self.options.restore_from == "latest":
            # The previous holder may have completed a checkpoint since we looked: restore the newest.
            newest = self._latest_again(listing)
            if newest is not self.point:  # a newer checkpoint, or the resolved one discarded or changed since
                if newest is None:
                    raise NoValidCheckpoint(
                        f"{self.storage.location}: chk-{self.point.metadata.id} was discarded after this run "
                        "resolved it, and no valid checkpoint is left; restore from a savepoint or a copy "
                        "(--restore-from PATH), or pass --restore-from none to start from empty state on purpose"
                    )
                self.point = newest
                self._check_compatible(fingerprint, spark)
        point = self.point
        published = highest_published_id(sink)  # one listing of the sink, now that this run holds the job
        history = self._history(sink, published)
        if len(history.ranges) > MAX_WRITTEN_RANGES:
            history = self._compacted(history, sink)
        return RunPlan(
            point=point,
            restored_operators=self.restored_operators,
            history=history,
            rewind=point is not None and starts_new_branch(self.storage, point, listing),
            next_id=max(self.storage.next_checkpoint_id(listing), history.highest + 1, published + 1),
        )

    def _latest_again(self, listing: JobListing) -> RestorePoint | None:
        """``--restore-from latest`` once more, now that the run holds the job, validating the point once.

        A newer valid checkpoint wins. Otherwise the resolved point stands while its ``_metadata`` is still
        the one resolved: whatever discards a checkpoint (a run's retention under the lease, the retention
        operator without it) deletes ``_metadata`` before the files. Gone or changed (a run that held the job
        meanwhile discarded it), the whole resolve runs again, which also refuses a job whose state is gone.
        Returns ``self.point`` itself when it stands. ``listing``: the job folder's, taken under the lease.
        """
        if self.point is None:
            return resolve_restore_point(self.storage, self.options.restore_from)
        resolved = self.point.metadata
        try:
            newer = self.storage.checkpoints.latest_valid(newer_than=resolved.id, ids=listing.checkpoint_ids)
        except NoValidCheckpoint:  # newer ones, all damaged (each logged): the resolved point may stand
            newer = None
        if newer is not None:
            return RestorePoint(newer)
        try:
            unchanged = self.storage.checkpoints.read(resolved.id).to_json() == resolved.to_json()
        except CheckpointFormatError:
            unchanged = False
        return self.point if unchanged else resolve_restore_point(self.storage, self.options.restore_from)

    def _compacted(self, history: Lineage, sink: Sink) -> Lineage:
        """Close the gaps of a long history that no output and no snapshot uses (a job that rewinds often)."""
        used_ids = getattr(sink, "used_ids", None)
        if used_ids is None:
            log.warning(
                "the history has %d ranges and sink %s cannot say which ids its output uses; it is kept as is",
                len(history.ranges),
                self.options.sink,
            )
            return history
        snapshots = [*self.storage.checkpoints.ids(), *self.storage.savepoints.ids(), *self.storage.ids.ids()]
        in_use = set(used_ids()) | set(snapshots)
        compacted = history.compacted(in_use)
        log.info(
            "history of %d ranges written as %d: gaps no output uses are closed",
            len(history.ranges),
            len(compacted.ranges),
        )
        return compacted

    def _check_compatible(self, fingerprint: dict[str, Any], spark: Any) -> None:
        self.restored_operators = check_compatible(
            self.point, fingerprint, spark, allow_non_restored_state=self.options.allow_non_restored_state
        )

    def _check_fresh_start(self, sink: Sink) -> None:
        """Refuse to start from empty state into published output unless ``--existing-output`` says what to do."""
        published = highest_published_id(sink)
        if published and self.options.existing_output == "fail":
            raise ExistingOutput(
                f"{self.storage.location} starts fresh, but its sink already holds output published up to "
                f"checkpoint {published}: every row would be published again. Restore from a checkpoint or "
                "savepoint, or pass --existing-output move-aside (set that output aside under _rolled_back/) or "
                "keep (keep it and continue after it)"
            )

    def _check_foreign_savepoint(self, sink: Sink) -> None:
        published = highest_published_id(sink)
        if published and self.options.existing_output == "fail":
            meta = self.point.metadata
            raise ExistingOutput(
                f"{self.storage.location} restores from a savepoint of job {meta.job_name!r} ({self.point.url}), "
                f"but its sink holds this job's output published up to checkpoint {published}: that history is "
                "not the savepoint's, so rows would be published twice or missing. Pass --existing-output "
                "move-aside (set that output aside under _rolled_back/) or keep (keep it and continue after it), "
                "or restore from a savepoint of this job"
            )

    def _history(self, sink: Sink, published: int) -> Lineage:
        """The history this run continues: the restored snapshot's, or on a fresh start what output it keeps.

        ``published`` is the sink's highest published (or set-aside) checkpoint id. Another job's savepoint
        restored into a job with a history of its own brings its state, not its output: for this sink the run
        starts like a fresh one.
        """
        if self.point is not None and not self._foreign():
            return self.point.metadata.history
        return fresh_start_history(self.options, sink, published, self.run_id)


def fresh_start_history(options: JobOptions, sink: Sink, published: int, run_id: str) -> Lineage:
    """A fresh start's history: empty, or with ``--existing-output keep`` exactly the ids published now."""
    if published and options.existing_output == "keep":
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
    log.info("job %r run %s starts fresh", options.job_name, run_id)
    return Lineage()
