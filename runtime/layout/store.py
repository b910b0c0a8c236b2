"""Storage primitives every writer of the format uses: opening a URL, exclusive create, metadata-first deletes."""

from __future__ import annotations

import os
import posixpath
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import fsspec
from fsspec.core import url_to_fs
from fsspec.implementations.local import LocalFileSystem

from spark_checkpoint_runtime.layout.errors import CheckpointFormatError
from spark_checkpoint_runtime.layout.metadata import CheckpointMetadata
from spark_checkpoint_runtime.layout.names import METADATA_FILE


def open_url(url: str, storage_options: dict[str, Any] | None = None) -> tuple[fsspec.AbstractFileSystem, str]:
    """An fsspec filesystem and path for ``url``, with listing caches off.

    Several processes write a job folder (the runtime, Airflow's sensors and operators, a zombie run). A
    cached listing (s3fs, gcsfs and adlfs keep one per instance) would hide their writes: a new checkpoint,
    a newer lease epoch. ``use_listings_cache`` in ``storage_options`` overrides this.
    """
    return url_to_fs(url, **{"use_listings_cache": False, **(storage_options or {})})


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
    delete_each(fs, [posixpath.join(folder, METADATA_FILE) for folder in folders], recursive=False)
    delete_each(fs, folders, recursive=True)


def delete_each(fs: fsspec.AbstractFileSystem, paths: list[str], *, recursive: bool) -> None:
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
