"""The HDFS-backed state store's files: their records read and written through Spark's codec, and one store's
state replaced by new records.

Each state file (``<v>.delta`` or ``<v>.snapshot``) is a stream of key size, key bytes, value size (-1: the key
was removed), value bytes, ended by -1, compressed with the job's state store codec through Spark's own
``CompressionCodec``. A store's state at a version is the newest snapshot at or below it, then each delta after
it. ``hdfs_rescale`` (another partition count) and ``state_transform`` (rows a function changed) both read and
write state through this module.
"""

from __future__ import annotations

import os
import shutil
import struct
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

END_OF_FILE = -1
END_MARKER = struct.pack(">i", END_OF_FILE)
CHECKSUM_BYTES = 4


class HdfsRescaleError(ValueError):
    """The working folder's state cannot be rescaled or rewritten as found (nothing of the source is touched)."""


class StateFileCodec:
    """Reads and writes the HDFS-backed store's files through Spark's ``CompressionCodec`` (in the JVM).

    The bytes cross between the JVM and Python through files in ``scratch``, never through py4j: py4j turns
    a byte array into Python one byte at a time, which made two thirds of a 100 MB rescale's time.
    """

    def __init__(self, spark: Any, codec: str, scratch: Path):
        self.jvm = spark._jvm
        conf = spark.sparkContext._jsc.sc().conf()
        self.codec = self.jvm.org.apache.spark.io.CompressionCodec.createCodec(conf, codec)
        self.scratch = scratch
        self._files = 0

    def scratch_file(self) -> Path:
        """A new file name in the scratch folder."""
        self._files += 1
        return self.scratch / f"{self._files}.raw"

    def _copy(self, source: Any, target: Any) -> None:
        try:
            # commons-io ships with Spark; InputStream.transferTo needs Java 9, Spark 3.5 runs on Java 8 too.
            self.jvm.org.apache.commons.io.IOUtils.copyLarge(source, target)
        finally:
            try:
                source.close()
            finally:
                target.close()

    def read(self, path: Path) -> bytes:
        """The decompressed content of the state file at ``path``."""
        raw = self.scratch_file()
        source = self.codec.compressedInputStream(self.jvm.java.io.FileInputStream(str(path)))
        self._copy(source, self.jvm.java.io.FileOutputStream(str(raw)))
        try:
            return raw.read_bytes()
        finally:
            raw.unlink()

    def compress(self, raw: Path, path: Path) -> None:
        """Write ``raw`` (uncompressed records) as the state file ``path``, and delete ``raw``."""
        path.parent.mkdir(parents=True, exist_ok=True)
        target = self.codec.compressedOutputStream(self.jvm.java.io.FileOutputStream(str(path)))
        self._copy(self.jvm.java.io.FileInputStream(str(raw)), target)
        raw.unlink()

    def open(self, path: Path) -> SnapshotWriter:
        """A new state file at ``path``, written record by record (see ``SnapshotWriter``)."""
        return SnapshotWriter(self, path)


class SnapshotWriter:
    """One new partition's snapshot file, filled as each old partition's state is read: records are buffered
    here and appended to a scratch file in large pieces (opened only to append: 2,000 partitions never hold
    2,000 descriptors), which the codec compresses into place on ``close``. Memory holds one old partition's
    state plus these buffers, not the whole store."""

    FLUSH_BYTES = 64 << 10  # per new partition: 2,000 partitions hold at most 128 MiB of buffers

    def __init__(self, codec: StateFileCodec, path: Path):
        self.codec, self.path = codec, path
        self.raw = codec.scratch_file()  # created by the first flush: close() always writes the end marker
        self.buffer = bytearray()

    def add(self, key: bytes, value: bytes) -> None:
        self.buffer += record(key, value)
        if len(self.buffer) >= self.FLUSH_BYTES:
            self.flush()

    def flush(self) -> None:
        if self.buffer:
            with self.raw.open("ab") as handle:
                handle.write(self.buffer)
            self.buffer = bytearray()

    def close(self) -> None:
        """Write the end marker, then the compressed file. (A rescale that fails first leaves only scratch
        files, which go with the scratch folder.)"""
        self.buffer += END_MARKER
        self.flush()
        self.codec.compress(self.raw, self.path)


def entries(
    data: bytes, where: str, checksummed_rows: bool = False, removals: bool = True
) -> Iterator[tuple[bytes, bytes | None]]:
    """The (key, value) records of one state file's decompressed bytes; value None is a removal.

    With row checksums (Spark 4.2+, pinned per query) a removal's key carries its checksum in front: it is
    dropped so the key matches the stored one. A value's checksum stays in the value, copied as it is. A size
    that runs past the file, or a removal where ``removals`` is False (a snapshot), is damage, said as such.
    """
    position, size = 0, len(data)

    def take(length: int, what: str) -> bytes:
        nonlocal position
        if length < 0 or position + length > size:
            raise HdfsRescaleError(f"{where}: a record's {what} ({length} bytes) runs past the file: it is damaged")
        found = data[position : position + length]
        position += length
        return found

    while True:
        (key_size,) = struct.unpack(">i", take(4, "key size"))
        if key_size == END_OF_FILE:
            return
        key = take(key_size, "key")
        (value_size,) = struct.unpack(">i", take(4, "value size"))
        if value_size == END_OF_FILE:
            if not removals:
                raise HdfsRescaleError(f"{where}: a removal in a snapshot file: it is damaged")
            yield (key[CHECKSUM_BYTES:] if checksummed_rows else key), None
            continue
        yield key, take(value_size, "value")


def with_row_checksum(key: bytes, value: bytes) -> bytes:
    """A value as a store with row checksums (Spark 4.2+) writes it: the CRC32C of the key's and the value's
    bytes, 4 bytes in the JVM's native (little-endian) order, before the value. Spark checks it on every load."""
    import google_crc32c  # the spark extra's; only a store with row checksums needs it

    return google_crc32c.value(key + value).to_bytes(CHECKSUM_BYTES, "little") + value


def record(key: bytes, value: bytes) -> bytes:
    """One record of a state file (before compression): key size, key, value size, value."""
    return struct.pack(">i", len(key)) + key + struct.pack(">i", len(value)) + value


def load_version(
    codec: StateFileCodec, folder: Path, version: int, checksummed_rows: bool = False
) -> dict[bytes, bytes]:
    """A store folder's state at ``version``: the newest snapshot at or below it, then each delta after it."""
    snapshots, deltas = [], []
    for name in os.listdir(folder):
        stem, _, kind = name.partition(".")
        if not stem.isdigit() or kind not in ("snapshot", "delta") or int(stem) > version:
            continue
        (snapshots if kind == "snapshot" else deltas).append(int(stem))
    base = max(snapshots, default=0)
    needed = range(base + 1, version + 1)
    missing = [v for v in needed if v not in deltas]
    if missing:
        raise HdfsRescaleError(
            f"{folder} cannot rebuild state version {version}: no {missing[0]}.delta after "
            f"{'snapshot ' + str(base) if base else 'the start'}"
        )
    state: dict[bytes, bytes] = {}
    if base:
        path = folder / f"{base}.snapshot"
        for key, value in entries(codec.read(path), str(path), checksummed_rows, removals=False):
            if value is not None:  # always: a snapshot holds no removals (checked)
                state[key] = value
    for v in needed:
        path = folder / f"{v}.delta"
        for key, value in entries(codec.read(path), str(path), checksummed_rows):
            if value is None:
                state.pop(key, None)
            else:
                state[key] = value
    return state


def replace_store_state(
    codec: StateFileCodec,
    operator: Path,
    store: str,
    version: int,
    partitions: int,
    records: Iterable[tuple[int, bytes, bytes]],
) -> int:
    """Replace one store's state in every partition of ``operator`` by ``records`` (partition, key, value):
    each partition's store folder then holds one ``<version>.snapshot``. Every record is written to a staging
    folder first, so a failing source of records leaves the store as it was; the number of records written."""
    staging = operator / f"_replace-{store or 'default'}"
    if staging.exists():
        shutil.rmtree(staging)
    writers = [codec.open(staging / str(p) / f"{version}.snapshot") for p in range(partitions)]
    written = 0
    for partition, key, value in records:
        writers[partition].add(key, value)
        written += 1
    for writer in writers:
        writer.close()
    for partition in range(partitions):
        folder = operator / str(partition) / store
        folder.mkdir(parents=True, exist_ok=True)
        # The store's own files only: its schema (_metadata) and, for the default store, other stores' folders
        # are directories. Unlinked, never written: the working folder hard-links the source's files.
        for entry in list(folder.iterdir()):
            if entry.is_file():
                entry.unlink()
        (staging / str(partition) / f"{version}.snapshot").rename(folder / f"{version}.snapshot")
    shutil.rmtree(staging)
    return written
