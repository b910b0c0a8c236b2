"""The on-disk checkpoint format: the contract between the runtime and the Airflow provider.

This module is the only code that knows paths under the checkpoint root and the shape of ``_metadata``.
It needs only the standard library and fsspec, so the provider imports it without pyspark.

Layout of one job (``<root>/<job>/``)::

    chk-<N>/_metadata     completed checkpoint N, written last and atomically
    chk-<N>/...           files owned by checkpoint N alone (offset/commit log entries, query metadata)
    shared/...            immutable files (state data, source logs) referenced by one or more checkpoints
    savepoints/...        self-contained savepoints, never deleted by checkpoint retention
    _control/...          requests from Airflow and the runtime's responses

Every path inside ``_metadata`` is relative (to the job folder for a checkpoint), so a folder can be
validated without trusting it: a listed path that is absolute or climbs out with ``..`` makes the
checkpoint invalid.
"""

from __future__ import annotations

import json
import logging
import os
import posixpath
import re
import time
import uuid
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any

import fsspec
from fsspec.core import split_protocol, url_to_fs
from fsspec.implementations.local import LocalFileSystem

log = logging.getLogger(__name__)

FORMAT_VERSION = 1
METADATA_FILE = "_metadata"
CHECKPOINT_PREFIX = "chk-"
SHARED_DIR = "shared"
SAVEPOINTS_DIR = "savepoints"
CONTROL_DIR = "_control"
KINDS = ("checkpoint", "savepoint")
# A _metadata file is small (a list of files); anything bigger is not one of ours.
MAX_METADATA_BYTES = 64 * 1024 * 1024

_JOB_NAME = re.compile(r"^[A-Za-z0-9._-]+$")
_CHECKPOINT_DIR = re.compile(r"^chk-(\d+)$")


def open_url(url: str, storage_options: dict[str, Any] | None = None) -> tuple[fsspec.AbstractFileSystem, str]:
    """An fsspec filesystem and path for ``url``, with listing caches off.

    Several processes write a job folder (the runtime, Airflow's sensors and operators, a zombie run). A
    cached listing (s3fs, gcsfs and adlfs keep one per instance) would hide their writes: a new checkpoint,
    a newer lease epoch. ``use_listings_cache`` in ``storage_options`` overrides this.
    """
    return url_to_fs(url, **{"use_listings_cache": False, **(storage_options or {})})


class CheckpointFormatError(ValueError):
    """Input that does not fit the checkpoint format: a bad job name, path or ``_metadata``."""


class DamagedCheckpoint(CheckpointFormatError):
    """A checkpoint folder exists but cannot be restored from; ``reason`` says why."""

    def __init__(self, location: str, reason: str):
        super().__init__(f"{location}: {reason}")
        self.location = location
        self.reason = reason


class NoValidCheckpoint(CheckpointFormatError):
    """Checkpoints exist for a job but none of them is valid."""


def validate_job_name(name: str) -> str:
    """Return ``name`` if it is a usable job folder name: letters, digits, ``.``, ``_`` and ``-`` only."""
    if not isinstance(name, str) or not name:
        raise CheckpointFormatError("job name is empty; pass --job-name with letters, digits, '.', '_' or '-'")
    if not _JOB_NAME.match(name) or name in (".", "..") or set(name) == {"."}:
        raise CheckpointFormatError(
            f"job name {name!r} is not allowed: use only letters, digits, '.', '_' and '-' "
            "(no '/', no '..'); it becomes a folder name under the checkpoint root"
        )
    return name


def checkpoint_dir_name(checkpoint_id: int) -> str:
    """Folder name of checkpoint ``checkpoint_id`` (``chk-<N>``)."""
    return f"{CHECKPOINT_PREFIX}{int(checkpoint_id)}"


def parse_checkpoint_dir_name(name: str) -> int | None:
    """The id in a ``chk-<N>`` folder name, or None if ``name`` is not one."""
    match = _CHECKPOINT_DIR.match(name)
    return int(match.group(1)) if match else None


def safe_relative_path(path: str, *, context: str) -> str:
    """Return ``path`` normalized if it is relative and stays inside its base folder, else raise."""
    if not isinstance(path, str) or not path:
        raise CheckpointFormatError(f"{context}: empty file path")
    if path.startswith("/") or "\\" in path or "://" in path:
        raise CheckpointFormatError(f"{context}: file path {path!r} must be relative")
    normalized = posixpath.normpath(path)
    if normalized == ".." or normalized.startswith("../") or normalized == ".":
        raise CheckpointFormatError(f"{context}: file path {path!r} leaves its folder")
    return normalized


@dataclass(frozen=True)
class FileEntry:
    """One file a snapshot needs.

    ``path`` is where it is stored, relative to the job folder (checkpoints) or the savepoint folder.
    ``target`` is where it goes in Spark's working checkpoint folder on restore.
    """

    path: str
    target: str
    size: int
    shared: bool


@dataclass
class CheckpointMetadata:
    """The content of one ``_metadata`` file (checkpoint or savepoint)."""

    id: int
    kind: str
    job_name: str
    run_id: str
    batch_id: int
    trigger_timestamp_ms: int
    completion_timestamp_ms: int
    checkpointing_mode: str
    files: list[FileEntry]
    state_bytes: int
    bytes_written: int
    durations_ms: dict[str, int] = field(default_factory=dict)
    source_offsets: list[Any] = field(default_factory=list)
    restored_from: dict[str, Any] | None = None
    fingerprint: dict[str, Any] = field(default_factory=dict)
    spark_version: str | None = None
    format_version: int = FORMAT_VERSION

    @property
    def total_bytes(self) -> int:
        """Bytes of every file the snapshot needs."""
        return sum(f.size for f in self.files)

    def to_json(self) -> str:
        data = asdict(self)
        data["total_bytes"] = self.total_bytes
        return json.dumps(data, indent=1, sort_keys=True)

    def summary(self) -> dict[str, Any]:
        """A small JSON-able description (for logs, XCom and listings)."""
        return {
            "checkpoint_id": self.id,
            "kind": self.kind,
            "job_name": self.job_name,
            "run_id": self.run_id,
            "batch_id": self.batch_id,
            "completion_timestamp_ms": self.completion_timestamp_ms,
            "duration_ms": self.durations_ms.get("total"),
            "state_bytes": self.state_bytes,
            "bytes_written": self.bytes_written,
            "total_bytes": self.total_bytes,
            "file_count": len(self.files),
            "restored_from": self.restored_from,
        }

    @classmethod
    def from_json(cls, text: str | bytes, *, location: str) -> CheckpointMetadata:
        """Parse and check ``_metadata`` text; raise ``DamagedCheckpoint`` saying what is wrong."""
        try:
            data = json.loads(text)
        except (ValueError, UnicodeDecodeError) as exc:
            raise DamagedCheckpoint(location, f"_metadata is not valid JSON (truncated?): {exc}") from None
        if not isinstance(data, dict):
            raise DamagedCheckpoint(location, "_metadata is not a JSON object")
        version = data.get("format_version")
        if version != FORMAT_VERSION:
            raise DamagedCheckpoint(
                location,
                f"_metadata has format version {version!r}; this runtime reads version {FORMAT_VERSION}",
            )
        try:
            files = [
                FileEntry(
                    path=safe_relative_path(f["path"], context=location),
                    target=safe_relative_path(f["target"], context=location),
                    size=_non_negative_int(f["size"]),
                    shared=bool(f["shared"]),
                )
                for f in data["files"]
            ]
            meta = cls(
                id=_non_negative_int(data["id"]),
                kind=str(data["kind"]),
                job_name=validate_job_name(data["job_name"]),
                run_id=str(data["run_id"]),
                batch_id=int(data["batch_id"]),
                trigger_timestamp_ms=int(data["trigger_timestamp_ms"]),
                completion_timestamp_ms=int(data["completion_timestamp_ms"]),
                checkpointing_mode=str(data["checkpointing_mode"]),
                files=files,
                state_bytes=_non_negative_int(data["state_bytes"]),
                bytes_written=_non_negative_int(data["bytes_written"]),
                durations_ms=dict(data.get("durations_ms") or {}),
                source_offsets=list(data.get("source_offsets") or []),
                restored_from=data.get("restored_from"),
                fingerprint=dict(data.get("fingerprint") or {}),
                spark_version=data.get("spark_version"),
            )
        except CheckpointFormatError as exc:
            raise DamagedCheckpoint(location, str(exc)) from None
        except (KeyError, TypeError, ValueError) as exc:
            raise DamagedCheckpoint(location, f"_metadata is missing or has a bad field: {exc!r}") from None
        if meta.kind not in KINDS:
            raise DamagedCheckpoint(location, f"_metadata has unknown kind {meta.kind!r}")
        return meta


def _non_negative_int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"expected a non-negative integer, got {value!r}")
    return value


def now_ms() -> int:
    """Wall-clock time in milliseconds, the unit of every timestamp in ``_metadata``."""
    return int(time.time() * 1000)


@dataclass(frozen=True)
class ValidCheckpoint:
    """A checkpoint or savepoint that passed validation, with where it lives.

    ``base`` is the folder its file paths are relative to: the job folder for a checkpoint, the savepoint
    folder itself for a savepoint (which is what makes savepoints relocatable).
    """

    metadata: CheckpointMetadata
    path: str  # the checkpoint or savepoint folder, in ``fs``
    fs: fsspec.AbstractFileSystem
    base: str

    def file_path(self, entry: FileEntry) -> str:
        """Where one of the snapshot's files is stored."""
        return posixpath.join(self.base, safe_relative_path(entry.path, context=self.fs.unstrip_protocol(self.path)))

    @property
    def url(self) -> str:
        return self.fs.unstrip_protocol(self.path)


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

    def url_of(self, path: str) -> str:
        """A URL for a path of this storage's filesystem (what a person or another tool can open)."""
        return self.fs.unstrip_protocol(path)

    # --- listing ---------------------------------------------------------------------------------
    def checkpoint_ids(self) -> list[int]:
        """Ids of every ``chk-<N>`` folder, complete or not, ascending."""
        try:
            entries = self.fs.ls(self.job_path, detail=False)
        except FileNotFoundError:
            return []
        ids = [parse_checkpoint_dir_name(posixpath.basename(e.rstrip("/"))) for e in entries]
        return sorted(i for i in ids if i is not None)

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

    def files_with_details(self, folder: str) -> dict[str, tuple[int, float | None]]:
        """Every file under a job folder: job-relative path to (size, modification time in epoch seconds)."""
        try:
            found = self.fs.find(folder, detail=True)
        except FileNotFoundError:
            return {}
        return {
            relative_to(path, self.job_path): (int(info.get("size") or 0), modified_time(info))
            for path, info in found.items()
            if info.get("type") != "directory"
        }

    def job_names(self) -> list[str]:
        """Every job folder under the root (names that pass the job-name rules)."""
        try:
            entries = self.fs.ls(self.root_path, detail=True)
        except FileNotFoundError:
            return []
        names = (posixpath.basename(e["name"].rstrip("/")) for e in entries if e.get("type") == "directory")
        return sorted(n for n in names if _JOB_NAME.match(n) and set(n) != {"."})

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

    def discard_savepoint(self, name: str) -> None:
        """Delete a savepoint folder, ``_metadata`` first."""
        discard_folders(self.fs, [self.savepoint_path(name)])

    # --- _metadata -------------------------------------------------------------------------------
    def read_metadata_at(self, folder: str, fs: fsspec.AbstractFileSystem | None = None) -> CheckpointMetadata:
        """Read and parse ``<folder>/_metadata``; raise ``DamagedCheckpoint`` if missing or malformed."""
        fs = fs or self.fs
        path = posixpath.join(folder, METADATA_FILE)
        location = fs.unstrip_protocol(folder)
        try:
            size = fs.size(path)
            if size is not None and size > MAX_METADATA_BYTES:
                raise DamagedCheckpoint(location, f"_metadata is {size} bytes, larger than any we write")
            raw = fs.cat_file(path)
        except FileNotFoundError:
            raise DamagedCheckpoint(location, "no _metadata (an incomplete checkpoint)") from None
        return CheckpointMetadata.from_json(raw, location=location)

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

    def discard_checkpoints(self, checkpoint_ids: list[int]) -> None:
        """Delete many checkpoint folders, every ``_metadata`` first (see ``discard_folders``)."""
        discard_folders(self.fs, [self.checkpoint_path(i) for i in checkpoint_ids])

    def delete_job_files(self, relatives: list[str]) -> None:
        """Delete many job-relative files (shared files nothing references any more), several at a time."""
        _delete_each(self.fs, [self.job_file(relative) for relative in relatives], recursive=False)

    def withdraw_checkpoint_metadata(self, checkpoint_id: int, run_id: str) -> None:
        """Delete ``chk-<N>/_metadata`` if run ``run_id`` wrote it (a run that lost the job takes it back)."""
        if self._metadata_writer(checkpoint_id) == run_id:
            _delete_each(self.fs, [posixpath.join(self.checkpoint_path(checkpoint_id), METADATA_FILE)], recursive=False)

    def _metadata_writer(self, checkpoint_id: int) -> str | None:
        """The run that wrote ``chk-<N>/_metadata``, or None if there is no readable one."""
        folder = self.checkpoint_path(checkpoint_id)
        try:
            raw = self.fs.cat_file(posixpath.join(folder, METADATA_FILE))
            return CheckpointMetadata.from_json(raw, location=self.url_of(folder)).run_id
        except (FileNotFoundError, CheckpointFormatError):
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
        self, checkpoint_id: int, shared_listing: dict[str, int] | None = None
    ) -> CheckpointMetadata:
        """Return the metadata if every file it lists exists with the recorded size, else raise."""
        meta = self.read_checkpoint(checkpoint_id)
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
        problems = _missing_files(meta.files, {**owned, **shared})
        if problems:
            raise DamagedCheckpoint(self.url_of(folder), problems)
        return meta

    def iter_valid_checkpoints(self) -> Iterator[tuple[int, CheckpointMetadata | DamagedCheckpoint]]:
        """Newest first: each checkpoint id with its metadata, or the reason it is not valid."""
        shared = self.shared_files()
        for checkpoint_id in reversed(self.checkpoint_ids()):
            try:
                yield checkpoint_id, self.validate_checkpoint(checkpoint_id, shared)
            except DamagedCheckpoint as exc:
                yield checkpoint_id, exc

    def latest_valid_checkpoint(self, *, newer_than: int | None = None) -> ValidCheckpoint | None:
        """The newest checkpoint whose ``_metadata`` parses and whose files all exist.

        Damaged ones are skipped with a warning naming why. Returns None when there are no checkpoints
        (newer than ``newer_than``, if given). Raises ``NoValidCheckpoint`` when checkpoints exist but none
        is valid, because starting from empty state then would silently lose data.
        """
        skipped: list[str] = []
        for checkpoint_id, result in self.iter_valid_checkpoints():
            if newer_than is not None and checkpoint_id <= newer_than:
                break
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
        if not same_storage or not _is_inside(path, self.job_path):
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

    def default_savepoint_folder(self, trigger_id: str, target_directory: str | None = None) -> SavepointFolder:
        """Where the savepoint for ``trigger_id`` goes: ``target_directory`` or ``<job>/savepoints/``."""
        name = f"savepoint-{validate_key(trigger_id, 'trigger id')}"
        if target_directory:
            return SavepointFolder(posixpath.join(target_directory.rstrip("/"), name), self.storage_options)
        return SavepointFolder(self.url_of(posixpath.join(self.savepoints_path, name)), self.storage_options)


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
        try:
            raw = folder.fs.cat_file(posixpath.join(folder.path, METADATA_FILE), start=0, end=MAX_METADATA_BYTES)
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            return None
        except Exception as exc:  # unreachable storage or missing credentials: say so, do not guess
            raise CheckpointFormatError(
                f"--restore-from {location!r} cannot be read: {type(exc).__name__}: {exc}"
            ) from None
        try:
            data = json.loads(raw)
        except ValueError:
            return None
        return folder if isinstance(data, dict) and data.get("kind") == "savepoint" else None

    def file_path(self, relative: str) -> str:
        return posixpath.join(self.path, safe_relative_path(relative, context=self.url))

    def exists(self) -> bool:
        return self.fs.exists(posixpath.join(self.path, METADATA_FILE))

    def read_metadata(self) -> CheckpointMetadata:
        raw = self.fs.cat_file(posixpath.join(self.path, METADATA_FILE))
        meta = CheckpointMetadata.from_json(raw, location=self.url)
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
        problems = _missing_files(meta.files, found)
        if problems:
            raise CheckpointFormatError(f"savepoint {self.url} cannot be used: {problems}")
        return ValidCheckpoint(meta, self.path, self.fs, self.path)

    def write_metadata(self, meta: CheckpointMetadata) -> str:
        return write_metadata_atomically(self.fs, self.path, meta)

    def discard(self) -> None:
        """Delete the savepoint, ``_metadata`` first."""
        discard_folders(self.fs, [self.path])


# --- _control/: requests from Airflow and the runtime's answers ----------------------------------------
CONTROL_ACTIONS = ("stop", "savepoint")
MAX_CONTROL_BYTES = 16 * 1024
_CONTROL_FIELDS = {"action", "run_key", "created_ms", "stop", "target_directory"}
HEARTBEAT_SECONDS = 5.0
HEARTBEAT_STALE_SECONDS = 30.0
# Answers after which a request is settled; "in_progress" and "accepted" are not.
TERMINAL_STATUSES = ("completed", "failed", "rejected", "expired")


@dataclass(frozen=True)
class ControlRequest:
    """A request in ``_control/requests/<trigger-id>.json``. ``run_key`` None means any run of the job.

    ``savepoint`` requests may ask to ``stop`` afterwards and name a ``target_directory``.
    """

    trigger_id: str
    action: str
    run_key: str | None
    created_ms: int
    stop: bool = False
    target_directory: str | None = None


def validate_key(key: str, what: str) -> str:
    """Trigger ids and run keys become file names: the job-name rules apply."""
    if not isinstance(key, str) or not _JOB_NAME.match(key) or set(key) == {"."}:
        raise CheckpointFormatError(f"{what} {key!r} is not allowed: use only letters, digits, '.', '_' and '-'")
    return key


def _checked_request(trigger_id: str, data: dict[str, Any]) -> ControlRequest:
    """Validate a control request strictly: unknown fields, actions or types are refused."""
    validate_key(trigger_id, "trigger id")
    unknown = sorted(set(data) - _CONTROL_FIELDS)
    if unknown:
        raise CheckpointFormatError(f"unknown field(s) {', '.join(unknown)}")
    if data.get("action") not in CONTROL_ACTIONS:
        raise CheckpointFormatError(
            f"unknown action {data.get('action')!r}; expected one of {', '.join(CONTROL_ACTIONS)}"
        )
    run_key, target = data.get("run_key"), data.get("target_directory")
    if not isinstance(data.get("stop", False), bool):
        raise CheckpointFormatError(f"'stop' must be true or false, not {data.get('stop')!r}")
    if target is not None and (not isinstance(target, str) or not target.strip() or len(target) > 4096):
        raise CheckpointFormatError(f"target_directory {target!r} is not a path or URL")
    return ControlRequest(
        trigger_id,
        data["action"],
        validate_key(run_key, "run key") if run_key else None,
        int(data.get("created_ms") or 0),
        bool(data.get("stop", False)),
        target,
    )


class ControlChannel:
    """Requests to a running job (Airflow writes them) and the job's answers and run reports.

    Layout under ``<job>/_control/``: ``requests/<trigger-id>.json``, ``responses/<trigger-id>.json``,
    ``runs/<run-key>.json`` (the result of a run started with that key) and ``alive/<run-id>.json``
    (heartbeats of running jobs).
    """

    def __init__(self, storage: CheckpointStorage):
        self.storage = storage
        self.fs = storage.fs
        self.base = storage.control_path

    def _path(self, kind: str, key: str) -> str:
        return posixpath.join(self.base, kind, f"{validate_key(key, 'key')}.json")

    def _write(self, path: str, payload: dict[str, Any]) -> None:
        self.fs.makedirs(posixpath.dirname(path), exist_ok=True)
        temporary = f"{path}.{uuid.uuid4().hex}.tmp"
        self.fs.pipe_file(temporary, json.dumps(payload, sort_keys=True).encode("utf-8"))
        self.fs.mv(temporary, path)

    def _read(self, path: str) -> dict[str, Any] | None:
        try:
            raw = self.fs.cat_file(path)
        except FileNotFoundError:
            return None
        if len(raw) > MAX_CONTROL_BYTES:
            raise CheckpointFormatError(
                f"{self.fs.unstrip_protocol(path)} is {len(raw)} bytes; at most {MAX_CONTROL_BYTES}"
            )
        try:
            data = json.loads(raw)
        except ValueError as exc:
            raise CheckpointFormatError(f"{self.fs.unstrip_protocol(path)} is not valid JSON: {exc}") from None
        if not isinstance(data, dict):
            raise CheckpointFormatError(f"{self.fs.unstrip_protocol(path)} is not a JSON object")
        return data

    def request(
        self,
        trigger_id: str,
        action: str,
        run_key: str | None = None,
        *,
        stop: bool = False,
        target_directory: str | None = None,
    ) -> ControlRequest:
        """Ask the job to do ``action``. A trigger id is answered once: asking again returns that answer."""
        request = _checked_request(
            trigger_id,
            {
                "action": action,
                "run_key": run_key,
                "created_ms": now_ms(),
                "stop": stop,
                "target_directory": target_directory,
            },
        )
        payload = {k: v for k, v in asdict(request).items() if k != "trigger_id"}
        self._write(self._path("requests", trigger_id), payload)
        return request

    def pending(self) -> list[ControlRequest | tuple[str, str]]:
        """Unanswered requests; a malformed one comes back as (trigger id, reason) so it can be refused."""
        try:
            names = self.fs.ls(posixpath.join(self.base, "requests"), detail=False)
        except FileNotFoundError:
            return []
        answered = set()
        try:
            answered = {posixpath.basename(n) for n in self.fs.ls(posixpath.join(self.base, "responses"), detail=False)}
        except FileNotFoundError:
            pass
        found: list[ControlRequest | tuple[str, str]] = []
        for name in sorted(names):
            base = posixpath.basename(name)
            if not base.endswith(".json") or base in answered:
                continue
            trigger_id = base[: -len(".json")]
            try:
                found.append(_checked_request(trigger_id, self._read(name) or {}))
            except (CheckpointFormatError, TypeError, ValueError) as exc:
                found.append((trigger_id, str(exc)))
        return found

    def heartbeat(self, run_id: str, run_key: str | None) -> None:
        """Say this run is alive (the job calls it every ``HEARTBEAT_SECONDS``)."""
        self._write(self._path("alive", run_id), {"run_id": run_id, "run_key": run_key, "updated_ms": now_ms()})

    def last_heartbeat_ms(self, run_id: str) -> int | None:
        """When run ``run_id`` last said it was alive (epoch ms), or None if it never did or has ended."""
        try:
            beat = self._read(self._path("alive", run_id))
        except CheckpointFormatError:
            return None
        return int(beat.get("updated_ms") or 0) if beat else None

    def end_heartbeat(self, run_id: str) -> None:
        try:
            self.fs.rm(self._path("alive", run_id))
        except FileNotFoundError:
            pass

    def live_runs(self, stale_after: float = HEARTBEAT_STALE_SECONDS) -> list[dict[str, Any]]:
        """Runs whose heartbeat is fresh: a run killed without a chance to clean up goes stale."""
        try:
            names = self.fs.ls(posixpath.join(self.base, "alive"), detail=False)
        except FileNotFoundError:
            return []
        live = []
        for name in names:
            try:
                beat = self._read(name)
            except CheckpointFormatError:
                continue
            if beat and now_ms() - int(beat.get("updated_ms") or 0) <= stale_after * 1000:
                live.append(beat)
        return live

    def request_savepoint(
        self, trigger_id: str, *, stop: bool = False, target_directory: str | None = None
    ) -> dict[str, Any] | None:
        """Ask the running job for a savepoint, unless ``trigger_id`` was asked before: then its answer.

        Raises ``LookupError`` when no run of the job has a fresh heartbeat (nothing would answer).
        """
        previous = self.response(trigger_id)
        if previous is not None:
            return previous
        if not self.live_runs():
            raise LookupError(
                f"no running job {self.storage.job_name!r} under {self.storage.root_url} (no heartbeat in the "
                f"last {HEARTBEAT_STALE_SECONDS:.0f} s); start the job first"
            )
        self.request(trigger_id, "savepoint", stop=stop, target_directory=target_directory)
        return None

    def respond(self, trigger_id: str, payload: dict[str, Any]) -> None:
        self._write(self._path("responses", trigger_id), payload)

    def response(self, trigger_id: str) -> dict[str, Any] | None:
        return self._read(self._path("responses", trigger_id))

    def write_run_report(self, run_key: str, report: dict[str, Any]) -> None:
        self._write(self._path("runs", run_key), report)

    def run_report(self, run_key: str) -> dict[str, Any] | None:
        return self._read(self._path("runs", run_key))


# --- _control/lease/: which run may write the job ----------------------------------------------------
LEASE_DIR = "lease"
_LEASE_FILE = re.compile(r"^(\d{12})\.(json|released)$")


@dataclass(frozen=True)
class LeaseListing:
    """One listing of ``_control/lease/``: epochs granted and epochs their holder let go of."""

    epochs: list[int]
    released: set[int]

    @property
    def latest(self) -> int:
        return self.epochs[-1] if self.epochs else 0


class LeaseFiles:
    """The files behind the job lease: ``_control/lease/<epoch>.json`` per grant, created exclusively.

    Epoch ``N.json`` names the run that holds the job from then on; ``N.released`` says it let go. Whoever
    creates ``N+1.json`` first holds the job (see ``spark_checkpoint_runtime.lease`` for the rules).
    """

    def __init__(self, storage: CheckpointStorage):
        self.fs = storage.fs
        self.base = posixpath.join(storage.control_path, LEASE_DIR)

    def _path(self, epoch: int, suffix: str) -> str:
        return posixpath.join(self.base, f"{int(epoch):012d}.{suffix}")

    def listing(self) -> LeaseListing:
        try:
            names = [posixpath.basename(n) for n in self.fs.ls(self.base, detail=False)]
        except FileNotFoundError:
            names = []
        epochs, released = set(), set()
        for name in names:
            match = _LEASE_FILE.match(name)
            if match:
                (epochs if match.group(2) == "json" else released).add(int(match.group(1)))
        return LeaseListing(sorted(epochs), released)

    def read(self, epoch: int) -> dict[str, Any] | None:
        try:
            data = json.loads(self.fs.cat_file(self._path(epoch, "json")))
        except (FileNotFoundError, ValueError):
            return None
        return data if isinstance(data, dict) else None

    def create(self, epoch: int, grant: dict[str, Any]) -> bool:
        """Claim ``epoch``; False if another run claimed it first."""
        self.fs.makedirs(self.base, exist_ok=True)
        return create_exclusively(self.fs, self._path(epoch, "json"), json.dumps(grant, sort_keys=True).encode())

    def release(self, epoch: int) -> None:
        create_exclusively(self.fs, self._path(epoch, "released"), b"{}")

    def prune(self, below: int) -> None:
        """Delete grants older than ``below`` (history only: the newest epoch is what counts)."""
        old = [e for e in self.listing().epochs if e < below]
        _delete_each(self.fs, [self._path(e, suffix) for e in old for suffix in ("json", "released")], recursive=False)


class SnapshotExists(CheckpointFormatError):
    """A ``_metadata`` is already there: another run completed this id (two writers on one job)."""


def write_metadata_atomically(fs: fsspec.AbstractFileSystem, folder: str, meta: CheckpointMetadata) -> str:
    """Write ``<folder>/_metadata`` so readers see all of it or nothing, and never over an existing one.

    Like Spark's offset log (which fails with ``concurrentStreamLogUpdate`` when a batch file already
    exists), a second writer of the same id loses: ``SnapshotExists`` names the one that won.
    """
    final = posixpath.join(folder, METADATA_FILE)
    fs.makedirs(folder, exist_ok=True)
    if not create_exclusively(fs, final, meta.to_json().encode("utf-8")):
        try:
            holder = CheckpointMetadata.from_json(fs.cat_file(final), location=fs.unstrip_protocol(folder)).run_id
        except (CheckpointFormatError, OSError):
            holder = "unknown"
        raise SnapshotExists(
            f"{fs.unstrip_protocol(final)} already exists (written by run {holder}); two runs are writing job "
            f"{meta.job_name!r} at once"
        )
    return final


def create_exclusively(fs: fsspec.AbstractFileSystem, path: str, data: bytes) -> bool:
    """Create ``path`` with ``data`` in one step unless it exists; False if it does.

    Local disks: write a temporary file and hard-link it into place (``link`` fails if the name exists, and
    readers never see half a file). Object stores: a conditional put (``If-None-Match: *`` on S3).
    """
    if isinstance(fs, LocalFileSystem):
        temporary = f"{path}.{uuid.uuid4().hex}.tmp"
        fs.pipe_file(temporary, data)
        try:
            os.link(temporary, path)
        except FileExistsError:
            return False
        finally:
            os.unlink(temporary)
        return True
    try:
        fs.pipe_file(path, data, mode="create")
    except FileExistsError:
        return False
    return True


DELETE_THREADS = 8


def discard_folders(fs: fsspec.AbstractFileSystem, folders: list[str]) -> None:
    """Delete snapshot folders: every ``_metadata`` first, then the folders.

    The order keeps the format's promise for the whole set: a crash part-way leaves folders without
    ``_metadata`` (garbage for retention), never a snapshot that lists files it no longer has.
    """
    _delete_each(fs, [posixpath.join(folder, METADATA_FILE) for folder in folders], recursive=False)
    _delete_each(fs, folders, recursive=True)


def _delete_each(fs: fsspec.AbstractFileSystem, paths: list[str], *, recursive: bool) -> None:
    """Delete ``paths`` (``fs.rm`` each) on a few threads; already-missing paths are fine.

    Deletes are round trips on object stores and syscalls on local disks; several at a time keep 10,000
    folders from costing 10,000 round trips in sequence. (``rm`` of a list is not portable: s3fs takes one
    path.)
    """

    def delete(path: str) -> None:
        try:
            fs.rm(path, recursive=recursive)
        except FileNotFoundError:
            pass

    if len(paths) < 2:
        for path in paths:
            delete(path)
        return
    with ThreadPoolExecutor(max_workers=DELETE_THREADS) as pool:
        list(pool.map(delete, paths, chunksize=64))


def relative_to(path: str, base: str) -> str:
    """``path`` relative to ``base``, for paths a listing of ``base`` returned.

    A prefix cut, not ``posixpath.relpath``: relpath normalises both paths on every call, which was a
    third of retention's planning time over 130,000 files.
    """
    prefix = base.rstrip("/") + "/"
    return path[len(prefix) :] if path.startswith(prefix) else posixpath.relpath(path, base)


def modified_time(info: dict[str, Any]) -> float | None:
    """Modification time (epoch seconds) from an fsspec ``info`` dict, whatever the filesystem calls it."""
    for key in ("mtime", "LastModified", "last_modified", "updated", "modified", "created"):
        value = info.get(key)
        if value is None:
            continue
        if isinstance(value, int | float):
            return float(value)
        if hasattr(value, "timestamp"):
            return float(value.timestamp())
        try:
            from datetime import datetime

            return datetime.fromisoformat(str(value).replace("Z", "+00:00")).timestamp()
        except ValueError:
            continue
    return None


def find_completed_checkpoint(storage: CheckpointStorage, newer_than: int | None = None) -> dict[str, Any] | None:
    """The newest valid completed checkpoint (newer than ``newer_than``) as a JSON-able summary, or None.

    The one condition behind the checkpoint sensor's poke and its trigger. All checkpoints being damaged
    counts as "none yet" here (a warning is logged); restoring is where that is refused.
    """
    try:
        found = storage.latest_valid_checkpoint(newer_than=newer_than)
    except NoValidCheckpoint as exc:
        log.warning("%s", exc)
        return None
    if found is None:
        return None
    return {**found.metadata.summary(), "checkpoint_path": storage.url_of(found.path)}


def referenced_files(metadatas: Iterable[CheckpointMetadata]) -> set[str]:
    """Job-relative paths of every shared file the given checkpoints reference."""
    return {f.path for meta in metadatas for f in meta.files if f.shared}


def _missing_files(files: list[FileEntry], listing: dict[str, int]) -> str:
    problems = []
    for entry in files:
        size = listing.get(entry.path)
        if size is None:
            problems.append(f"missing {entry.path}")
        elif size != entry.size:
            problems.append(f"{entry.path} has {size} bytes, expected {entry.size}")
    if not problems:
        return ""
    shown = ", ".join(problems[:3])
    return shown + (f" and {len(problems) - 3} more" if len(problems) > 3 else "")


def _is_inside(path: str, folder: str) -> bool:
    path, folder = posixpath.normpath(path), posixpath.normpath(folder)
    return path == folder or path.startswith(folder.rstrip("/") + "/")
