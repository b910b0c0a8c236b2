"""Savepoint folders: self-contained and relocatable (every path in ``_metadata`` is relative to the folder)."""

from __future__ import annotations

import posixpath
from typing import Any

from spark_checkpoint_runtime.layout.errors import CheckpointFormatError, DamagedCheckpoint
from spark_checkpoint_runtime.layout.metadata import (
    MAX_METADATA_BYTES,
    CheckpointMetadata,
    ValidCheckpoint,
    missing_files,
    read_metadata,
)
from spark_checkpoint_runtime.layout.names import METADATA_FILE, relative_to, safe_relative_path
from spark_checkpoint_runtime.layout.store import delete_each, discard_folders, open_url, write_metadata_atomically
from spark_checkpoint_runtime.layout.untrusted import UntrustedJson, read_json_object


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
    def probe(cls, location: str, storage_options: dict[str, Any] | None = None) -> SavepointFolder | None:
        """The savepoint at ``location``, or None if ``_metadata`` there is missing or not a savepoint's."""
        try:
            folder = cls(location, storage_options)
        except CheckpointFormatError:
            return None
        path = posixpath.join(folder.path, METADATA_FILE)
        try:
            data = read_json_object(folder.fs, path, max_bytes=MAX_METADATA_BYTES, what=f"{folder.url}/_metadata")
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            return None
        except UntrustedJson:
            return None  # not a savepoint's _metadata: the caller says what else would work
        except Exception as exc:  # unreachable storage or missing credentials: say so, do not guess
            raise CheckpointFormatError(
                f"--restore-from {location!r} cannot be read: {type(exc).__name__}: {exc}"
            ) from None
        return folder if data.get("kind") == "savepoint" else None

    def file_path(self, relative: str) -> str:
        return posixpath.join(self.path, safe_relative_path(relative, context=self.url))

    def exists(self) -> bool:
        return self.fs.exists(posixpath.join(self.path, METADATA_FILE))

    def read_metadata(self) -> CheckpointMetadata:
        meta = read_metadata(self.fs, self.path)
        if meta.kind != "savepoint":
            raise DamagedCheckpoint(self.url, f"_metadata says {meta.kind}, not savepoint")
        return meta

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
