"""Restore: choose the snapshot to start from and check the new pipeline can continue from it.

``--restore-from latest`` takes the newest valid checkpoint (damaged ones are skipped with a warning);
with no checkpoint at all the job starts fresh and says so. When checkpoints exist but none is valid the
job refuses to start: silently starting from empty state would lose it. ``none`` always starts fresh.
A path must be one of this job's ``chk-<N>`` folders, or a savepoint folder anywhere (savepoints are
self-contained). Nothing here writes to storage.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from spark_checkpoint_runtime.fingerprint import IncompatibleRestore, differences, pinned_conf_values
from spark_checkpoint_runtime.layout import (
    CheckpointMetadata,
    JobFolder,
    JobListing,
    NoValidCheckpoint,
    ValidCheckpoint,
)
from spark_checkpoint_runtime.spark_versions import restore_version_difference, upgrade_note

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RestorePoint:
    """The snapshot (checkpoint or savepoint) a run starts from."""

    snapshot: ValidCheckpoint

    @property
    def metadata(self) -> CheckpointMetadata:
        return self.snapshot.metadata

    @property
    def url(self) -> str:
        return self.snapshot.url

    def describe(self) -> dict[str, Any]:
        """What ``restored_from`` records in the next checkpoints' ``_metadata``."""
        return {
            "id": self.metadata.id,
            "kind": self.metadata.kind,
            "batch_id": self.metadata.batch_id,
            "path": self.url,
            "spark_version": self.metadata.spark_version,  # an upgrade of Spark shows in the lineage
        }


def resolve_restore_point(storage: JobFolder, restore_from: str) -> RestorePoint | None:
    """Resolve ``--restore-from`` to a validated snapshot, or None to start fresh."""
    choice = restore_from.strip()
    if choice == "none":
        existing = storage.checkpoints.ids()
        if existing:
            log.warning(
                "--restore-from none: starting fresh although %s has checkpoints up to chk-%d; "
                "their state is not carried over",
                storage.location,
                existing[-1],
            )
        return None
    if choice == "latest":
        found = storage.checkpoints.latest_valid()
        if found is None:
            _refuse_lost_state(storage)
            log.info("no checkpoint under %s; starting fresh", storage.location)
            return None
        return RestorePoint(found)
    found = storage.resolve_snapshot(choice)
    if found.metadata.kind == "savepoint" and found.metadata.job_name != storage.job_name:
        log.warning(
            "restoring job %r from a savepoint of job %r: its state, not its output (--existing-output decides "
            "what happens to this job's output)",
            storage.job_name,
            found.metadata.job_name,
        )
    return RestorePoint(found)


def _refuse_lost_state(storage: JobFolder) -> None:
    """No checkpoint is left: refuse to start from empty state if the job has completed checkpoints before."""
    completed = storage.ids.completed()
    if completed is None:
        return
    first = completed.get("first_checkpoint")
    since = f" (its first was chk-{first}, by run {completed.get('run_id', '?')})" if first is not None else ""
    raise NoValidCheckpoint(
        f"{storage.location} has no checkpoint left, but the job has completed checkpoints before{since}: its "
        "state was deleted, and a fresh start would count from zero. Restore from a savepoint or a copy of the "
        "checkpoints (--restore-from PATH), or pass --restore-from none to start from empty state on purpose"
    )


def starts_new_branch(storage: JobFolder, point: RestorePoint, listing: JobListing | None = None) -> bool:
    """Does restoring ``point`` leave a history behind (a rewind)?

    It does for every savepoint, and for a checkpoint when a newer one of the job has a ``_metadata``
    (valid or not: a damaged one could be readable again tomorrow). Such a run first writes a checkpoint of
    its own above every id in sight, so that "latest" follows the new history from then on, before any output
    of the old one is set aside. ``listing``: the job folder's ``listing()`` a caller already took.
    """
    if point.metadata.kind == "savepoint":
        return True
    newest = (listing if listing is not None else storage.listing()).newest_metadata_id
    return newest is not None and newest > point.metadata.id


def check_compatible(
    point: RestorePoint, fingerprint: dict[str, Any], spark: Any, *, allow_non_restored_state: bool = False
) -> int | None:
    """Raise ``IncompatibleRestore`` listing every difference between the snapshot and the new pipeline.

    Returns the number of stateful operators whose state is restored when ``allow_non_restored_state``
    drops trailing ones (None: all of them).
    """
    saved = point.metadata.fingerprint
    current_confs = pinned_conf_values(spark, sorted((saved.get("pinned_confs") or {}).keys()))
    found = differences(saved, fingerprint, current_confs, allow_non_restored_state=allow_non_restored_state)
    newer = restore_version_difference(point.metadata.spark_version, spark.version)
    if newer:
        found.append(newer)
    if found:
        raise IncompatibleRestore(point.url, found)
    upgrade = upgrade_note(point.metadata.spark_version, spark.version, fingerprint.get("state_store") or {})
    if upgrade:
        log.warning("%s", upgrade)
    kept, had = len(fingerprint.get("operators", [])), len(saved.get("operators", []))
    if kept < had:
        log.warning("--allow-non-restored-state: the state of %d stateful operator(s) is not restored", had - kept)
        return kept
    return None
