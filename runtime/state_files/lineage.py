"""The lineage a RocksDB changelog of checkpoint format v2 records: which file of each older version it builds on.

With ``spark.sql.streaming.stateStore.checkpointFormatVersion=2`` every version's files carry a unique id
(``<v>_<id>.changelog``) and a retried attempt leaves files with other ids beside the committed ones. The commit
log names the committed id of recent versions only (Spark keeps ``minBatchesToRetain`` entries), so Spark does
not use it for older ones: each changelog starts with the list of ``(version, id)`` it was written on top of,
from the snapshot it started from up to the version before its own, and Spark rebuilds a version by following
that list (``RocksDB.loadWithCheckpointId``). The capture follows the same list, so a file of an abandoned
attempt is never taken however old it is.

The header sits inside the file's compression stream (``spark.sql.streaming.stateStore.compression.codec``):
``writeUTF("v3" | "v4")`` then ``writeUTF(<JSON list of {"version", "checkpointUniqueId"}>)`` in Java's
``DataOutputStream`` encoding. Read here for lz4 (Spark's default; lz4-java's block stream) and zstd;
another codec returns None and the caller falls back on the commit log.
"""

from __future__ import annotations

import io
import json
import struct

from spark_checkpoint_runtime.state_files.errors import CaptureError

CODEC_CONF = "spark.sql.streaming.stateStore.compression.codec"
READABLE_CODECS = {"lz4": "LZ4CompressionCodec", "zstd": "ZStdCompressionCodec"}  # short name: class name
LINEAGE_WRITERS = ("v3", "v4")  # Spark's changelog writers of checkpoint format v2 (v4: with column families)
_LZ4_MAGIC = b"LZ4Block"
_LZ4_HEADER = struct.Struct("<Biii")  # token (method | level), compressed length, original length, checksum
_LZ4_RAW, _LZ4_COMPRESSED = 0x10, 0x20
_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


def readable_codec(codec: str) -> bool:
    """Whether this reader knows the state store codec ``codec`` (a short name or a codec class name)."""
    name = codec.strip()
    return name.lower() in READABLE_CODECS or name.rsplit(".", 1)[-1] in READABLE_CODECS.values()


def read_lineage(data: bytes, where: str) -> list[tuple[int, str]] | None:
    """The ``(version, unique id)`` list a changelog's header records, oldest first.

    None when the file has no lineage (a changelog of checkpoint format v1) or uses a codec this reader does
    not know (lzf, snappy). Raises ``CaptureError`` for a header that is there but cannot be read.
    """
    if data.startswith(_LZ4_MAGIC):
        plain = _Lz4Blocks(data, where)
    elif data.startswith(_ZSTD_MAGIC):
        plain = _ZstdFrames(data, where)
    else:
        return None
    try:
        writer = _read_utf(plain)
        if writer not in LINEAGE_WRITERS:
            return None
        entries = json.loads(_read_utf(plain))
        lineage = [(int(e["version"]), str(e["checkpointUniqueId"])) for e in entries]
    except (EOFError, UnicodeDecodeError, ValueError, TypeError, KeyError) as exc:
        raise CaptureError(f"the lineage header of RocksDB changelog {where} is unreadable: {exc}") from exc
    if [v for v, _ in lineage] != sorted({v for v, _ in lineage}):
        raise CaptureError(f"the lineage header of RocksDB changelog {where} lists versions out of order: {lineage}")
    return lineage


def _read_utf(stream: _Lz4Blocks | _ZstdFrames) -> str:
    """Java's ``DataInputStream.readUTF``: a big-endian u16 length, then (modified) UTF-8 bytes."""
    (length,) = struct.unpack(">H", _read_exactly(stream, 2))
    return _read_exactly(stream, length).decode("utf-8")


def _read_exactly(stream: _Lz4Blocks | _ZstdFrames, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = stream.read(size - len(data))
        if not chunk:
            raise EOFError(f"the header ends after {len(data)} of {size} bytes")
        data += chunk
    return data


class _Lz4Blocks:
    """lz4-java's ``LZ4BlockOutputStream`` format: blocks of ``LZ4Block``, a 13-byte header, then the data."""

    def __init__(self, data: bytes, where: str):
        self._data, self._where, self._at, self._plain = data, where, 0, b""

    def read(self, size: int) -> bytes:
        while len(self._plain) < size and self._next_block():
            pass
        out, self._plain = self._plain[:size], self._plain[size:]
        return out

    def _next_block(self) -> bool:
        start = self._at + len(_LZ4_MAGIC)
        if not self._data.startswith(_LZ4_MAGIC, self._at) or start + _LZ4_HEADER.size > len(self._data):
            return False
        token, compressed, original, _checksum = _LZ4_HEADER.unpack_from(self._data, start)
        body = self._data[start + _LZ4_HEADER.size : start + _LZ4_HEADER.size + compressed]
        self._at = start + _LZ4_HEADER.size + compressed
        if original == 0:
            return False  # the end mark
        method = token & 0xF0
        if method == _LZ4_RAW:
            self._plain += body
        elif method == _LZ4_COMPRESSED:
            import lz4.block  # the spark extra's dependency; only a v2 changelog needs it

            try:
                self._plain += lz4.block.decompress(body, uncompressed_size=original)
            except lz4.block.LZ4BlockError as exc:
                raise CaptureError(f"RocksDB changelog {self._where} has a damaged lz4 block: {exc}") from exc
        else:
            raise CaptureError(f"RocksDB changelog {self._where} has an lz4 block of unknown method {method:#x}")
        return True


class _ZstdFrames:
    """zstd frames (Spark's ``ZStdCompressionCodec``), decompressed only as far as the header reaches."""

    def __init__(self, data: bytes, where: str):
        import zstandard  # the spark extra's dependency; only a v2 changelog written with codec zstd needs it

        self._error, self._where = zstandard.ZstdError, where
        self._stream = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(data))

    def read(self, size: int) -> bytes:
        try:
            return self._stream.read(size)
        except self._error as exc:
            raise CaptureError(f"RocksDB changelog {self._where} has a damaged zstd frame: {exc}") from exc
