"""File merging (Flink's name for it, FLIP-306): a checkpoint's small new files packed into segment objects.

On an object store each file is a request to store, to check and to restore, and Spark's stores write many
small files: the HDFS-backed store a delta per partition per batch (200 partitions, 200 deltas per checkpoint;
a stream-stream join four stores each). A checkpoint's new files of up to ``PACK_LIMIT`` bytes therefore go
into a few segment objects of up to ``segment_bytes`` each, written with one request per segment, under
``shared/<run>/_segments/``. ``_metadata`` records each packed file as a range of its segment (``FileEntry``
with an ``offset``, format version 2). Larger files (big RocksDB SSTs) stay objects of their own.

A restore reads the ranges it needs, many at a time. Retention keeps a segment while any retained snapshot
references a range of it and deletes it with the last. A segment most of whose bytes the new checkpoint no
longer needs is compacted: the live ranges the checkpoint would reference are copied into its own segment
instead (``Compaction``), so once older checkpoints age out the dead bytes go with it and storage stays
proportional to live state. Savepoints are never merged: each stays self-contained and relocatable.

``auto`` (the default) merges on object stores only: on a local disk or NFS a file costs no request, and
checkpoints there hard-link Spark's files instead of copying them.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import fsspec
from fsspec.implementations.local import LocalFileSystem

from spark_checkpoint_runtime.layout import FileEntry, JobFolder
from spark_checkpoint_runtime.layout.store import is_object_store, make_folder

MIB = 1024 * 1024
PACK_LIMIT = 4 * MIB  # a file larger than this is an object of its own: its request is small beside its bytes
# A segment whose size is more than this many times the bytes the new checkpoint still references in it is
# compacted (Flink's file merging bounds space amplification the same way).
MAX_SPACE_AMPLIFICATION = 2.0
# ... and only once its dead bytes reach this: small segments (a job of few partitions writes kilobytes per
# checkpoint) would otherwise be rewritten, a GET and a larger PUT, at almost every checkpoint, to save
# kilobytes. A chain references a bounded number of segments, so the waste this allows stays bounded too.
MIN_COMPACTED_DEAD_BYTES = 1 * MIB
# Spans (up to a segment each) fetched at once on restore: concurrent on async filesystems, bounded memory.
RANGE_READ_BATCH = 4
SPAN_GAP = 1 * MIB  # unused bytes between two needed ranges of a segment that one read may span


@dataclass(frozen=True)
class FileMerging:
    """Whether a run's checkpoints merge small files, and how large a segment may grow."""

    enabled: bool = False
    segment_bytes: int = 64 * MIB

    @classmethod
    def for_storage(cls, mode: str, segment_size_mb: int, fs: fsspec.AbstractFileSystem) -> FileMerging:
        """``mode`` is ``auto`` (object stores only), ``on`` or ``off``."""
        return cls(mode == "on" or (mode == "auto" and is_object_store(fs)), segment_size_mb * MIB)

    def packs(self, size: int) -> bool:
        return self.enabled and size <= min(PACK_LIMIT, self.segment_bytes)


class SegmentWriter:
    """Packs files into the segments of one checkpoint, writing each once it is full (and the last on ``close``).

    ``before_write(relative)`` runs before each segment is written (the caller records it for deletion if
    the checkpoint fails, and checks the lease); ``after_write(relative, size)`` runs once it is stored.
    """

    def __init__(
        self,
        storage: JobFolder,
        run_id: str,
        checkpoint_id: int,
        merging: FileMerging,
        before_write: Callable[[str], None],
        after_write: Callable[[str, int], None],
    ):
        self.storage = storage
        self.run_id = run_id
        self.checkpoint_id = checkpoint_id
        self.merging = merging
        self.before_write = before_write
        self.after_write = after_write
        self._buffer = bytearray()
        self._pending: list[tuple[str, int, int]] = []  # target, offset, size in the segment being filled
        self._number = 0
        self.entries: list[FileEntry] = []
        self.bytes_written = 0

    def add(self, target: str, data: bytes) -> None:
        if self._buffer and len(self._buffer) + len(data) > self.merging.segment_bytes:
            self._flush()
        self._pending.append((target, len(self._buffer), len(data)))
        self._buffer += data

    def close(self) -> None:
        if self._buffer or self._pending:
            self._flush()

    def _flush(self) -> None:
        relative = self.storage.checkpoints.segment_relative_file(self.run_id, self.checkpoint_id, self._number)
        self._number += 1
        self.before_write(relative)
        path = self.storage.job_file(relative)
        make_folder(self.storage.fs, posixpath.dirname(path))
        self.storage.fs.pipe_file(path, bytes(self._buffer))
        self.after_write(relative, len(self._buffer))
        self.bytes_written += len(self._buffer)
        self.entries += [FileEntry(relative, target, size, True, offset) for target, offset, size in self._pending]
        self._buffer = bytearray()
        self._pending = []


class Compaction:
    """Which referenced ranges a checkpoint copies into its own segment rather than reference again.

    Segment sizes are known for the segments this run wrote and for those the listing that validated its
    restore point showed (``known_sizes``); any other is asked once (a HEAD).
    """

    def __init__(
        self,
        storage: JobFolder,
        min_dead_bytes: int = MIN_COMPACTED_DEAD_BYTES,
        known_sizes: Mapping[str, int] | None = None,
    ):
        self.storage = storage
        self.min_dead_bytes = min_dead_bytes
        self.sizes: dict[str, int | None] = dict(known_sizes or {})

    def wrote(self, relative: str, size: int) -> None:
        self.sizes[relative] = size

    def mostly_dead(self, reused: list[FileEntry]) -> set[str]:
        """Segments (job-relative) whose live ranges among ``reused`` are too small a share of them, and whose
        dead bytes are worth a rewrite (at least ``min_dead_bytes``)."""
        live: dict[str, int] = {}
        for entry in reused:
            if entry.offset is not None:
                live[entry.path] = live.get(entry.path, 0) + entry.size
        dead = set()
        for path, used in live.items():
            if path not in self.sizes:
                self.sizes[path] = self.storage.file_size(path)
            size = self.sizes[path]
            if size is not None and size > MAX_SPACE_AMPLIFICATION * used and size - used >= self.min_dead_bytes:
                dead.add(path)
        return dead


def read_ranges(fs: fsspec.AbstractFileSystem, ranged: list[tuple[Any, str]]) -> Iterator[tuple[Any, bytes]]:
    """``(key, bytes)`` for each ``(entry, segment path)`` of ``ranged``: the entry's range of its segment.

    Neighbouring ranges of a segment are joined into one read (``_spans``); on an object store the reads go
    ``RANGE_READ_BATCH`` at a time through ``cat_ranges`` (concurrent requests on s3fs, gcsfs, adlfs).
    """
    spans = _spans(ranged)
    for start in range(0, len(spans), RANGE_READ_BATCH):
        batch = spans[start : start + RANGE_READ_BATCH]
        wanted = [span for span in batch if span[2] > span[1]]  # an empty range needs no request
        fetched = {id(span): data for span, data in zip(wanted, _read_spans(fs, wanted), strict=True)}
        for span in batch:
            path, begin, _, entries = span
            data = fetched.get(id(span), b"")
            for entry in entries:
                piece = data[entry.offset - begin : entry.offset - begin + entry.size]
                yield entry, _exactly(piece, entry, path)


def _read_spans(fs: fsspec.AbstractFileSystem, spans: list[tuple[str, int, int, list[Any]]]) -> list[bytes]:
    """The bytes of each ``(path, start, end, _)`` span: seek and read on a local disk, ``cat_ranges`` elsewhere."""
    if isinstance(fs, LocalFileSystem):
        found = []
        for path, begin, end, _ in spans:
            with fs.open(path, "rb") as handle:
                handle.seek(begin)
                found.append(handle.read(end - begin))
        return found
    # on_error="raise": by default fsspec hands a failed read back as an exception object, not raised.
    return fs.cat_ranges(
        [p for p, *_ in spans], [b for _, b, *_ in spans], [e for _, _, e, _ in spans], on_error="raise"
    )


def _spans(ranged: list[tuple[Any, str]]) -> list[tuple[str, int, int, list[Any]]]:
    """Neighbouring ranges of one segment joined into one read: ``(path, start, end, entries)``.

    Ranges further apart than ``SPAN_GAP`` (bytes of files no longer in use) are read apart, so a restore
    never reads much more than it needs; most segments are read whole, in one request.
    """
    by_path: dict[str, list[Any]] = {}
    for entry, path in ranged:
        by_path.setdefault(path, []).append(entry)
    spans: list[tuple[str, int, int, list[Any]]] = []
    for path, entries in by_path.items():
        current: list[Any] = []
        begin = end = 0
        for entry in sorted(entries, key=lambda e: e.offset):
            if current and entry.offset - end > SPAN_GAP:
                spans.append((path, begin, end, current))
                current = []
            if not current:
                begin, end = entry.offset, entry.offset + entry.size
            else:
                end = max(end, entry.offset + entry.size)
            current.append(entry)
        spans.append((path, begin, end, current))
    return spans


def _exactly(data: bytes, entry: Any, path: str) -> bytes:
    if len(data) != entry.size:  # a segment shorter than _metadata says: never restore a cut file
        raise FileNotFoundError(f"{path} holds {len(data)} of the {entry.size} bytes of {entry.target}")
    return data
