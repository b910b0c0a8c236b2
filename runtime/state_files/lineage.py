"""The lineage a RocksDB changelog of checkpoint format v2 records: which file of each older version it builds on.

With ``spark.sql.streaming.stateStore.checkpointFormatVersion=2`` every version's files carry a unique id
(``<v>_<id>.changelog``) and a retried attempt leaves files with other ids beside the committed ones. The commit
log names the committed id of recent versions only (Spark keeps ``minBatchesToRetain`` entries), so Spark does
not use it for older ones: each changelog of version V starts with the ``(version, id)`` of the versions before
it, up to V-1, from where the writer's lineage starts (the last snapshot it uploaded, the start of the lineage it
loaded, or version 1). Spark rebuilds V from the newest zip among those entries and the changelogs after it
(``RocksDB.loadWithCheckpointId``); the capture follows the same list, so a file of an abandoned attempt is never
taken however old it is. Spark 4.0 to 4.3 write the same header.

The header sits inside the file's compression stream (``spark.sql.streaming.stateStore.compression.codec``,
pinned per query): ``writeUTF("v3" | "v4")`` then ``writeUTF(<JSON list of {"version", "checkpointUniqueId"}>)``
in Java's ``DataOutputStream`` encoding. Read here for lz4 (Spark's default; lz4-java's block stream) and zstd;
a job whose changelogs use another codec is refused before it starts (``require_readable_codec``).
"""

from __future__ import annotations

import importlib
import io
import json
import struct

from spark_checkpoint_runtime.state_files.errors import CaptureError, UnsupportedStateStore

CODEC_CONF = "spark.sql.streaming.stateStore.compression.codec"
DEFAULT_CODEC = "lz4"
# Codec short name -> (Spark's codec class, the Python module that decompresses it: in the spark extra).
READABLE_CODECS = {"lz4": ("LZ4CompressionCodec", "lz4.block"), "zstd": ("ZStdCompressionCodec", "zstandard")}
LINEAGE_FORMATS = ("v3", "v4")  # changelog formats that carry a lineage (v4: with column families)
_LZ4_MAGIC = b"LZ4Block"
_LZ4_HEADER = struct.Struct("<BIII")  # token (method | level), compressed length, original length, checksum
_LZ4_RAW, _LZ4_COMPRESSED = 0x10, 0x20
_LZ4_MAX_BLOCK = 1 << 25  # lz4-java's largest block (32 MiB): a larger length is damage, not data
_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


def require_readable_codec(codec: str) -> None:
    """Refuse, with what to do, a changelog codec whose lineage this reader cannot read or whose Python
    decompressor is not installed (``UnsupportedStateStore``)."""
    name = codec.strip()
    short = next((s for s, (cls, _) in READABLE_CODECS.items() if name.lower() == s or name.endswith(cls)), None)
    if short is None:
        raise UnsupportedStateStore(
            f"{CODEC_CONF}={codec} with RocksDB changelogs in checkpoint format v2: the runtime reads the lineage "
            f"Spark writes into each changelog to tell the committed files from a retried attempt's, and reads it "
            f"in {', '.join(READABLE_CODECS)} only; set {CODEC_CONF} to one of them (lz4 is Spark's default). A "
            "restored query keeps the codec it started with: restore a snapshot taken with one of them"
        )
    module = READABLE_CODECS[short][1]
    try:
        importlib.import_module(module)
    except ImportError as exc:
        raise UnsupportedStateStore(
            f"reading RocksDB changelogs written with {short} needs the Python module {module} ({exc}); install "
            "the runtime's spark extra (pip install 'airflow-checkpoint-provider[spark]')"
        ) from None


def read_lineage(data: bytes, where: str) -> list[tuple[int, str]] | None:
    """The ``(version, unique id)`` list a changelog's header records, oldest first.

    None when the file carries no lineage: a changelog of checkpoint format v1 (no header, or the ``v2`` header
    of the column family writer) or one in a codec this reader does not know. Raises ``CaptureError`` for a
    header that is there but cannot be read.
    """
    if data.startswith(_LZ4_MAGIC):
        plain: _Lz4Blocks | _ZstdFrames = _Lz4Blocks(data, where)
    elif data.startswith(_ZSTD_MAGIC):
        plain = _ZstdFrames(data, where)
    else:
        return None
    try:
        if _read_utf(plain) not in LINEAGE_FORMATS:
            return None
        entries = json.loads(_read_utf(plain))
        lineage = [(int(e["version"]), str(e["checkpointUniqueId"])) for e in entries]
    except (EOFError, UnicodeDecodeError, ValueError, TypeError, KeyError) as exc:
        raise CaptureError(f"the lineage header of RocksDB changelog {where} is unreadable: {exc}") from exc
    versions = [v for v, _ in lineage]
    if any(later != earlier + 1 for earlier, later in zip(versions, versions[1:], strict=False)):
        raise CaptureError(
            f"the lineage header of RocksDB changelog {where} lists versions {versions}, not one after another"
        )
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
    """lz4-java's ``LZ4BlockOutputStream`` format: blocks of ``LZ4Block``, a 13-byte header, then the data;
    decompressed only as far as the header reaches."""

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
        body_start = start + _LZ4_HEADER.size
        method = token & 0xF0
        if original == 0:
            return False  # the end mark
        if original > _LZ4_MAX_BLOCK or compressed == 0 or body_start + compressed > len(self._data):
            raise CaptureError(f"RocksDB changelog {self._where} has an lz4 block cut short")
        if method == _LZ4_RAW and compressed != original:
            raise CaptureError(f"RocksDB changelog {self._where} has an uncompressed lz4 block of two lengths")
        if method not in (_LZ4_RAW, _LZ4_COMPRESSED):
            raise CaptureError(f"RocksDB changelog {self._where} has an lz4 block of unknown method {method:#x}")
        body = self._data[body_start : body_start + compressed]
        self._at = body_start + compressed
        if method == _LZ4_RAW:
            self._plain += body
            return True
        import lz4.block  # the spark extra's; checked at job start (require_readable_codec)

        try:
            self._plain += lz4.block.decompress(body, uncompressed_size=original)
        except lz4.block.LZ4BlockError as exc:
            raise CaptureError(f"RocksDB changelog {self._where} has a damaged lz4 block: {exc}") from exc
        return True


class _ZstdFrames:
    """zstd frames (Spark's ``ZStdCompressionCodec``), decompressed only as far as the header reaches."""

    def __init__(self, data: bytes, where: str):
        import zstandard  # the spark extra's; checked at job start (require_readable_codec)

        self._error, self._where = zstandard.ZstdError, where
        self._stream = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(data))

    def read(self, size: int) -> bytes:
        try:
            return self._stream.read(size)
        except self._error as exc:
            raise CaptureError(f"RocksDB changelog {self._where} has a damaged zstd frame: {exc}") from exc
