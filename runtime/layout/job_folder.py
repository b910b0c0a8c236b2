"""One job's folder under a checkpoint root: where it is, its files, deletes that stay inside it, the next id,
resolving a restore location (one of its checkpoints or a savepoint anywhere).

A ``JobFolder`` is the entry point to one job's storage. What lives in the folder has its own class, each
reached from the job folder: ``.checkpoints`` (``CompletedCheckpoints``: ``chk-<N>`` and ``shared/``) and
``.savepoints`` (``Savepoints``: ``savepoints/``). The control channel is ``ControlChannel(job_folder)``.
"""

from __future__ import annotations

import json
import logging
import os
import posixpath
import stat
from typing import Any

from fsspec.core import split_protocol
from fsspec.implementations.local import LocalFileSystem

from spark_checkpoint_runtime.layout.completed_checkpoints import CompletedCheckpoints
from spark_checkpoint_runtime.layout.control import control_path
from spark_checkpoint_runtime.layout.errors import CheckpointFormatError, DamagedCheckpoint
from spark_checkpoint_runtime.layout.id_record import IdRecord
from spark_checkpoint_runtime.layout.job_listing import JobListing
from spark_checkpoint_runtime.layout.metadata import ValidCheckpoint
from spark_checkpoint_runtime.layout.names import (
    JOB_NAME_PATTERN,
    METADATA_FILE,
    REPORTS_DIR,
    checkpoint_dir_name,
    is_inside,
    parse_checkpoint_dir_name,
    relative_to,
    safe_relative_path,
    validate_job_name,
    validate_key,
)
from spark_checkpoint_runtime.layout.savepoints import SavepointFolder, Savepoints
from spark_checkpoint_runtime.layout.store import (
    PendingUpload,
    abort_uploads,
    delete_each,
    discard_folders,
    files_under,
    is_object_store,
    keeps_empty_folders,
    make_folder,
    modified_time,
    open_url,
    pending_uploads,
    probe_exclusive_create,
)

log = logging.getLogger(__name__)

# A job from before the id record: a folder an attempt left (no _metadata) lies just above the newest id known.
LEGACY_ATTEMPT_REACH = 1000


class JobFolder:
    """One job's folder under a checkpoint root, with its completed checkpoints and savepoints.

    ``root`` is a plain path, ``file://`` URL or any fsspec URL; ``storage_options`` go to fsspec
    (credentials live there and are never written to ``_metadata`` or logs).
    """

    def __init__(self, root: str, job_name: str, storage_options: dict[str, Any] | None = None):
        self.job_name = validate_job_name(job_name)
        self.storage_options = dict(storage_options or {})
        self.root_url = str(root)
        if not self.root_url.strip():
            raise CheckpointFormatError("checkpoint root is empty; pass --checkpoint-root PATH or URL")
        try:
            self.fs, root_path = open_url(self.root_url, storage_options)
        except (ValueError, ImportError) as exc:
            raise CheckpointFormatError(f"checkpoint root {self.root_url!r} cannot be opened: {exc}") from None
        self.root_path = root_path.rstrip("/") or "/"
        self.job_path = posixpath.join(self.root_path, self.job_name)
        self.checkpoints = CompletedCheckpoints(self)
        self.savepoints = Savepoints(self)
        self.ids = IdRecord(self)

    # --- paths -----------------------------------------------------------------------------------
    def __repr__(self) -> str:
        return f"JobFolder({self.root_url!r}, job={self.job_name!r})"

    @property
    def location(self) -> str:
        """Human-readable location of the job folder, for messages."""
        return f"checkpoint root {self.root_url}: job {self.job_name!r}"

    def job_file(self, relative: str) -> str:
        """Full path of a job-relative path, refusing one that would leave the job folder."""
        return posixpath.join(self.job_path, safe_relative_path(relative, context=self.location))

    def url_of(self, path: str) -> str:
        """A URL for a path of this storage's filesystem (what a person or another tool can open)."""
        return self.fs.unstrip_protocol(path)

    def check_exclusive_create(self) -> None:
        """Refuse (``StoreNotExclusive``) a store that cannot create a file exclusively; once per run."""
        probe_exclusive_create(self.fs, control_path(self), location=self.location)

    def listing(self) -> JobListing:
        """One listing of the job folder, for a caller that asks it several things at once (``JobListing``)."""
        try:
            entries = self.fs.ls(self.job_path, detail=False)
        except FileNotFoundError:
            entries = []
        return JobListing(self.checkpoints, [posixpath.basename(e.rstrip("/")) for e in entries])

    def next_checkpoint_id(self, listing: JobListing | None = None) -> int:
        """The id for the next snapshot: past the id record, every ``_metadata`` and every savepoint here.

        Checkpoints and savepoints share one counter, as in Flink. A ``chk-<N>`` folder without ``_metadata``
        (what a failed or killed attempt leaves) counts only where an attempt could have left it: at or below
        the id record, or (a job from before the record) near the newest id known. One far above (a bad copy,
        a typo) is reported and ignored: it would make every later id huge. ``listing``: the job folder's
        ``listing()`` a caller already took.
        """
        listing = listing if listing is not None else self.listing()
        recorded = self.ids.highest()
        folders = listing.checkpoint_ids
        with_metadata = listing.newest_metadata_id or 0
        savepoint_ids = self.savepoints.ids() if listing.has_savepoints else []
        known = max([recorded, with_metadata, *savepoint_ids])
        reach = recorded if recorded else known + LEGACY_ATTEMPT_REACH
        strays = [i for i in folders if i > max(reach, with_metadata)]
        for stray in strays:
            log.warning(
                "%s: ignoring %s, a folder without _metadata far above every id the job has used (%d); "
                "it was not written by a run of this job: delete it, or let retention remove it",
                self.location,
                checkpoint_dir_name(stray),
                known,
            )
        attempts = [i for i in folders if i not in strays]
        return max([known, *attempts]) + 1

    def resolve_snapshot(self, location: str, option: str = "--restore-from") -> ValidCheckpoint:
        """Resolve a user-given snapshot path and validate what is there.

        A savepoint (folder or its ``_metadata``) may be anywhere: it is self-contained. A checkpoint must be
        one of this job's ``chk-<N>`` folders inside the checkpoint root: its shared files live beside it.
        Anything else is refused with a message saying what was given (as ``option``) and what would work.
        """
        savepoint = SavepointFolder.probe(location, self.storage_options, option)
        if savepoint is not None:
            return savepoint.validate()
        self._refuse_unfinished(location, option)
        protocol, _ = split_protocol(location)
        own = self.fs.protocol if isinstance(self.fs.protocol, tuple | list) else (self.fs.protocol,)
        same_storage = (protocol or "file") in own
        path = posixpath.normpath(self.fs._strip_protocol(location)) if same_storage else location
        if posixpath.basename(path) == METADATA_FILE:
            path = posixpath.dirname(path)
        if not same_storage or not is_inside(path, self.job_path):
            raise CheckpointFormatError(
                f"{option} {location!r} is outside {self.location} ({self.url_of(self.job_path)}) and is "
                "not a savepoint; pass one of this job's chk-<N> folders, a savepoint folder, 'latest' or 'none'"
            )
        relative = posixpath.relpath(path, self.job_path)
        checkpoint_id = parse_checkpoint_dir_name(relative)
        if checkpoint_id is None:
            raise CheckpointFormatError(
                f"{option} {location!r} is not a checkpoint folder of job {self.job_name!r}: "
                f"expected {self.url_of(self.job_path)}/chk-<N> or a savepoint folder"
            )
        try:
            meta = self.checkpoints.validate(checkpoint_id)
        except DamagedCheckpoint as exc:
            raise CheckpointFormatError(f"{option} {location!r} cannot be used: {exc.reason}") from None
        return ValidCheckpoint(meta, path, self.fs, self.job_path)

    def _refuse_unfinished(self, location: str, option: str) -> None:
        """Name a folder without ``_metadata`` for what it is, rather than "not a checkpoint folder"."""
        try:
            folder = SavepointFolder(location, self.storage_options)
            unfinished = folder.unfinished()
        except Exception:  # unreadable: the checks after this one say what is wrong with the location
            return
        if unfinished:
            raise CheckpointFormatError(
                f"{option} {location!r} is an unfinished snapshot: the folder has files but no _metadata "
                "(written last), so whatever wrote it stopped before it completed. Pass a completed savepoint "
                "or chk-<N> folder ('list' shows them) or 'latest'. Inside the job folder, retention deletes it once "
                "the orphan grace has passed"
            )

    def write_report(self, kind: str, key: str, report: dict[str, Any], keep: int = 100) -> str:
        """Store a full report (``_reports/<kind>-<key>.json``) and return its URL.

        Only the ``keep`` newest reports of a kind stay: the folder must not grow with every maintenance run.
        """
        folder = posixpath.join(self.job_path, REPORTS_DIR)
        path = posixpath.join(folder, f"{kind}-{validate_key(key, 'report key')}.json")
        make_folder(self.fs, folder)
        self.fs.pipe_file(path, json.dumps(report, indent=1, sort_keys=True).encode("utf-8"))
        try:
            found = self.fs.ls(folder, detail=True)
        except FileNotFoundError:
            found = []
        reports = [
            info for info in found if posixpath.basename(info["name"]).startswith(f"{kind}-") and info["name"] != path
        ]
        reports.sort(key=lambda info: modified_time(info) or 0.0, reverse=True)
        stale = [info["name"] for info in reports[max(0, keep - 1) :]]
        delete_each(self.fs, self.inside_job(stale), recursive=False)
        return self.url_of(path)

    # --- listing ---------------------------------------------------------------------------------
    def job_files(self) -> dict[str, int]:
        """Every file of the job folder in one listing: job-relative path to size.

        What retention judges validity and garbage by: one recursive listing, however many checkpoints.
        """
        return {path: size for path, (size, _) in self.files_with_details(self.job_path).items()}

    def files_with_details(self, folder: str) -> dict[str, tuple[int, float | None]]:
        """Every file under a job folder: job-relative path to (size, modification time in epoch seconds)."""
        return {relative_to(path, self.job_path): details for path, details in files_under(self.fs, folder).items()}

    def file_size(self, relative: str) -> int | None:
        """Size of a job-relative file, or None if it does not exist."""
        try:
            return int(self.fs.size(self.job_file(relative)))
        except FileNotFoundError:
            return None

    def job_names(self) -> list[str]:
        """Every job folder under the root (names that pass the job-name rules)."""
        try:
            entries = self.fs.ls(self.root_path, detail=True)
        except FileNotFoundError:
            return []
        names = (posixpath.basename(e["name"].rstrip("/")) for e in entries if e.get("type") == "directory")
        return sorted(n for n in names if JOB_NAME_PATTERN.match(n) and set(n) != {"."})

    # --- deletes ---------------------------------------------------------------------------------
    def discard_snapshots(self, folders: list[str], listed_files: list[str] | None) -> None:
        """Delete snapshot folders of this job, every ``_metadata`` first (see ``store.discard_folders``).

        ``listed_files``: the job-relative paths of every file in them, from a fresh listing of the job
        folder; on object storage the files then go in batched deletes without listing each folder again.
        """
        # Only an object store deletes by the listed files; elsewhere each folder goes whole.
        listed = None
        if listed_files is not None and is_object_store(self.fs):
            listed = self.inside_job([self.job_file(r) for r in listed_files])
        discard_folders(self.fs, self.inside_job(folders), listed)
        if listed is not None and keeps_empty_folders(self.fs):  # deleted by files, the folders stay: take them
            self._remove_empty_folders({posixpath.dirname(path) for path in listed})

    def delete_job_files(self, relatives: list[str]) -> None:
        """Delete many job-relative files (shared files nothing references any more), several at a time.

        Where folders outlive their files (a local disk, Azure with a hierarchical namespace) the folders the
        deletes empty go too (``shared/<run>/...``), so the job folder does not keep one empty folder per run
        forever; on S3 and GCS a folder is only a prefix of keys.
        """
        paths = self.inside_job([self.job_file(relative) for relative in relatives])
        delete_each(self.fs, paths, recursive=False)
        if keeps_empty_folders(self.fs):
            self._remove_empty_folders({posixpath.dirname(path) for path in paths})

    def pending_uploads(self, older_than: float, now: float) -> list[PendingUpload]:
        """Multipart uploads under the job folder begun more than ``older_than`` seconds before ``now`` and never
        completed (a writer killed mid-upload of a large file); empty on stores without them."""
        return [u for u in pending_uploads(self.fs, self.job_path) if now - u.initiated > older_than]

    def abort_uploads(self, uploads: list[PendingUpload]) -> None:
        """Abort ``uploads`` (from ``pending_uploads``) that lie inside the job folder."""
        inside = set(self.inside_job([upload.path for upload in uploads]))
        abort_uploads(self.fs, [upload for upload in uploads if upload.path in inside])

    def _remove_empty_folders(self, folders: set[str]) -> None:
        """Remove each of ``folders`` that is empty, then its parents up to (not including) the job folder."""
        for folder in sorted(folders, key=len, reverse=True):
            while folder.startswith(self.job_path + "/"):
                try:
                    self.fs.rmdir(folder)
                except OSError:  # not empty (still referenced files), or gone already
                    break
                folder = posixpath.dirname(folder)

    def inside_job(self, paths: list[str]) -> list[str]:
        """``paths`` that really lie inside the job folder; a path that a symlink leads out of it is skipped.

        Deletes go through here: ``shared/`` or a ``chk-<N>`` folder that is a link to elsewhere (planted, or a
        mistake) must never make retention delete files outside the job folder.
        """
        if not isinstance(self.fs, LocalFileSystem):
            return paths  # object stores have no links
        home = os.path.realpath(self.job_path)
        inside = []
        for path in paths:
            if self._no_link_below_job(path):
                inside.append(path)
                continue
            real = os.path.realpath(path)
            if real == home or real.startswith(home.rstrip("/") + "/"):
                inside.append(path)
            else:
                log.error("not deleting %s: it leads out of the job folder (to %s)", path, real)
        return inside

    def _no_link_below_job(self, path: str) -> bool:
        """True when ``path`` names a place under the job folder through real folders only.

        One ``lstat`` per level below the job folder, where a full ``realpath`` resolves every level from
        ``/``: retention checks 10,000 folders at a time. Anything else (a link, a missing level, a path
        not spelled under the job folder) goes to the full check.
        """
        current = self.job_path.rstrip("/")
        if not path.startswith(current + "/"):
            return False
        for part in path[len(current) + 1 :].rstrip("/").split("/"):
            if part in ("", ".", ".."):
                return False
            current = f"{current}/{part}"
            try:
                if stat.S_ISLNK(os.lstat(current).st_mode):
                    return False
            except OSError:
                return False
        return True
