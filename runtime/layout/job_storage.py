"""One job's folder under a checkpoint root: listing, reading and validating checkpoints, "latest", discards."""

from __future__ import annotations

import json
import logging
import os
import posixpath
import stat
from collections.abc import Iterator
from typing import Any

import fsspec
from fsspec.core import split_protocol
from fsspec.implementations.local import LocalFileSystem

from spark_checkpoint_runtime.layout.errors import CheckpointFormatError, DamagedCheckpoint, NoValidCheckpoint
from spark_checkpoint_runtime.layout.metadata import (
    CheckpointMetadata,
    ValidCheckpoint,
    missing_files,
    read_metadata,
)
from spark_checkpoint_runtime.layout.names import (
    CONTROL_DIR,
    JOB_NAME_PATTERN,
    METADATA_FILE,
    REPORTS_DIR,
    SAVEPOINTS_DIR,
    SHARED_DIR,
    checkpoint_dir_name,
    is_inside,
    normalized_location,
    parse_checkpoint_dir_name,
    relative_to,
    safe_relative_path,
    validate_job_name,
    validate_key,
)
from spark_checkpoint_runtime.layout.savepoints import SavepointFolder
from spark_checkpoint_runtime.layout.store import (
    delete_each,
    discard_folders,
    files_under,
    is_object_store,
    modified_time,
    open_url,
    probe_exclusive_create,
    write_metadata_atomically,
)

log = logging.getLogger(__name__)


class CheckpointStorage:
    """All access to one job's folder under a checkpoint root.

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

    # --- paths -----------------------------------------------------------------------------------
    def __repr__(self) -> str:
        return f"CheckpointStorage({self.root_url!r}, job={self.job_name!r})"

    @property
    def location(self) -> str:
        """Human-readable location of the job folder, for messages."""
        return f"checkpoint root {self.root_url}: job {self.job_name!r}"

    def job_file(self, relative: str) -> str:
        """Full path of a job-relative path, refusing one that would leave the job folder."""
        return posixpath.join(self.job_path, safe_relative_path(relative, context=self.location))

    def checkpoint_path(self, checkpoint_id: int) -> str:
        return posixpath.join(self.job_path, checkpoint_dir_name(checkpoint_id))

    def checkpoint_relative_file(self, checkpoint_id: int, target: str) -> str:
        """Job-relative path where checkpoint ``checkpoint_id`` keeps a file it owns."""
        return posixpath.join(checkpoint_dir_name(checkpoint_id), safe_relative_path(target, context="target"))

    def shared_relative_file(self, run_id: str, target: str, *, variant: str | None = None) -> str:
        """Job-relative path of a shared file (state data, source log) uploaded by run ``run_id``."""
        name = safe_relative_path(target, context="target")
        if variant:
            name = f"{name}.{variant}"
        return posixpath.join(SHARED_DIR, run_id, name)

    @property
    def shared_path(self) -> str:
        return posixpath.join(self.job_path, SHARED_DIR)

    @property
    def savepoints_path(self) -> str:
        return posixpath.join(self.job_path, SAVEPOINTS_DIR)

    @property
    def control_path(self) -> str:
        return posixpath.join(self.job_path, CONTROL_DIR)

    def write_report(self, kind: str, key: str, report: dict[str, Any], keep: int = 100) -> str:
        """Store a full report (``_reports/<kind>-<key>.json``) and return its URL.

        Only the ``keep`` newest reports of a kind stay: the folder must not grow with every maintenance run.
        """
        folder = posixpath.join(self.job_path, REPORTS_DIR)
        path = posixpath.join(folder, f"{kind}-{validate_key(key, 'report key')}.json")
        self.fs.makedirs(folder, exist_ok=True)
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

    def url_of(self, path: str) -> str:
        """A URL for a path of this storage's filesystem (what a person or another tool can open)."""
        return self.fs.unstrip_protocol(path)

    def check_exclusive_create(self) -> None:
        """Refuse (``StoreNotExclusive``) a store that cannot create a file exclusively; once per run."""
        probe_exclusive_create(self.fs, self.control_path, location=self.location)

    # --- listing ---------------------------------------------------------------------------------
    def checkpoint_ids(self) -> list[int]:
        """Ids of every ``chk-<N>`` folder, complete or not, ascending."""
        try:
            entries = self.fs.ls(self.job_path, detail=False)
        except FileNotFoundError:
            return []
        ids = [parse_checkpoint_dir_name(posixpath.basename(e.rstrip("/"))) for e in entries]
        return sorted(i for i in ids if i is not None)

    def newest_metadata_id(self) -> int | None:
        """The newest ``chk-<N>`` that has a ``_metadata`` file, parseable or not (None: no such folder)."""
        for checkpoint_id in reversed(self.checkpoint_ids()):
            if self.fs.exists(posixpath.join(self.checkpoint_path(checkpoint_id), METADATA_FILE)):
                return checkpoint_id
        return None

    def next_checkpoint_id(self) -> int:
        """The id for the next checkpoint: past every ``chk-<N>`` and savepoint here, so ids keep increasing.

        Checkpoints and savepoints share one counter, as in Flink.
        """
        ids = self.checkpoint_ids()
        for name in self.savepoint_names():
            try:
                ids.append(self.read_savepoint(name).id)
            except (DamagedCheckpoint, ValueError):
                continue
        return (max(ids) + 1) if ids else 1

    def shared_files(self) -> dict[str, int]:
        """Every file under ``shared/``: job-relative path to size."""
        try:
            found = self.fs.find(self.shared_path, detail=True)
        except FileNotFoundError:
            return {}
        return {
            relative_to(path, self.job_path): int(info.get("size") or 0)
            for path, info in found.items()
            if info.get("type") != "directory"
        }

    def referenced_shared_files(self, meta: CheckpointMetadata) -> dict[str, int]:
        """The files under the ``shared/<run>/`` folders ``meta`` references: job-relative path to size.

        Enough to validate that one snapshot, at a listing cost that follows the runs it references rather
        than every file the job ever shared (what a page showing one job's restore point can afford).
        """
        runs, top_level = set(), False
        for entry in meta.files:
            parts = entry.path.split("/")
            if parts[0] == SHARED_DIR and len(parts) > 2:
                runs.add(posixpath.join(parts[0], parts[1]))
            elif parts[0] == SHARED_DIR:
                top_level = True  # not a layout the runtime writes, but _metadata is untrusted: look it up
        found: dict[str, int] = {}
        for run in sorted(runs):
            details = self.files_with_details(posixpath.join(self.job_path, run))
            found.update({path: size for path, (size, _) in details.items()})
        if top_level:
            try:
                entries = self.fs.ls(self.shared_path, detail=True)
            except FileNotFoundError:
                entries = []
            for info in entries:
                if info.get("type") != "directory":
                    found[relative_to(info["name"], self.job_path)] = int(info.get("size") or 0)
        return found

    def job_files(self) -> dict[str, int]:
        """Every file of the job folder in one listing: job-relative path to size.

        What retention judges validity and garbage by: one recursive listing, however many checkpoints.
        """
        return {path: size for path, (size, _) in self.files_with_details(self.job_path).items()}

    def files_with_details(self, folder: str) -> dict[str, tuple[int, float | None]]:
        """Every file under a job folder: job-relative path to (size, modification time in epoch seconds)."""
        return {relative_to(path, self.job_path): details for path, details in files_under(self.fs, folder).items()}

    def job_names(self) -> list[str]:
        """Every job folder under the root (names that pass the job-name rules)."""
        try:
            entries = self.fs.ls(self.root_path, detail=True)
        except FileNotFoundError:
            return []
        names = (posixpath.basename(e["name"].rstrip("/")) for e in entries if e.get("type") == "directory")
        return sorted(n for n in names if JOB_NAME_PATTERN.match(n) and set(n) != {"."})

    # --- savepoints ----------------------------------------------------------------------------------
    def savepoint_names(self) -> list[str]:
        """Folder names under ``savepoints/``, sorted."""
        try:
            entries = self.fs.ls(self.savepoints_path, detail=False)
        except FileNotFoundError:
            return []
        return sorted(posixpath.basename(e.rstrip("/")) for e in entries)

    def savepoint_path(self, name: str) -> str:
        return posixpath.join(self.savepoints_path, validate_key(name, "savepoint name"))

    def read_savepoint(self, name: str) -> CheckpointMetadata:
        meta = self.read_metadata_at(self.savepoint_path(name))
        if meta.kind != "savepoint":
            raise DamagedCheckpoint(
                self.url_of(self.savepoint_path(name)), f"_metadata says {meta.kind}, not savepoint"
            )
        return meta

    def discard_savepoints(self, names: list[str], listed_files: list[str] | None = None) -> None:
        """Delete savepoint folders, every ``_metadata`` first; ``listed_files`` as in ``discard_checkpoints``."""
        self._discard([self.savepoint_path(name) for name in names], listed_files)

    # --- _metadata -------------------------------------------------------------------------------
    def read_metadata_at(self, folder: str, fs: fsspec.AbstractFileSystem | None = None) -> CheckpointMetadata:
        """Read and parse ``<folder>/_metadata``; raise ``DamagedCheckpoint`` if missing or malformed."""
        return read_metadata(fs or self.fs, folder)

    def read_checkpoint(self, checkpoint_id: int) -> CheckpointMetadata:
        meta = self.read_metadata_at(self.checkpoint_path(checkpoint_id))
        self._check_belongs(meta, checkpoint_id)
        return meta

    def _check_belongs(self, meta: CheckpointMetadata, checkpoint_id: int) -> None:
        location = self.url_of(self.checkpoint_path(checkpoint_id))
        if meta.job_name != self.job_name:
            raise DamagedCheckpoint(location, f"_metadata belongs to job {meta.job_name!r}, not {self.job_name!r}")
        if meta.id != checkpoint_id or meta.kind != "checkpoint":
            raise DamagedCheckpoint(
                location, f"_metadata says {meta.kind} {meta.id}, folder says checkpoint {checkpoint_id}"
            )

    def write_checkpoint_metadata(self, meta: CheckpointMetadata) -> str:
        """Write ``chk-<N>/_metadata`` atomically (temporary file, then rename). Returns its path."""
        folder = self.checkpoint_path(meta.id)
        return write_metadata_atomically(self.fs, folder, meta)

    def discard_checkpoint(self, checkpoint_id: int) -> None:
        """Delete a checkpoint folder: ``_metadata`` first, so a crash leaves garbage, never a lie."""
        self.discard_checkpoints([checkpoint_id])

    def discard_own_checkpoint(self, checkpoint_id: int, run_id: str) -> None:
        """Discard a failed checkpoint of run ``run_id``, unless another run completed that id meanwhile.

        Ids can only collide when two runs write one job (a zombie that lost the lease): the other run's
        completed checkpoint must survive the zombie's clean-up.
        """
        writer = self._metadata_writer(checkpoint_id)
        if writer is not None and writer != run_id:
            log.warning("leaving chk-%d alone: run %s completed it", checkpoint_id, writer)
            return
        self.discard_checkpoint(checkpoint_id)

    def discard_checkpoints(self, checkpoint_ids: list[int], listed_files: list[str] | None = None) -> None:
        """Delete many checkpoint folders, every ``_metadata`` first (see ``discard_folders``).

        ``listed_files``: the job-relative paths of every file in them, from a fresh listing of the job
        folder; on object storage the files then go in batched deletes without listing each folder again.
        """
        self._discard([self.checkpoint_path(i) for i in checkpoint_ids], listed_files)

    def _discard(self, folders: list[str], listed_files: list[str] | None) -> None:
        # Only an object store deletes by the listed files; elsewhere each folder goes whole.
        listed = None
        if listed_files is not None and is_object_store(self.fs):
            listed = self.inside_job([self.job_file(r) for r in listed_files])
        discard_folders(self.fs, self.inside_job(folders), listed)

    def delete_job_files(self, relatives: list[str]) -> None:
        """Delete many job-relative files (shared files nothing references any more), several at a time."""
        delete_each(self.fs, self.inside_job([self.job_file(relative) for relative in relatives]), recursive=False)

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

    def withdraw_checkpoint_metadata(self, checkpoint_id: int, run_id: str) -> None:
        """Delete ``chk-<N>/_metadata`` if run ``run_id`` wrote it (a run that lost the job takes it back)."""
        if self._metadata_writer(checkpoint_id) == run_id:
            delete_each(self.fs, [posixpath.join(self.checkpoint_path(checkpoint_id), METADATA_FILE)], recursive=False)

    def _metadata_writer(self, checkpoint_id: int) -> str | None:
        """The run that wrote ``chk-<N>/_metadata``, or None if there is no readable one."""
        try:
            return read_metadata(self.fs, self.checkpoint_path(checkpoint_id)).run_id
        except CheckpointFormatError:
            return None

    def file_size(self, relative: str) -> int | None:
        """Size of a job-relative file, or None if it does not exist."""
        try:
            return int(self.fs.size(self.job_file(relative)))
        except FileNotFoundError:
            return None

    def delete_job_file(self, relative: str) -> None:
        """Delete one job-relative file (a shared file nothing references any more)."""
        self.delete_job_files([relative])

    # --- validation and "latest" ------------------------------------------------------------------
    def validate_checkpoint(
        self,
        checkpoint_id: int,
        shared_listing: dict[str, int] | None = None,
        meta: CheckpointMetadata | None = None,
    ) -> CheckpointMetadata:
        """Return the metadata if every file it lists exists with the recorded size, else raise.

        ``shared_listing``: sizes of shared files already listed (default: all of ``shared/``); ``meta``: the
        checkpoint's ``_metadata`` already read.
        """
        meta = meta if meta is not None else self.read_checkpoint(checkpoint_id)
        folder = self.checkpoint_path(checkpoint_id)
        shared = shared_listing if shared_listing is not None else self.shared_files()
        try:
            owned = {
                relative_to(path, self.job_path): int(info.get("size") or 0)
                for path, info in self.fs.find(folder, detail=True).items()
                if info.get("type") != "directory"
            }
        except FileNotFoundError:
            owned = {}
        problems = missing_files(meta.files, {**owned, **shared})
        if problems:
            raise DamagedCheckpoint(self.url_of(folder), problems)
        return meta

    def iter_valid_checkpoints(
        self, newer_than: int | None = None, ids: list[int] | None = None
    ) -> Iterator[tuple[int, CheckpointMetadata | DamagedCheckpoint]]:
        """Newest first (down to ``newer_than``, exclusive): each checkpoint id with its metadata, or why not valid.

        Each is checked against a listing of only the ``shared/<run>/`` folders its ``_metadata`` references:
        the cost follows the checkpoints looked at, never every file the job ever shared, and nothing is
        listed beyond the job folder when no checkpoint is newer than ``newer_than``. ``ids``: the
        ``checkpoint_ids()`` a caller already listed.
        """
        for checkpoint_id in reversed(self.checkpoint_ids() if ids is None else ids):
            if newer_than is not None and checkpoint_id <= newer_than:
                return
            try:
                meta = self.read_checkpoint(checkpoint_id)
                yield checkpoint_id, self.validate_checkpoint(checkpoint_id, self.referenced_shared_files(meta), meta)
            except DamagedCheckpoint as exc:
                yield checkpoint_id, exc

    def latest_valid_checkpoint(self, *, newer_than: int | None = None) -> ValidCheckpoint | None:
        """The newest checkpoint whose ``_metadata`` parses and whose files all exist.

        Damaged ones are skipped with a warning naming why. Returns None when there are no checkpoints
        (newer than ``newer_than``, if given). Raises ``NoValidCheckpoint`` when checkpoints exist but none
        is valid, because starting from empty state then would silently lose data.
        """
        skipped: list[str] = []
        for checkpoint_id, result in self.iter_valid_checkpoints(newer_than):
            if isinstance(result, DamagedCheckpoint):
                if result.reason.startswith("no _metadata"):
                    continue  # in progress or abandoned mid-upload: never a completed checkpoint
                log.warning("skipping damaged checkpoint %s: %s", checkpoint_dir_name(checkpoint_id), result.reason)
                skipped.append(f"{checkpoint_dir_name(checkpoint_id)}: {result.reason}")
                continue
            return ValidCheckpoint(result, self.checkpoint_path(checkpoint_id), self.fs, self.job_path)
        if skipped:
            raise NoValidCheckpoint(
                f"{self.location} has no valid checkpoint ({'; '.join(skipped)}); "
                "pass --restore-from PATH to pick one, or --restore-from none to start fresh"
            )
        return None

    def completed_checkpoints(self) -> list[CheckpointMetadata]:
        """Every checkpoint whose ``_metadata`` parses (files not checked), oldest first."""
        found = []
        for checkpoint_id in self.checkpoint_ids():
            try:
                found.append(self.read_checkpoint(checkpoint_id))
            except DamagedCheckpoint:
                continue
        return found

    # --- restore sources --------------------------------------------------------------------------
    def resolve_snapshot(self, location: str) -> ValidCheckpoint:
        """Resolve a user-given restore path and validate what is there.

        A savepoint (folder or its ``_metadata``) may be anywhere: it is self-contained. A checkpoint must be
        one of this job's ``chk-<N>`` folders inside the checkpoint root: its shared files live beside it.
        Anything else is refused with a message saying what was given and what would work.
        """
        savepoint = SavepointFolder.probe(location, self.storage_options)
        if savepoint is not None:
            return savepoint.validate()
        protocol, _ = split_protocol(location)
        own = self.fs.protocol if isinstance(self.fs.protocol, tuple | list) else (self.fs.protocol,)
        same_storage = (protocol or "file") in own
        path = posixpath.normpath(self.fs._strip_protocol(location)) if same_storage else location
        if posixpath.basename(path) == METADATA_FILE:
            path = posixpath.dirname(path)
        if not same_storage or not is_inside(path, self.job_path):
            raise CheckpointFormatError(
                f"--restore-from {location!r} is outside {self.location} ({self.url_of(self.job_path)}) and is "
                "not a savepoint; pass one of this job's chk-<N> folders, a savepoint folder, 'latest' or 'none'"
            )
        relative = posixpath.relpath(path, self.job_path)
        checkpoint_id = parse_checkpoint_dir_name(relative)
        if checkpoint_id is None:
            raise CheckpointFormatError(
                f"--restore-from {location!r} is not a checkpoint folder of job {self.job_name!r}: "
                f"expected {self.url_of(self.job_path)}/chk-<N> or a savepoint folder"
            )
        try:
            meta = self.validate_checkpoint(checkpoint_id)
        except DamagedCheckpoint as exc:
            raise CheckpointFormatError(f"--restore-from {location!r} cannot be used: {exc.reason}") from None
        return ValidCheckpoint(meta, path, self.fs, self.job_path)

    def check_savepoint_target(self, target: str | None, prefixes: list[str]) -> None:
        """Refuse (``CheckpointFormatError``) a savepoint ``target`` outside the checkpoint root and ``prefixes``.

        Whoever can write a control request must not make the job write its state anywhere it likes.
        """
        if target is None:
            return
        allowed = [self.root_url, *prefixes]
        wanted = normalized_location(target)
        for prefix in map(normalized_location, allowed):
            if wanted == prefix or wanted.startswith(prefix.rstrip("/") + "/"):
                return
        raise CheckpointFormatError(
            f"target_directory {target!r} is not under the job's checkpoint root or a --savepoint-targets prefix "
            f"({', '.join(allowed)}); start the job with --savepoint-targets to allow it"
        )

    def default_savepoint_folder(self, trigger_id: str, target_directory: str | None = None) -> SavepointFolder:
        """Where the savepoint for ``trigger_id`` goes: ``target_directory`` or ``<job>/savepoints/``."""
        name = f"savepoint-{validate_key(trigger_id, 'trigger id')}"
        if target_directory:
            return SavepointFolder(posixpath.join(target_directory.rstrip("/"), name), self.storage_options)
        return SavepointFolder(self.url_of(posixpath.join(self.savepoints_path, name)), self.storage_options)


def find_completed_checkpoint(
    storage: CheckpointStorage, newer_than: int | None = None, completed_after_ms: int | None = None
) -> dict[str, Any] | None:
    """The newest valid completed checkpoint (newer than ``newer_than``) as a JSON-able summary, or None.

    The one condition behind the checkpoint sensor's poke and its trigger. With ``completed_after_ms``
    (epoch milliseconds) the newest one counts only if it completed after that moment. All checkpoints being
    damaged counts as "none yet" here (a warning is logged); restoring is where that is refused.
    """
    try:
        found = storage.latest_valid_checkpoint(newer_than=newer_than)
    except NoValidCheckpoint as exc:
        log.warning("%s", exc)
        return None
    if found is None:
        return None
    # Ids only grow, so the newest is the one to compare; an older one cannot be later.
    if completed_after_ms is not None and found.metadata.completion_timestamp_ms <= completed_after_ms:
        return None
    return {**found.metadata.summary(), "checkpoint_path": storage.url_of(found.path)}
