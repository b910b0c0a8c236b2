"""Savepoints: a job's ``savepoints/`` folder, and savepoint folders anywhere (self-contained and relocatable:
every path in ``_metadata`` is relative to the folder)."""

from __future__ import annotations

import posixpath
from typing import TYPE_CHECKING, Any

import fsspec

from spark_checkpoint_runtime.layout.errors import CheckpointFormatError, DamagedCheckpoint
from spark_checkpoint_runtime.layout.metadata import (
    MAX_METADATA_BYTES,
    CheckpointMetadata,
    ValidCheckpoint,
    metadata_object,
    missing_files,
    read_metadata,
)
from spark_checkpoint_runtime.layout.names import (
    METADATA_FILE,
    SAVEPOINT_PREFIX,
    SAVEPOINTS_DIR,
    SPARK_OFFSETS_DIR,
    normalized_location,
    relative_to,
    safe_relative_path,
    validate_key,
)
from spark_checkpoint_runtime.layout.store import delete_each, discard_folders, open_url, write_metadata_atomically
from spark_checkpoint_runtime.layout.untrusted import UntrustedJson, read_at_most

if TYPE_CHECKING:
    from spark_checkpoint_runtime.layout.job_folder import JobFolder


def _read_savepoint_metadata(fs: fsspec.AbstractFileSystem, path: str) -> CheckpointMetadata:
    """``<path>/_metadata``, which must be a savepoint's; ``DamagedCheckpoint`` otherwise."""
    meta = read_metadata(fs, path)
    if meta.kind != "savepoint":
        raise DamagedCheckpoint(fs.unstrip_protocol(path), f"_metadata says {meta.kind}, not savepoint")
    return meta


class SavepointFolder:
    """A self-contained, relocatable savepoint: ``_metadata`` plus every file it lists, relative to it."""

    def __init__(self, url: str, storage_options: dict[str, Any] | None = None):
        try:
            self.fs, path = open_url(url, storage_options)
        except (ValueError, ImportError) as exc:
            raise CheckpointFormatError(f"savepoint location {url!r} cannot be opened: {exc}") from None
        self.path = posixpath.normpath(path)
        if posixpath.basename(self.path) == METADATA_FILE:
            self.path = posixpath.dirname(self.path)

    @property
    def url(self) -> str:
        return self.fs.unstrip_protocol(self.path)

    @classmethod
    def probe(
        cls, location: str, storage_options: dict[str, Any] | None = None, option: str = "--restore-from"
    ) -> SavepointFolder | None:
        """The savepoint at ``location``, or None if ``_metadata`` there is missing or not a savepoint's
        (``option`` names where the location came from in an error)."""
        try:
            folder = cls(location, storage_options)
        except CheckpointFormatError:
            return None
        path = posixpath.join(folder.path, METADATA_FILE)
        try:
            raw = read_at_most(folder.fs, path, MAX_METADATA_BYTES)
            if len(raw) > MAX_METADATA_BYTES:
                return None  # larger than any we write: not a savepoint's
            data = metadata_object(raw)
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            return None
        except UntrustedJson:
            return None  # not a savepoint's _metadata: the caller says what else would work
        except Exception as exc:  # unreachable storage or missing credentials: say so, do not guess
            raise CheckpointFormatError(f"{option} {location!r} cannot be read: {type(exc).__name__}: {exc}") from None
        return folder if data.get("kind") == "savepoint" else None

    def file_path(self, relative: str) -> str:
        return posixpath.join(self.path, safe_relative_path(relative, context=self.url))

    def exists(self) -> bool:
        return self.fs.exists(posixpath.join(self.path, METADATA_FILE))

    def unfinished(self) -> bool:
        """True for a snapshot's folder without ``_metadata``: a savepoint (or checkpoint) whose writer stopped
        before it completed, since ``_metadata`` is written last.

        A snapshot's folder is one named like a savepoint or holding Spark's ``offsets`` log; any other folder
        is not a snapshot at all and gets the caller's own message.
        """
        try:
            if self.exists():
                return False
            entries = [posixpath.basename(p.rstrip("/")) for p in self.fs.ls(self.path, detail=False)]
        except (FileNotFoundError, NotADirectoryError):
            return False
        named = posixpath.basename(self.path).startswith(SAVEPOINT_PREFIX)
        return bool(entries) and (named or SPARK_OFFSETS_DIR in entries)

    def read_metadata(self) -> CheckpointMetadata:
        return _read_savepoint_metadata(self.fs, self.path)

    def validate(self) -> ValidCheckpoint:
        """Metadata of a savepoint whose files all exist with the recorded sizes; raise otherwise."""
        try:
            meta = self.read_metadata()
        except FileNotFoundError:
            raise CheckpointFormatError(f"{self.url} is not a savepoint: no _metadata") from None
        except DamagedCheckpoint as exc:
            raise CheckpointFormatError(f"savepoint {self.url} cannot be used: {exc.reason}") from None
        found = {
            relative_to(path, self.path): int(info.get("size") or 0)
            for path, info in self.fs.find(self.path, detail=True).items()
            if info.get("type") != "directory"
        }
        problems = missing_files(meta.files, found)
        if problems:
            raise CheckpointFormatError(f"savepoint {self.url} cannot be used: {problems}")
        return ValidCheckpoint(meta, self.path, self.fs, self.path)

    def write_metadata(self, meta: CheckpointMetadata) -> str:
        return write_metadata_atomically(self.fs, self.path, meta)

    def discard(self) -> None:
        """Delete the savepoint, ``_metadata`` first."""
        discard_folders(self.fs, [self.path])

    def discard_listed(self, meta: CheckpointMetadata) -> None:
        """Delete only what the savepoint's ``_metadata`` lists (``_metadata`` first), then emptied folders.

        CLAIM mode: the job owns the files of the savepoint it restored, not whatever else sits in that folder.
        """
        delete_each(self.fs, [posixpath.join(self.path, METADATA_FILE)], recursive=False)
        listed = [self.file_path(entry.path) for entry in meta.files]
        delete_each(self.fs, listed, recursive=False)
        folders = {self.path}
        for path in listed:  # every folder between a listed file and the savepoint folder, deepest first
            parent = posixpath.dirname(path)
            while len(parent) > len(self.path) and parent not in folders:
                folders.add(parent)
                parent = posixpath.dirname(parent)
        for folder in sorted(folders, key=len, reverse=True):
            try:
                if not self.fs.ls(folder, detail=False):
                    self.fs.rmdir(folder)
            except (FileNotFoundError, OSError):
                continue


class Savepoints:
    """The savepoints in one job folder (``job.savepoints``): ``savepoints/<name>/``, never deleted by
    checkpoint retention; and where a requested savepoint may go."""

    def __init__(self, job: JobFolder):
        self.job = job

    @property
    def base(self) -> str:
        """The job's ``savepoints/`` folder."""
        return posixpath.join(self.job.job_path, SAVEPOINTS_DIR)

    def path(self, name: str) -> str:
        """The folder of savepoint ``name`` under ``savepoints/``."""
        return posixpath.join(self.base, validate_key(name, "savepoint name"))

    def names(self) -> list[str]:
        """Folder names under ``savepoints/``, sorted."""
        try:
            entries = self.job.fs.ls(self.base, detail=False)
        except FileNotFoundError:
            return []
        return sorted(posixpath.basename(e.rstrip("/")) for e in entries)

    def read(self, name: str) -> CheckpointMetadata:
        """Read and parse ``savepoints/<name>/_metadata``; ``DamagedCheckpoint`` if missing, malformed or not a
        savepoint's."""
        return _read_savepoint_metadata(self.job.fs, self.path(name))

    def ids(self) -> list[int]:
        """The id of every readable savepoint here (checkpoints and savepoints share one counter)."""
        ids = []
        for name in self.names():
            try:
                ids.append(self.read(name).id)
            except (DamagedCheckpoint, ValueError):
                continue
        return ids

    def discard(self, names: list[str], listed_files: list[str] | None = None) -> None:
        """Delete savepoint folders, every ``_metadata`` first; ``listed_files`` as in
        ``JobFolder.discard_snapshots``."""
        self.job.discard_snapshots([self.path(name) for name in names], listed_files)

    def check_target(self, target: str | None, prefixes: list[str]) -> None:
        """Refuse (``CheckpointFormatError``) a savepoint ``target`` outside the checkpoint root and ``prefixes``.

        Whoever can write a control request must not make the job write its state anywhere it likes.
        """
        if target is None:
            return
        allowed = [self.job.root_url, *prefixes]
        wanted = normalized_location(target)
        for prefix in map(normalized_location, allowed):
            if wanted == prefix or wanted.startswith(prefix.rstrip("/") + "/"):
                return
        raise CheckpointFormatError(
            f"target_directory {target!r} is not under the job's checkpoint root or a --savepoint-targets prefix "
            f"({', '.join(allowed)}); start the job with --savepoint-targets to allow it"
        )

    def folder_for(self, trigger_id: str, target_directory: str | None = None) -> SavepointFolder:
        """Where the savepoint for ``trigger_id`` goes: ``target_directory`` or ``<job>/savepoints/``."""
        name = f"{SAVEPOINT_PREFIX}{validate_key(trigger_id, 'trigger id')}"
        storage_options = self.job.storage_options
        if target_directory:
            return SavepointFolder(posixpath.join(target_directory.rstrip("/"), name), storage_options)
        return SavepointFolder(self.job.url_of(posixpath.join(self.base, name)), storage_options)
