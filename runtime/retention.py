"""Checkpoint retention: which checkpoints and shared files to keep, and deleting the rest safely.

Planning is pure (``plan_retention``) so the same rules serve the runtime's subsume step after each
completed checkpoint and a dry run. A shared file is deleted only when no retained checkpoint
references it; a checkpoint's ``_metadata`` is deleted before its folder, so a crash part-way leaves
garbage that later retention removes, never a checkpoint that claims files it no longer has.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from spark_checkpoint_runtime import faults
from spark_checkpoint_runtime.layout import (
    METADATA_FILE,
    SAVEPOINTS_DIR,
    SHARED_DIR,
    CheckpointMetadata,
    DamagedCheckpoint,
    JobFolder,
    PendingUpload,
    UnsupportedFormatVersion,
    checkpoint_dir_name,
    entry_intact,
    missing_files,
    parse_checkpoint_dir_name,
    referenced_files,
)
from spark_checkpoint_runtime.layout.store import is_object_store

log = logging.getLogger(__name__)


@dataclass
class RetentionPlan:
    """What the runtime's subsume step keeps and deletes. Paths are job-relative.

    ``damaged`` names checkpoints whose ``_metadata`` parses but which list a file that is not there (and
    why); ``missing`` holds those files' paths, so the next checkpoint can store them again.
    """

    keep: list[int]
    delete_checkpoints: list[int]
    delete_shared: list[str]
    damaged: dict[int, str] = field(default_factory=dict)
    missing: set[str] = field(default_factory=set)


def plan_retention(
    checkpoints: dict[int, CheckpointMetadata | None],
    listing: dict[str, int],
    num_retained: int,
    *,
    older_than: int,
    unknown_format: frozenset[int] = frozenset(),
) -> RetentionPlan:
    """Keep the ``num_retained`` newest *valid* checkpoints: ``_metadata`` parses and every file it lists is there.

    ``checkpoints`` maps every ``chk-<N>`` id to its parsed metadata, or None when it has no readable
    ``_metadata``; ``listing`` is one listing of the job folder (job-relative path to size), which is all
    validity needs. Only folders with an id below ``older_than`` may be deleted: anything at or above it may
    be a checkpoint in progress. The newest valid checkpoint is never deleted; with none valid, nothing is.
    A damaged checkpoint newer than the newest valid one stays (a person may want to look) until a newer
    valid one exists. No shared file that a remaining ``_metadata`` lists is deleted. ``unknown_format``: ids
    whose ``_metadata`` a newer runtime wrote; they stay, and while they do no shared file is deleted.
    """
    if num_retained < 1:
        raise ValueError("num_retained must be at least 1")
    damaged: dict[int, str] = {}
    missing: set[str] = set()
    valid: list[int] = []
    for checkpoint_id in sorted(checkpoints, reverse=True):
        meta = checkpoints[checkpoint_id]
        if meta is None:
            continue
        problems = missing_files(meta.files, listing)
        if problems:
            damaged[checkpoint_id] = problems
            missing |= {f.path for f in meta.files if not entry_intact(f, listing)}
        else:
            valid.append(checkpoint_id)
    keep = sorted(valid[:num_retained])
    if not keep:
        return RetentionPlan([], [], [], damaged, missing)
    newest_valid = keep[-1]

    def deletable(checkpoint_id: int) -> bool:
        if checkpoint_id in keep or checkpoint_id >= older_than or checkpoint_id in unknown_format:
            return False
        return checkpoint_id < newest_valid or checkpoints[checkpoint_id] is None

    delete = sorted(i for i in checkpoints if deletable(i))
    # Every _metadata that stays (kept, damaged-but-newer, possibly in progress) keeps its shared files.
    still_needed = referenced_files(m for i, m in checkpoints.items() if m is not None and i not in delete)
    unreadable_newer = [i for i, m in checkpoints.items() if m is None and i >= older_than]
    shared = (path for path in listing if path.startswith(f"{SHARED_DIR}/"))
    cannot_tell = unreadable_newer or unknown_format  # what those reference is unknown: it all stays
    delete_shared = [] if cannot_tell else sorted(p for p in shared if p not in still_needed)
    return RetentionPlan(keep, delete, delete_shared, damaged, missing)


class MetadataCache:
    """The ``_metadata`` a running job's retention has read, each with the size and modification time the
    listing showed for it then.

    ``_metadata`` is written once and never changed, so after each checkpoint only the new one is read: a
    checkpoint's requests do not grow with the number retained. A file the listing shows with another size
    or time (replaced behind the job's back) is read again.
    """

    def __init__(self) -> None:
        self._known: dict[int, tuple[tuple[int, float | None], CheckpointMetadata | None]] = {}
        self.unknown_format: set[int] = set()  # ids whose _metadata a newer runtime wrote

    def read(
        self, storage: JobFolder, checkpoint_id: int, listed: tuple[int, float | None], *, fresh: bool = False
    ) -> CheckpointMetadata | None:
        """The parsed ``_metadata`` of ``checkpoint_id`` (None if damaged), read only if not known as listed.

        ``fresh`` reads it regardless. A listing without a modification time never serves from the cache:
        the size alone cannot tell a replaced file.
        """
        known = self._known.get(checkpoint_id)
        if not fresh and listed[1] is not None and known is not None and known[0] == listed:
            return known[1]
        self.unknown_format.discard(checkpoint_id)
        try:
            meta: CheckpointMetadata | None = storage.checkpoints.read(checkpoint_id)
        except UnsupportedFormatVersion as exc:
            log.warning("%s; retention deletes no shared file while it is there (upgrade this runtime)", exc)
            self.unknown_format.add(checkpoint_id)
            meta = None
        except DamagedCheckpoint:
            meta = None
        self._known[checkpoint_id] = (listed, meta)
        return meta

    def forget_except(self, present: set[int]) -> None:
        """Drop what is no longer listed, so the cache holds at most the retained checkpoints."""
        for checkpoint_id in set(self._known) - present:
            del self._known[checkpoint_id]
        self.unknown_format &= present


def subsume(
    storage: JobFolder, num_retained: int, completed_id: int, cache: MetadataCache | None = None
) -> RetentionPlan:
    """After checkpoint ``completed_id`` completes: drop older checkpoints beyond ``num_retained`` valid ones.

    Runs between checkpoints (no upload in flight), so any shared file no remaining checkpoint references is
    garbage, including leftovers of checkpoints that failed or were cut off by a crash. One listing of the
    job folder serves both the validity check and the garbage search. With ``cache`` (the running job's),
    only ``_metadata`` not read before is read.
    """
    cache = cache if cache is not None else MetadataCache()
    details = storage.files_with_details(storage.job_path)
    listing = {path: size for path, (size, _) in details.items()}
    folder_files: dict[int, list[str]] = {}
    for path in details:
        checkpoint_id = parse_checkpoint_dir_name(path.split("/", 1)[0])
        if checkpoint_id is not None:
            folder_files.setdefault(checkpoint_id, []).append(path)
    # On an object store a folder is its files, so that listing shows every chk-<N>. On a disk a folder can be
    # empty (an attempt cut short), which only a listing of the job folder itself shows.
    ids = sorted(folder_files) if is_object_store(storage.fs) else storage.checkpoints.ids()
    checkpoints: dict[int, CheckpointMetadata | None] = {}
    for checkpoint_id in ids:
        listed = details.get(f"{checkpoint_dir_name(checkpoint_id)}/{METADATA_FILE}")
        # The checkpoint just completed, and anything newer, is always read: a run that lost the job may have
        # written that id before this one did (it withdraws it), and the two files can list alike.
        fresh = checkpoint_id >= completed_id
        checkpoints[checkpoint_id] = None if listed is None else cache.read(storage, checkpoint_id, listed, fresh=fresh)
    unknown = frozenset(cache.unknown_format & set(checkpoints))
    cache.forget_except({i for i, meta in checkpoints.items() if meta is not None} | unknown)
    plan = plan_retention(checkpoints, listing, num_retained, older_than=completed_id + 1, unknown_format=unknown)
    for checkpoint_id, reason in sorted(plan.damaged.items()):
        log.warning("chk-%d is damaged (%s); retention does not count it", checkpoint_id, reason)
    if not plan.keep:
        log.error("%s has no valid checkpoint; retention deletes nothing", storage.location)
    apply_plan(storage, plan, folder_files)
    return plan


def apply_plan(storage: JobFolder, plan: RetentionPlan, folder_files: dict[int, list[str]] | None = None) -> None:
    """Carry out a plan: checkpoints first (``_metadata`` before files), then unreferenced shared files.

    ``folder_files``: the job-relative files of each ``chk-<N>`` folder, from the listing the plan was made
    from; on an object store a checkpoint then goes in two batched deletes, with no listing of its folder.
    """
    for checkpoint_id in plan.delete_checkpoints:
        listed = folder_files.get(checkpoint_id, []) if folder_files is not None else None
        storage.checkpoints.discard([checkpoint_id], listed)
        faults.reach("retention-delete")
    if plan.delete_shared:  # together: on an object store 1,000 keys a request
        storage.delete_job_files(plan.delete_shared)
        faults.reach("retention-delete")
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


def externalized_retention_discards(policy: str, outcome: str) -> bool:
    """Does ``policy`` discard the job's checkpoints when a run ends with ``outcome``?"""
    return outcome in _DISCARD_ON.get(policy, set())


def apply_externalized_retention(storage: JobFolder, policy: str, outcome: str) -> list[int]:
    """Discard the job's checkpoints (never savepoints) if ``policy`` says so for ``outcome``.

    ``outcome`` is ``finished`` (available-now drained), ``cancelled`` (stopped on request) or ``failed``.
    Returns the ids deleted.
    """
    if not externalized_retention_discards(policy, outcome):
        return []
    ids = storage.checkpoints.ids()
    storage.checkpoints.discard(ids)
    storage.delete_job_files(list(storage.checkpoints.shared_files()))
    log.warning(
        "--externalized-retention %s: the run %s, so checkpoints %s were deleted; a next run restores a savepoint "
        "or starts fresh with --restore-from none ('latest' is refused: the job had checkpoints)",
        policy,
        outcome,
        ", ".join(f"chk-{i}" for i in ids) or "(none)",
    )
    return ids


@dataclass
class JobRetentionPlan:
    """Everything retention would delete for one job, with why it keeps the rest (job-relative paths)."""

    kept_checkpoints: list[int]
    kept_savepoints: list[str]
    delete_checkpoints: list[int]
    delete_savepoints: list[str]
    delete_orphan_folders: list[int]
    delete_shared: list[str]
    bytes_freed: int
    # savepoints/<name> folders without _metadata (a savepoint or rescale killed before it completed).
    delete_orphan_savepoints: list[str] = field(default_factory=list)
    # Multipart uploads older than the orphan grace that no writer completed (S3): aborted, so their parts go.
    abort_uploads: list[PendingUpload] = field(default_factory=list)
    # Job-relative paths of every file the planning listing saw in the folders it deletes (not reported):
    # on object storage they go in batched deletes, with no listing per folder.
    folder_files: list[str] = field(default_factory=list, repr=False)

    def summary(self, *, dry_run: bool) -> dict:
        """``as_report`` with each list replaced by its length (small enough for XCom, whatever the file count)."""
        report = self.as_report(dry_run=dry_run)
        for part in ("kept", "deleted"):
            report[part] = {name: len(items) for name, items in report[part].items()}
        return report

    def as_report(self, *, dry_run: bool) -> dict:
        return {
            "dry_run": dry_run,
            "kept": {"checkpoints": self.kept_checkpoints, "savepoints": self.kept_savepoints},
            "deleted": {
                "checkpoints": self.delete_checkpoints,
                "savepoints": self.delete_savepoints,
                "orphan_checkpoint_folders": self.delete_orphan_folders,
                "orphan_savepoint_folders": self.delete_orphan_savepoints,
                "shared_files": self.delete_shared,
                "pending_uploads": [upload.path for upload in self.abort_uploads],
            },
            "bytes_freed": self.bytes_freed,
        }


def plan_job_retention(
    storage: JobFolder,
    *,
    num_retained: int,
    savepoint_max_count: int | None = None,
    savepoint_max_age: float | None = None,
    orphan_grace: float = 3600.0,
    now: float,
) -> JobRetentionPlan:
    """Plan retention for a job that may be running right now.

    - Completed checkpoints beyond the ``num_retained`` newest are deleted.
    - Savepoints beyond ``savepoint_max_count`` or older than ``savepoint_max_age`` seconds are deleted,
      but the newest savepoint is always kept.
    - Orphans are deleted only when older than ``orphan_grace`` seconds: ``chk-*`` folders without a
      readable ``_metadata`` (a running job's pending checkpoint looks like one until it completes),
      ``savepoints/<name>`` folders without ``_metadata`` (a savepoint or rescale killed half-way; one being
      written looks the same until it completes) and shared files nothing retained references (a pending
      checkpoint uploads those first).
    """
    if num_retained < 1:
        raise ValueError("num_retained must be at least 1")
    # One listing of the whole job folder, grouped here: the number of list calls does not grow with the
    # number of checkpoints or of files per checkpoint.
    by_folder: dict[str, dict[str, tuple[int, float | None]]] = {}
    for path, details in storage.files_with_details(storage.job_path).items():
        parts = path.split("/")
        folder = "/".join(parts[:2]) if parts[0] == SAVEPOINTS_DIR and len(parts) > 2 else parts[0]
        by_folder.setdefault(folder, {})[path] = details
    orphan_folders: list[int] = []
    sizes: dict[int, int] = {}
    with_metadata: list[int] = []
    for folder, files in by_folder.items():
        checkpoint_id = parse_checkpoint_dir_name(folder)
        if checkpoint_id is None:
            continue
        sizes[checkpoint_id] = sum(size for size, _ in files.values())
        if f"{folder}/{METADATA_FILE}" in files:
            with_metadata.append(checkpoint_id)
        elif _untouched_for(files, orphan_grace, now):
            orphan_folders.append(checkpoint_id)
    # Only the kept checkpoints' _metadata is read (their shared files must stay): newest first until
    # num_retained are valid (files judged from the listing above). Every older checkpoint goes, readable or
    # not, so 10,000 of them cost no reads.
    everything = {path: size for files in by_folder.values() for path, (size, _) in files.items()}
    completed: dict[int, CheckpointMetadata] = {}
    staying_damaged: list[CheckpointMetadata] = []  # damaged, yet not deleted: what they list stays too
    unknown_format: list[int] = []  # a newer runtime wrote these: they stay, and so does every shared file
    delete: list[int] = []
    for checkpoint_id in sorted(with_metadata, reverse=True):
        if len(completed) >= num_retained:
            delete.append(checkpoint_id)
            continue
        try:
            meta: CheckpointMetadata | None = storage.checkpoints.read(checkpoint_id)
        except UnsupportedFormatVersion as exc:
            log.warning("%s; retention deletes no shared file while it is there (upgrade this runtime)", exc)
            unknown_format.append(checkpoint_id)
            continue
        except DamagedCheckpoint:
            meta = None
        if meta is not None and not missing_files(meta.files, everything):
            completed[checkpoint_id] = meta
        elif completed:
            delete.append(checkpoint_id)  # damaged, and a newer valid checkpoint is kept
        elif meta is not None:
            # Damaged with nothing valid newer: while nothing valid is kept it is all that is left of the job's
            # state (a lifecycle rule or a cleanup took its files), so it stays, however old, for a person to
            # look at; a newer valid checkpoint lets it go.
            staying_damaged.append(meta)
    keep = sorted(completed)
    delete.sort()
    orphan_folders.sort()

    savepoints: list[tuple[str, CheckpointMetadata]] = []
    savepoint_sizes: dict[str, int] = {}
    orphan_savepoints: list[str] = []
    for folder, files in by_folder.items():
        if not folder.startswith(f"{SAVEPOINTS_DIR}/"):
            continue
        name = folder.split("/", 1)[1]
        savepoint_sizes[name] = sum(size for size, _ in files.values())
        if f"{folder}/{METADATA_FILE}" not in files:
            if _untouched_for(files, orphan_grace, now):
                orphan_savepoints.append(name)
            continue
        try:
            savepoints.append((name, storage.savepoints.read(name)))
        except (DamagedCheckpoint, ValueError, FileNotFoundError):
            continue  # not ours to judge: retention never deletes what it cannot read
    savepoints.sort(key=lambda item: item[1].completion_timestamp_ms, reverse=True)
    drop_savepoints = []
    for index, (name, meta) in enumerate(savepoints):
        if index == 0:
            continue  # always keep the newest savepoint
        too_many = savepoint_max_count is not None and index >= savepoint_max_count
        too_old = savepoint_max_age is not None and now - meta.completion_timestamp_ms / 1000 > savepoint_max_age
        if too_many or too_old:
            drop_savepoints.append(name)
    kept_savepoints = [name for name, _ in savepoints if name not in drop_savepoints]

    referenced = referenced_files([*completed.values(), *staying_damaged])
    shared = by_folder.get(SHARED_DIR, {})
    delete_shared = sorted(
        path
        for path, (_, modified) in shared.items()
        if path not in referenced and modified is not None and now - modified > orphan_grace and not unknown_format
    )
    freed = sum(shared[p][0] for p in delete_shared) + sum(sizes[i] for i in delete + orphan_folders)
    orphan_savepoints.sort()
    freed += sum(savepoint_sizes[name] for name in drop_savepoints + orphan_savepoints)
    doomed = [checkpoint_dir_name(i) for i in delete + orphan_folders]
    doomed += [f"{SAVEPOINTS_DIR}/{name}" for name in drop_savepoints + orphan_savepoints]
    folder_files = [path for folder in doomed for path in by_folder.get(folder, {})]
    return JobRetentionPlan(
        keep,
        sorted(kept_savepoints),
        delete,
        sorted(drop_savepoints),
        orphan_folders,
        delete_shared,
        freed,
        abort_uploads=storage.pending_uploads(orphan_grace, now),
        folder_files=folder_files,
        delete_orphan_savepoints=orphan_savepoints,
    )


def _untouched_for(files: dict[str, tuple[int, float | None]], grace: float, now: float) -> bool:
    """True if the newest modification among ``files`` is older than ``grace`` seconds (an orphan folder)."""
    newest = max((modified for _, modified in files.values() if modified is not None), default=None)
    return newest is not None and now - newest > grace


def apply_job_retention(storage: JobFolder, plan: JobRetentionPlan) -> None:
    """Carry out a ``JobRetentionPlan``: metadata-first deletes, then files nothing references.

    A checkpoint that completed after the plan was made (a running job) may reference a shared file the plan
    judged an orphan (a restored file keeps its old modification time): every ``_metadata`` the plan did not
    read is read now, and what it lists is kept.
    """
    deleted = set(plan.delete_checkpoints + plan.delete_orphan_folders)
    in_savepoints = [path for path in plan.folder_files if path.startswith(f"{SAVEPOINTS_DIR}/")]
    in_checkpoints = [path for path in plan.folder_files if not path.startswith(f"{SAVEPOINTS_DIR}/")]
    storage.checkpoints.discard(sorted(deleted), in_checkpoints)
    storage.savepoints.discard(plan.delete_savepoints + plan.delete_orphan_savepoints, in_savepoints)
    storage.abort_uploads(plan.abort_uploads)
    newer = []
    for checkpoint_id in storage.checkpoints.ids():
        if checkpoint_id in deleted or checkpoint_id in plan.kept_checkpoints:
            continue
        try:
            newer.append(storage.checkpoints.read(checkpoint_id))
        except UnsupportedFormatVersion:
            return  # a newer runtime's checkpoint appeared: what it references is unknown, so nothing shared goes
        except DamagedCheckpoint:
            continue  # no _metadata yet: its shared files are new, so younger than the orphan grace
    still_listed = referenced_files(newer)
    storage.delete_job_files([path for path in plan.delete_shared if path not in still_listed])
