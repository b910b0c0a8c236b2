"""Storage primitives every writer of the format uses: opening a URL, exclusive create, metadata-first deletes."""

from __future__ import annotations

import os
import posixpath
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import fsspec
from fsspec.asyn import AsyncFileSystem
from fsspec.core import url_to_fs
from fsspec.implementations.local import LocalFileSystem

from spark_checkpoint_runtime.layout.errors import CheckpointFormatError
from spark_checkpoint_runtime.layout.metadata import CheckpointMetadata, read_metadata
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
    make_folder(fs, folder)
    sync_folder(fs, posixpath.dirname(folder))  # the snapshot's folder itself survives a power loss
    if not create_exclusively(fs, final, meta.to_bytes()):
        try:
            holder = read_metadata(fs, folder).run_id
        except (CheckpointFormatError, OSError):
            holder = "unknown"
        raise SnapshotExists(
            f"{fs.unstrip_protocol(final)} already exists (written by run {holder}); two runs are writing job "
            f"{meta.job_name!r} at once"
        )
    return final


def create_exclusively(fs: fsspec.AbstractFileSystem, path: str, data: bytes, *, durable: bool = True) -> bool:
    """Create ``path`` with ``data`` in one step unless it exists; False if it does.

    ``durable=False`` skips the local fsyncs, for a file nobody relies on after a power loss (a probe).

    Local disks: write a temporary file and hard-link it into place (``link`` fails if the name exists, and
    readers never see half a file). Object stores: a conditional put (``If-None-Match: *`` on S3). A create
    that finds the object already there with exactly ``data`` counts as this writer's own: s3fs retries a PUT
    whose response was lost, and the retry then sees 412 for its own first write.
    """
    if isinstance(fs, LocalFileSystem):
        # Durable before announced: the bytes are on disk before the name points at them, and the name is on
        # disk before anyone is told (a power loss must not leave a _metadata or a lease grant half there).
        temporary = f"{path}.{uuid.uuid4().hex}.tmp"
        _write_synced(temporary, data, durable)
        try:
            os.link(temporary, path)
        except FileExistsError:
            return _already_ours(fs, path, data)
        finally:
            os.unlink(temporary)
        if durable:
            sync_folder(fs, posixpath.dirname(path))
        return True
    try:
        fs.pipe_file(path, data, mode="create")
    except FileExistsError:
        return _already_ours(fs, path, data)
    return True


def _write_synced(path: str, data: bytes, durable: bool = True) -> None:
    """Create a local file with ``data`` and (``durable``) fsync it."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        if durable:
            os.fsync(fd)
    finally:
        os.close(fd)


def sync_file(fs: fsspec.AbstractFileSystem, path: str) -> None:
    """fsync a local file (before a rename publishes it); object stores are durable once a write returns."""
    if isinstance(fs, LocalFileSystem):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def sync_folder(fs: fsspec.AbstractFileSystem, folder: str) -> None:
    """fsync a local folder, so names created, linked or renamed in it survive a power loss."""
    if isinstance(fs, LocalFileSystem):
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _already_ours(fs: fsspec.AbstractFileSystem, path: str, data: bytes) -> bool:
    try:
        return fs.size(path) == len(data) and fs.cat_file(path) == data
    except FileNotFoundError:
        return False


def _checks_then_writes(fs: fsspec.AbstractFileSystem) -> bool:
    """Does ``fs`` create files with fsspec's base ``pipe_file`` (an existence check, then a write)?"""
    if isinstance(fs, LocalFileSystem):
        return False
    if isinstance(fs, AsyncFileSystem):  # s3fs, gcsfs, adlfs: the sync method is generated from _pipe_file
        return type(fs)._pipe_file is AsyncFileSystem._pipe_file
    return type(fs).pipe_file is fsspec.AbstractFileSystem.pipe_file


def _missing_folders(fs: fsspec.AbstractFileSystem, folder: str) -> list[str]:
    """Local folders from ``folder`` up that do not exist yet, innermost first (object stores have none)."""
    if not isinstance(fs, LocalFileSystem):
        return []
    missing = []
    while folder and folder != posixpath.dirname(folder) and not fs.exists(folder):
        missing.append(folder)
        folder = posixpath.dirname(folder)
    return missing


class StoreNotExclusive(CheckpointFormatError):
    """The checkpoint store cannot create a file exclusively, which ``_metadata`` and the lease rely on."""


def probe_exclusive_create(fs: fsspec.AbstractFileSystem, folder: str, *, location: str) -> None:
    """Refuse a store that cannot create a file exclusively (raise ``StoreNotExclusive``); leave no file behind.

    Two creates of one probe object: the second must fail. fsspec's base ``pipe_file`` (HDFS via arrow,
    webhdfs, sftp, smb, ftp) checks and then writes, which passes that test yet is not exclusive, so it is
    refused by name; a local mount without hard links (some FUSE filesystems) fails the first create.
    """
    advice = (
        "_metadata, lease epochs and control answers rely on it. Put the checkpoint root on a local or shared "
        "POSIX disk with hard links, S3 (s3fs), GCS (gcsfs) or Azure (adlfs)"
    )
    kind = type(fs).__name__
    if _checks_then_writes(fs):
        raise StoreNotExclusive(
            f"{location}: {kind} cannot create a file exclusively (its create checks, then writes); {advice}"
        )
    created = _missing_folders(fs, folder)
    fs.makedirs(folder, exist_ok=True)
    probe = posixpath.join(folder, f"exclusive-create-probe-{uuid.uuid4().hex}")
    try:
        # Not durable: the probe is deleted at once, so its fsyncs (3 a run) would protect nothing.
        first = create_exclusively(fs, probe, b"first", durable=False)
        second = create_exclusively(fs, probe, b"second", durable=False)
    except OSError as exc:
        raise StoreNotExclusive(f"{location}: {kind} cannot create a file exclusively ({exc}); {advice}") from None
    finally:
        try:
            fs.rm(probe)
        except FileNotFoundError:
            pass
        for made in created:  # innermost first: the probe leaves no folder behind either
            fs.rmdir(made)
    if not first or second:
        raise StoreNotExclusive(
            f"{location}: {kind} let a second exclusive create of one object succeed (the store ignores "
            f"If-None-Match or its equivalent); {advice}"
        )


DELETE_THREADS = 8


def discard_folders(fs: fsspec.AbstractFileSystem, folders: list[str], listed: list[str] | None = None) -> None:
    """Delete snapshot folders: every ``_metadata`` first, then the folders.

    The order keeps the format's promise for the whole set: a crash part-way leaves folders without
    ``_metadata`` (garbage for retention), never a snapshot that lists files it no longer has.

    ``listed``: every file in those folders, from a listing taken moments ago (retention's plan). On an
    object store they then go 1,000 keys a request, instead of a listing and a delete per folder; a file
    that appeared since (none should: these snapshots are complete or long abandoned) stays behind as an
    orphan for the next run.
    """
    metadata = [posixpath.join(folder, METADATA_FILE) for folder in folders]
    delete_each(fs, metadata, recursive=False)
    if listed is not None and is_object_store(fs):
        skip = set(metadata)
        delete_each(fs, [path for path in listed if path not in skip], recursive=False)
        return
    delete_each(fs, folders, recursive=True)


# Object stores: a PUT replaces a whole object atomically (no temporary file and rename needed), and their
# fsspec filesystems delete a list of keys in batched requests (S3's DeleteObjects takes 1,000 keys; GCS and
# Azure batch too), ignoring keys already gone.
OBJECT_STORE_PROTOCOLS = {"s3", "s3a", "gs", "gcs", "abfs", "az", "abfss"}
# Of those, the stores where a folder is only a prefix of keys: it goes with its last object.
FOLDERLESS_PROTOCOLS = {"s3", "s3a", "gs", "gcs"}


def _protocols(fs: fsspec.AbstractFileSystem) -> set[str]:
    return {fs.protocol} if isinstance(fs.protocol, str) else set(fs.protocol)


def is_object_store(fs: fsspec.AbstractFileSystem) -> bool:
    return bool(_protocols(fs) & OBJECT_STORE_PROTOCOLS)


def keeps_empty_folders(fs: fsspec.AbstractFileSystem) -> bool:
    """Do deleted files leave their folders behind? On a local disk, and on an object store with real folders
    (Azure with a hierarchical namespace); not where a folder is only a prefix of keys (S3, GCS)."""
    return isinstance(fs, LocalFileSystem) or (is_object_store(fs) and not _protocols(fs) & FOLDERLESS_PROTOCOLS)


def make_folder(fs: fsspec.AbstractFileSystem, folder: str) -> None:
    """Make ``folder`` and its parents where folders exist. An object store has none: there fsspec's
    ``makedirs`` only probes the bucket, a request each time (two a checkpoint, one a lease)."""
    if not is_object_store(fs):
        fs.makedirs(folder, exist_ok=True)


def delete_each(fs: fsspec.AbstractFileSystem, paths: list[str], *, recursive: bool) -> None:
    """Delete ``paths``; already-missing paths are fine.

    Files on an object store that batches deletes go in one ``rm`` of the list (on S3 one request per 1,000
    keys, where one each would be billed and rate-limited per key). Otherwise each path is ``rm``-ed on a few
    threads: round trips on object stores and syscalls on local disks, several at a time, so 10,000 folders do
    not cost 10,000 round trips in sequence.
    """
    if not recursive and len(paths) > 1 and is_object_store(fs):
        try:
            fs.rm(list(paths))
            return
        except FileNotFoundError:
            pass  # every path was already gone

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


def local_files(folder: str) -> dict[str, tuple[int, float | None]]:
    """Every file under a local folder: path to (size, modification time), as fsspec's ``find`` lists them.

    The same answer as ``LocalFileSystem.find(folder, detail=True)`` (links are not followed into folders;
    a link counts as a file of its target's size) from one ``scandir`` per folder, where ``find`` costs
    several ``stat`` calls per file: retention lists 130,000 files at once.
    """
    found: dict[str, tuple[int, float | None]] = {}
    pending = [folder.rstrip("/") or "/"]
    first = True
    while pending:
        current = pending.pop()
        try:
            entries = list(os.scandir(current))
        except FileNotFoundError:
            if first:
                return {}
            continue  # deleted while listed
        except NotADirectoryError:
            if first:
                info = os.stat(current)
                return {current: (info.st_size, info.st_mtime)}
            continue
        first = False
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    pending.append(entry.path)
                    continue
                own = entry.stat(follow_symlinks=False)
                size = own.st_size
                if entry.is_symlink():
                    try:
                        size = entry.stat(follow_symlinks=True).st_size
                    except OSError:
                        size = 0
                found[entry.path] = (size, own.st_mtime)
            except FileNotFoundError:
                continue
    return found


def files_under(fs: fsspec.AbstractFileSystem, folder: str) -> dict[str, tuple[int, float | None]]:
    """Every file under ``folder`` on any filesystem: path to (size, modification time); {} if it is missing.

    A local folder goes through ``local_files``; elsewhere one recursive ``find`` (one paginated listing on
    object storage).
    """
    if isinstance(fs, LocalFileSystem):
        return local_files(folder)
    try:
        found = fs.find(folder, detail=True)
    except FileNotFoundError:
        return {}
    return {
        path: (int(info.get("size") or 0), modified_time(info))
        for path, info in found.items()
        if info.get("type") != "directory"
    }


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


@dataclass(frozen=True)
class PendingUpload:
    """A multipart upload begun and never completed nor aborted: a writer killed mid-upload of a large file
    leaves one. No listing shows it, and its parts are stored and billed until it is aborted."""

    path: str  # as the filesystem names it (bucket/key)
    upload_id: str
    initiated: float  # epoch seconds


def pending_uploads(fs: fsspec.AbstractFileSystem, folder: str) -> list[PendingUpload]:
    """The multipart uploads pending under ``folder``; empty on stores without them (S3 only for now)."""
    if not _is_s3(fs):
        return []
    bucket, prefix, _ = fs.split_path(folder)
    prefix = prefix.rstrip("/") + "/"
    found: list[PendingUpload] = []
    markers: dict[str, str] = {}
    while True:
        page = fs.call_s3("list_multipart_uploads", Bucket=bucket, Prefix=prefix, **markers)
        for upload in page.get("Uploads", []) or []:
            initiated = upload.get("Initiated")
            found.append(
                PendingUpload(
                    f"{bucket}/{upload['Key']}", upload["UploadId"], initiated.timestamp() if initiated else 0.0
                )
            )
        if not page.get("IsTruncated"):
            return found
        markers = {"KeyMarker": page["NextKeyMarker"], "UploadIdMarker": page["NextUploadIdMarker"]}


def abort_uploads(fs: fsspec.AbstractFileSystem, uploads: list[PendingUpload]) -> None:
    """Abort pending multipart uploads (their parts are deleted); one already gone is fine."""
    for upload in uploads:
        bucket, key, _ = fs.split_path(upload.path)
        try:
            fs.call_s3("abort_multipart_upload", Bucket=bucket, Key=key, UploadId=upload.upload_id)
        except FileNotFoundError:
            pass  # completed or aborted meanwhile


def _is_s3(fs: fsspec.AbstractFileSystem) -> bool:
    return bool(_protocols(fs) & {"s3", "s3a"}) and hasattr(fs, "call_s3")
