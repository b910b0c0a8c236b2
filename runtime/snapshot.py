"""Taking a snapshot of Spark's working folder: capture (fast, consistent) then upload (incremental).

``capture`` runs when a checkpoint is triggered: it selects the files Spark needs after batch N and
freezes them. ``upload`` runs off the coordinator's thread: it copies what is not stored yet and returns
the file entries for ``_metadata``. An unchanged state file is never uploaded twice: ``StoredFiles``
remembers what the latest completed checkpoint references, keyed by working-folder path.
"""

from __future__ import annotations

import logging
import os
import posixpath
import shutil
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from fsspec.implementations.local import LocalFileSystem

from spark_checkpoint_runtime import faults
from spark_checkpoint_runtime.file_merging import Compaction, FileMerging, SegmentWriter, read_ranges
from spark_checkpoint_runtime.layout import FileEntry, JobFolder, SavepointFolder, ValidCheckpoint
from spark_checkpoint_runtime.layout.store import is_object_store, make_folder
from spark_checkpoint_runtime.state_files import CaptureRaced, SelectedFile, read_batch_offsets, select_files
from spark_checkpoint_runtime.state_files.operators import OPERATOR_METADATA_V2, relocate_schema_paths
from spark_checkpoint_runtime.state_files.rocksdb import SST_FOLDER, read_zip_contents
from spark_checkpoint_runtime.working_copy import WorkingCopy, link_or_copy

log = logging.getLogger(__name__)


class CheckpointAborted(RuntimeError):
    """The checkpoint was aborted (timeout or shutdown) while its files were uploading."""


class StoredFiles:
    """Shared files already in storage that the next checkpoint may reference instead of uploading.

    Only files of the latest completed checkpoint are offered: retention always keeps that one, so
    nothing offered here can be deleted before the next checkpoint completes. ``sizes``: the stored size of
    the objects the first entries are in, as a listing showed it (a segment's size decides whether it is
    compacted); read once, when the run's first checkpoint target is made.
    """

    def __init__(self, entries: list[FileEntry] | None = None, sizes: Mapping[str, int] | None = None):
        self._by_target: dict[str, FileEntry] = {}
        self.sizes: dict[str, int] = dict(sizes or {})
        self.replace(entries or [])

    def replace(self, entries: list[FileEntry]) -> None:
        self._by_target = {e.target: e for e in entries if e.shared}

    def forget(self, paths: set[str]) -> None:
        """Stop offering entries stored at ``paths`` (gone from storage): the next checkpoint uploads them."""
        self._by_target = {t: e for t, e in self._by_target.items() if e.path not in paths}

    def get(self, target: str, size: int) -> FileEntry | None:
        entry = self._by_target.get(target)
        return entry if entry is not None and entry.size == size else None

    def has(self, target: str) -> bool:
        return target in self._by_target

    def targets(self) -> frozenset[str]:
        return frozenset(self._by_target)


@dataclass
class Capture:
    """Files frozen for checkpoint ``checkpoint_id`` after ``batch_id``."""

    checkpoint_id: int
    batch_id: int
    files: list[SelectedFile]
    sources: dict[str, str]  # target -> frozen path in the working filesystem, for every file to upload
    pinned_confs: dict[str, str]
    source_offsets: list
    reused: dict[str, FileEntry]  # target -> entry of the latest checkpoint: referenced, not uploaded again
    frozen_as: str = ""  # the name its files are frozen under in the working folder (``WorkingCopy.release``)
    took_ms: int | None = None  # how long it took, when taken ahead of its snapshot's trigger (a savepoint's)

    def __post_init__(self) -> None:
        self.frozen_as = self.frozen_as or f"chk-{self.checkpoint_id}"


CAPTURE_ATTEMPTS = 3
# Files PUT at once to an object store: s3fs's connection pool (10) is the real bound; more would only
# hold more files in memory. And at most this many bytes at once (s3fs reads a file under 100 MiB whole).
PARALLEL_PUTS = 10
PUT_BYTES_IN_FLIGHT = 256 * 1024 * 1024
SHUFFLE_PARTITIONS = "spark.sql.shuffle.partitions"  # pinned in the offset log: the query's state partitions


def capture(
    working: WorkingCopy,
    checkpoint_id: int,
    batch_id: int,
    stored: StoredFiles,
    *,
    reuse: bool = True,
    frozen_as: str | None = None,
) -> Capture:
    """Select and freeze what Spark needs to resume after ``batch_id``.

    With ``reuse`` (checkpoints), files the latest checkpoint stored are referenced rather than frozen and
    uploaded again; a savepoint (``reuse=False``) is self-contained, so every file is frozen. The files are
    frozen under ``frozen_as`` (default ``chk-<checkpoint_id>``) until ``working.release`` of that name.

    Spark's maintenance runs beside the job and may delete or replace files between the listing and the
    freeze. Such a race lists again, up to ``CAPTURE_ATTEMPTS`` times, then raises ``CaptureRaced`` (the
    checkpoint is declined and taken at a later batch).
    """
    name = frozen_as or f"chk-{checkpoint_id}"
    for attempt in range(1, CAPTURE_ATTEMPTS + 1):
        try:
            listing = working.listing()
            batch_meta, offsets = (  # without offsets/<batch>, select_files says the batch is not complete
                read_batch_offsets(working.read_text(f"offsets/{batch_id}"))
                if f"offsets/{batch_id}" in listing
                else ({}, [])
            )
            pinned = {str(k): str(v) for k, v in (batch_meta.get("conf") or {}).items()}
            partitions = pinned.get(SHUFFLE_PARTITIONS)
            files = select_files(
                listing, batch_id, stored.targets(), working.read_bytes, int(partitions) if partitions else None
            )
            reused = {f.target: e for f in files if reuse and f.shared and (e := stored.get(f.target, f.size))}
            sources = working.freeze(name, {f.target: f.size for f in files if f.target not in reused})
            _check_frozen_zips(working, files, sources)
            break
        except (CaptureRaced, FileNotFoundError) as exc:
            working.release(name)
            why = exc if isinstance(exc, CaptureRaced) else f"{exc.filename or exc} vanished before it was frozen"
            if attempt == CAPTURE_ATTEMPTS:
                raise CaptureRaced(f"{why} ({CAPTURE_ATTEMPTS} attempts)") from exc
            log.info("capture of checkpoint %d raced Spark's maintenance (%s); listing again", checkpoint_id, why)
            time.sleep(0.05 * attempt)
    return Capture(checkpoint_id, batch_id, files, sources, pinned, offsets, reused, name)


def _check_frozen_zips(working: WorkingCopy, files: list[SelectedFile], sources: dict[str, str]) -> None:
    """A RocksDB zip replaced between selection and freeze may name other SSTs: the frozen one decides.

    Zips already stored (referenced, not frozen) were checked when the checkpoint that stored them was taken.
    """
    targets = {f.target for f in files}
    for selected in files:
        if selected.target in sources and selected.target.endswith(".zip") and selected.target.startswith("state/"):
            folder = posixpath.dirname(selected.target)
            contents = read_zip_contents(working.fs.cat_file(sources[selected.target]), selected.target)
            missing = [n for n in contents.sst_files if posixpath.join(folder, SST_FOLDER, n) not in targets]
            if missing:
                raise CaptureRaced(f"{selected.target} was replaced while it was captured (it now names {missing[0]})")


@dataclass
class Upload:
    """Result of uploading a capture."""

    entries: list[FileEntry]
    bytes_written: int
    new_shared: list[str]  # job-relative paths uploaded by this checkpoint (deleted if it aborts)


def upload(
    snap: Capture,
    working: WorkingCopy,
    storage: JobFolder,
    run_id: str,
    stored: StoredFiles,
    aborted: threading.Event,
    fence: Callable[[str], None] = lambda action: None,
    uploaded: set[str] | None = None,
    merging: FileMerging = FileMerging(),
    compaction: Compaction | None = None,
) -> Upload:
    """Store every file of ``snap`` that is not stored yet; return entries for ``_metadata``.

    ``fence`` is asked before each file (it raises once another run holds the job). ``uploaded``: the shared
    files this run has uploaded so far (grown here). A new file's name is under this run's own folder of
    ``shared/``, so one this run never uploaded cannot be there yet: it is written without asking storage
    first (on S3 a HEAD and, for a missing key, a LIST saved per file). Without it, every new file is asked.
    With ``merging`` enabled, new files it packs go into segment objects (``file_merging.py``), and with
    ``compaction`` the ranges of mostly dead segments the checkpoint still needs are copied into its own.
    """
    entries: list[FileEntry] = []
    new_shared: list[str] = []
    written = 0

    def before_segment(relative: str) -> None:
        if aborted.is_set():
            raise CheckpointAborted(f"checkpoint {snap.checkpoint_id} was aborted during upload")
        fence(f"uploading checkpoint {snap.checkpoint_id}")
        new_shared.append(relative)  # deleted if the checkpoint fails from here on

    def after_segment(relative: str, size: int) -> None:
        if compaction is not None:
            compaction.wrote(relative, size)
        faults.reach("upload")

    segments = SegmentWriter(storage, run_id, snap.checkpoint_id, merging, before_segment, after_segment)
    # From a local working folder to an object store, the files stored as objects of their own go up together
    # (one round trip's wait for many); to a local disk each is a hard link, one at a time.
    together = working.is_local and is_object_store(storage.fs)
    separate: list[tuple[str, FileEntry]] = []
    rewritten = _compacted(snap, storage, compaction) if merging.enabled and compaction is not None else {}
    try:
        for target, data in rewritten.items():
            segments.add(target, data)
        for selected in snap.files:
            if selected.target in rewritten:
                continue
            if aborted.is_set():
                raise CheckpointAborted(f"checkpoint {snap.checkpoint_id} was aborted during upload")
            fence(f"uploading checkpoint {snap.checkpoint_id}")
            if selected.shared and selected.target in snap.reused:
                entries.append(snap.reused[selected.target])
                continue
            if merging.packs(selected.size):
                segments.add(selected.target, _frozen_bytes(working, snap.sources[selected.target], selected.size))
                continue
            if selected.shared:
                # A target stored with another size (never expected: Spark's files are immutable) gets a
                # name of its own rather than overwriting what a retained checkpoint references.
                variant = f"chk{snap.checkpoint_id}" if stored.has(selected.target) else None
                relative = storage.checkpoints.shared_relative_file(run_id, selected.target, variant=variant)
                maybe_stored = uploaded is None or relative in uploaded
                if maybe_stored and storage.file_size(relative) == selected.size:
                    # Already stored by an earlier checkpoint of this run (a chain switched back): reuse it,
                    # and never delete it if this checkpoint fails.
                    entries.append(FileEntry(relative, selected.target, selected.size, True))
                    continue
                new_shared.append(relative)
            else:
                relative = storage.checkpoints.relative_file(snap.checkpoint_id, selected.target)
            entry = FileEntry(relative, selected.target, selected.size, selected.shared)
            if together:
                separate.append((snap.sources[selected.target], entry))
                continue
            _store_one(working, snap.sources[selected.target], storage, entry)
            written += selected.size
            entries.append(entry)
        if separate:

            def before_chunk() -> None:
                if aborted.is_set():
                    raise CheckpointAborted(f"checkpoint {snap.checkpoint_id} was aborted during upload")
                fence(f"uploading checkpoint {snap.checkpoint_id}")

            files = [
                PutFile(source, storage.job_file(entry.path), entry.target, entry.size) for source, entry in separate
            ]
            put_together(working, storage.fs, files, before_chunk, "upload")
            written += sum(entry.size for _, entry in separate)
            entries += [entry for _, entry in separate]
        segments.close()
        entries += segments.entries
        written += segments.bytes_written
    except BaseException:
        storage.delete_job_files(new_shared)
        raise
    if uploaded is not None:
        uploaded.update(new_shared)
    return Upload(entries, written, new_shared)


def _store_one(working: WorkingCopy, source: str, storage: JobFolder, entry: FileEntry) -> None:
    try:
        copy_into_storage(working, source, storage, entry.path)
    except FileNotFoundError as exc:
        if working.fs.exists(source):
            raise
        raise CaptureRaced(f"{entry.target} vanished before it was uploaded") from exc
    faults.reach("upload")


@dataclass(frozen=True)
class PutFile:
    """One local file to store as an object of its own."""

    source: str
    destination: str
    target: str
    size: int


def put_together(
    working: WorkingCopy, fs: Any, files: list[PutFile], before_chunk: Callable[[], None], fault_point: str
) -> None:
    """PUT local files to an object store a chunk at a time, each chunk one batched call that async stores
    (s3fs, gcsfs, adlfs) run concurrently: 200 files wait about 200 / ``PARALLEL_PUTS`` round trips, not 200.

    A chunk holds up to ``PARALLEL_PUTS`` files and ``PUT_BYTES_IN_FLIGHT`` bytes (one larger file goes
    alone). ``before_chunk`` runs before each (the abort and lease checks), so an aborted or fenced upload
    stops within a chunk; ``fault_point`` is reached once per file stored. ``CaptureRaced`` names the files
    that vanished from the working folder meanwhile.
    """
    for chunk in _chunks(files):
        before_chunk()
        try:
            fs.put([f.source for f in chunk], [f.destination for f in chunk], batch_size=PARALLEL_PUTS)
        except FileNotFoundError as exc:
            gone = [f.target for f in chunk if not working.fs.exists(f.source)]
            if not gone:
                raise
            shown = ", ".join(gone[:5]) + (f" and {len(gone) - 5} more" if len(gone) > 5 else "")
            raise CaptureRaced(f"{shown} vanished before it was uploaded") from exc
        for _ in chunk:
            faults.reach(fault_point)


def _chunks(files: list[PutFile]) -> Iterator[list[PutFile]]:
    chunk: list[PutFile] = []
    for f in files:
        if chunk and (len(chunk) == PARALLEL_PUTS or sum(c.size for c in chunk) + f.size > PUT_BYTES_IN_FLIGHT):
            yield chunk
            chunk = []
        chunk.append(f)
    if chunk:
        yield chunk


def _compacted(snap: Capture, storage: JobFolder, compaction: Compaction) -> dict[str, bytes]:
    """Target -> content of each reused range whose segment is mostly dead: read back (joined ranged reads)
    to go into this checkpoint's segment."""
    reused = list(snap.reused.values())
    dead = compaction.mostly_dead(reused)
    moved = [(entry, storage.job_file(entry.path)) for entry in reused if entry.path in dead]
    if moved:
        log.info(
            "checkpoint %d compacts %d file(s) out of %d mostly unused segment(s)",
            snap.checkpoint_id,
            len(moved),
            len(dead),
        )
    return {entry.target: data for entry, data in read_ranges(storage.fs, moved)}


def _frozen_bytes(working: WorkingCopy, source: str, size: int) -> bytes:
    """A frozen file's content, to pack into a segment; ``CaptureRaced`` if it is gone or not what was listed."""
    try:
        data = working.fs.cat_file(source)
    except FileNotFoundError as exc:
        raise CaptureRaced(f"{source} vanished before it was uploaded") from exc
    if len(data) != size:
        raise CaptureRaced(f"{source} has {len(data)} bytes, {size} were frozen")
    return data


def copy_into_storage(working: WorkingCopy, source: str, storage: JobFolder, relative: str) -> None:
    """Copy one working file to the durable copy: a hard link or local copy when both are local disks."""
    destination = storage.job_file(relative)
    if working.is_local and isinstance(storage.fs, LocalFileSystem):
        os.makedirs(os.path.dirname(destination), exist_ok=True)
        temporary = f"{destination}.tmp-{threading.get_ident()}"
        link_or_copy(source, temporary)
        os.replace(temporary, destination)
    else:
        _copy(working.fs, source, storage.fs, destination)


def materialize(snapshot: ValidCheckpoint, working: WorkingCopy, *, skip_state_operators: int | None = None) -> int:
    """Build Spark's (empty, fresh) working folder from a checkpoint's or savepoint's files. Returns bytes.

    When the snapshot and the working folder are on one local filesystem the files are hard-linked, not
    copied: restoring a large state then costs no copy (see ``link_or_copy`` for why that is safe).

    ``skip_state_operators``: leave out the state of stateful operators with this index or higher (what
    ``--allow-non-restored-state`` drops when the new pipeline has fewer stateful operators).
    """
    chosen = [entry for entry in snapshot.metadata.files if not _skipped(entry.target, skip_state_operators)]
    for folder in sorted({posixpath.dirname(working.file_path(entry.target)) for entry in chosen}):
        working.fs.makedirs(folder, exist_ok=True)
    # Files merged into segments: their ranges, many at a time (file_merging.py).
    ranged = [(entry, snapshot.file_path(entry)) for entry in chosen if entry.offset is not None]
    for entry, data in read_ranges(snapshot.fs, ranged):
        working.fs.pipe_file(working.file_path(entry.target), data)
    entries = [entry for entry in chosen if entry.offset is None]
    sources = [snapshot.file_path(entry) for entry in entries]
    destinations = [working.file_path(entry.target) for entry in entries]
    if entries and isinstance(working.fs, LocalFileSystem) and not isinstance(snapshot.fs, LocalFileSystem):
        # From an object store: one batched get, which async filesystems (s3fs, gcsfs, adlfs) run
        # concurrently; one GET after another would make a restore's time grow with the file count.
        snapshot.fs.get(sources, destinations)
    else:
        for source, destination in zip(sources, destinations, strict=True):
            _copy(snapshot.fs, source, working.fs, destination, link=True)
    for entry in chosen:
        if OPERATOR_METADATA_V2.match(entry.target):
            relocated = relocate_schema_paths(working.read_text(entry.target), working.schema_location)
            working.replace_text(entry.target, relocated)
    return sum(entry.size for entry in chosen)


def _skipped(target: str, skip_state_operators: int | None) -> bool:
    operator = _state_operator(target)
    return skip_state_operators is not None and operator is not None and operator >= skip_state_operators


def _state_operator(target: str) -> int | None:
    parts = target.split("/")
    return int(parts[1]) if len(parts) > 2 and parts[0] == "state" and parts[1].isdigit() else None


def _copy(source_fs: Any, source: str, destination_fs: Any, destination: str, *, link: bool = False) -> None:
    """Copy one file between filesystems; when both are local disks, a plain copy or, with ``link``, a hard link."""
    local = LocalFileSystem
    if isinstance(source_fs, local) and isinstance(destination_fs, local):
        (link_or_copy if link else shutil.copyfile)(source, destination)
    elif isinstance(destination_fs, local):
        source_fs.get_file(source, destination)
    elif isinstance(source_fs, local):
        destination_fs.put_file(source, destination)
    else:
        with source_fs.open(source, "rb") as reader, destination_fs.open(destination, "wb") as writer:
            shutil.copyfileobj(reader, writer, 4 * 1024 * 1024)


def upload_savepoint(
    snap: Capture,
    working: WorkingCopy,
    folder: SavepointFolder,
    aborted: threading.Event,
    fence: Callable[[str], None] = lambda action: None,
) -> Upload:
    """Copy every file of ``snap`` into a self-contained savepoint folder (nothing shared, nothing reused)."""
    entries = [FileEntry(selected.target, selected.target, selected.size, shared=False) for selected in snap.files]
    if working.is_local and is_object_store(folder.fs):
        # Objects need no folders; the files go up together, as a checkpoint's separate objects do.

        def before_chunk() -> None:
            if aborted.is_set():
                raise CheckpointAborted(f"savepoint {snap.checkpoint_id} was aborted during upload")
            fence(f"uploading savepoint {snap.checkpoint_id}")

        files = [PutFile(snap.sources[e.target], folder.file_path(e.target), e.target, e.size) for e in entries]
        put_together(working, folder.fs, files, before_chunk, "savepoint")
        return Upload(entries, sum(entry.size for entry in entries), [])
    for entry in entries:
        if aborted.is_set():
            raise CheckpointAborted(f"savepoint {snap.checkpoint_id} was aborted during upload")
        fence(f"uploading savepoint {snap.checkpoint_id}")
        destination = folder.file_path(entry.target)
        make_folder(folder.fs, posixpath.dirname(destination))
        _copy(working.fs, snap.sources[entry.target], folder.fs, destination)
        faults.reach("savepoint")
    return Upload(entries, sum(entry.size for entry in entries), [])
