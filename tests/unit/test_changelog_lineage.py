"""RocksDB checkpoint format v2: the capture follows the lineage each changelog records, as Spark does.

The two changelogs in ``rocksdb_changelogs/`` were written by Spark 4.3.0 (a streaming count on RocksDB with
changelog checkpointing and ``checkpointFormatVersion=2``), one with the default lz4 codec and one with zstd;
their names are Spark's, prefixed with the codec.
"""

from __future__ import annotations

import struct
from pathlib import Path

import lz4.block
import pytest

from spark_checkpoint_runtime.state_files import CaptureError, UnsupportedStateStore
from spark_checkpoint_runtime.state_files.lineage import read_lineage, require_readable_codec
from tests.unit.test_state_selection import Folder

SPARK_WRITTEN = Path(__file__).parent / "rocksdb_changelogs"
LZ4_TARGET = "23_277d70fe-fe42-4a7f-8a7d-faec2a4b09aa"  # version 23; its header names 21 and 22
V21, V22 = "b297b7ea-44b6-4e02-8906-34396bfbe967", "8bdb43bf-bde1-4cf7-afbf-7b8b8d37434b"


def spark_written(codec: str, name: str) -> bytes:
    return (SPARK_WRITTEN / f"{codec}-{name}.changelog").read_bytes()


def lz4_java(*blocks: bytes, raw: bool = False) -> bytes:
    """``blocks`` in lz4-java's block stream, as Spark's lz4 codec frames them, then the end mark. ``raw``: stored
    uncompressed, as lz4-java does when compression does not pay."""
    framed = b""
    for plain in blocks:
        body = plain if raw else lz4.block.compress(plain, store_size=False)
        framed += b"LZ4Block" + struct.pack("<BIII", 0x15 if raw else 0x25, len(body), len(plain), 0) + body
    return framed + b"LZ4Block" + struct.pack("<BIII", 0x15, 0, 0, 0)


def java_utf(text: str) -> bytes:
    data = text.encode()
    return struct.pack(">H", len(data)) + data


def test_the_lineage_spark_writes_is_read_in_both_codecs_spark_defaults_to_or_offers():
    assert read_lineage(spark_written("lz4", LZ4_TARGET), "lz4") == [(21, V21), (22, V22)]
    assert read_lineage(spark_written("zstd", "9_71fb5cc3-f9df-4cc6-9f68-fb8522bdc0f9"), "zstd") == [
        (6, "81d4a9de-3423-42db-a960-72a198e4f433"),
        (7, "6ea3c564-68c4-49ff-8ecd-358d982c3da3"),
        (8, "01583519-524a-4d1d-bf08-06248b4dcc31"),
    ]
    # A changelog of format v1 (no header) or of the column family writer of v1 ("v2") has no lineage.
    assert read_lineage(lz4_java(java_utf("v2") + b"\x00\x00\x00\x05"), "v1 with column families") is None
    assert read_lineage(b"\x82SNAPPY\x00", "snappy") is None
    # Uncompressed blocks, and a header that spans two blocks.
    four_and_five = '[{"version":4,"checkpointUniqueId":"a"},{"version":5,"checkpointUniqueId":"b"}]'
    header = java_utf("v3") + java_utf(four_and_five)
    assert read_lineage(lz4_java(header[:7], header[7:], raw=True), "raw") == [(4, "a"), (5, "b")]
    assert read_lineage(lz4_java(header[:30], header[30:] + b"\x00" * 99), "two blocks") == [(4, "a"), (5, "b")]
    assert read_lineage(lz4_java(java_utf("v3") + java_utf("[]")), "version 1") == []


def test_a_codec_whose_lineage_cannot_be_read_is_refused_naming_the_conf():
    for codec in ("lz4", "zstd", "ZSTD", "org.apache.spark.io.LZ4CompressionCodec"):
        require_readable_codec(codec)
    for codec in ("snappy", "lzf", "org.apache.spark.io.SnappyCompressionCodec"):
        with pytest.raises(UnsupportedStateStore, match=f"compression.codec={codec} .*lz4, zstd only"):
            require_readable_codec(codec)


def test_a_damaged_lineage_header_is_an_error_never_a_guess():
    data = spark_written("lz4", LZ4_TARGET)
    with pytest.raises(CaptureError, match="damaged lz4 block|unreadable"):
        read_lineage(data[:40] + b"\xff" * 20 + data[60:], "cut")
    with pytest.raises(CaptureError, match="header ends after"):
        read_lineage(lz4_java(java_utf("v3") + b"\x01\x00[{"), "short")
    backwards = '[{"version":3,"checkpointUniqueId":"a"},{"version":2,"checkpointUniqueId":"b"}]'
    with pytest.raises(CaptureError, match=r"lists versions \[3, 2\], not one after another"):
        read_lineage(lz4_java(java_utf("v3") + java_utf(backwards)), "x")
    gap = '[{"version":2,"checkpointUniqueId":"a"},{"version":4,"checkpointUniqueId":"b"}]'
    with pytest.raises(CaptureError, match="not one after another"):
        read_lineage(lz4_java(java_utf("v3") + java_utf(gap)), "x")
    # Lengths that point nowhere: an error, never a loop or a guess.
    for token, compressed, original in ((0x15, 0, 5), (0x25, 1 << 30, 5), (0x15, 4, 5), (0x35, 3, 3)):
        block = b"LZ4Block" + struct.pack("<BIII", token, compressed, original, 0) + b"abc"
        with pytest.raises(CaptureError, match="lz4 block"):
            read_lineage(block, "bad lengths")


def _v2_folder() -> Folder:
    """Version 23 (batch 22) of a job whose commit log kept only its newest entry, with an abandoned branch:
    a retried attempt of batch 21 left ``22_retry.changelog`` and ``22_retry.zip``, and one of batch 20 left
    ``21_retry.zip``. Only the target's id is in the commit log, as once Spark has purged older entries."""
    target_id = LZ4_TARGET.split("_", 1)[1]
    folder = Folder(22, commit_ids={22: [target_id]})
    for n in range(22):
        del folder.files[f"commits/{n}"]
        del folder.files[f"offsets/{n}"]
    folder.add_zip(f"21_{V21}.zip", {"000010-a.sst": 10})
    folder.add_zip("21_retry.zip", {"000011-r.sst": 10})
    folder.add_zip("22_retry.zip", {"000012-r.sst": 10})
    folder.files[f"state/0/0/22_{V22}.changelog"] = b"c22"
    folder.files["state/0/0/22_retry.changelog"] = b"r22"
    folder.files[f"state/0/0/{LZ4_TARGET}.changelog"] = spark_written("lz4", LZ4_TARGET)
    return folder


def test_an_old_version_is_the_file_the_lineage_names_not_an_abandoned_attempts():
    folder = _v2_folder()
    assert folder.select(22) == [
        f"state/0/0/21_{V21}.zip",
        f"state/0/0/22_{V22}.changelog",
        f"state/0/0/{LZ4_TARGET}.changelog",
        "state/0/0/SSTs/000010-a.sst",
    ], "walking back by version alone would start from the retried attempt's 22_retry.zip"


def test_a_zip_of_the_target_is_the_one_the_commit_log_names_and_needs_no_lineage():
    folder = _v2_folder()
    target_id = LZ4_TARGET.split("_", 1)[1]
    folder.add_zip(f"23_{target_id}.zip", {"000013-t.sst": 10})
    folder.add_zip("23_retry.zip", {"000014-r.sst": 10})
    assert folder.select(22) == [f"state/0/0/23_{target_id}.zip", "state/0/0/SSTs/000013-t.sst"]


def test_a_changelog_without_a_readable_lineage_is_followed_only_where_the_commit_log_names_each_file():
    folder = _v2_folder()
    folder.files[f"state/0/0/{LZ4_TARGET}.changelog"] = b"\x82SNAPPY\x00 written with codec snappy"
    with pytest.raises(CaptureError, match="cannot tell which zip of version 22 the committed batch wrote"):
        folder.select(22)


def test_a_lineage_that_cannot_be_followed_fails_the_capture_naming_the_file():
    folder = _v2_folder()
    del folder.files[f"state/0/0/22_{V22}.changelog"]
    with pytest.raises(CaptureError, match=f"22_{V22}.changelog, which its lineage names, is gone"):
        folder.select(22)
    folder = _v2_folder()
    del folder.files[f"state/0/0/21_{V21}.zip"]  # the lineage's snapshot is gone: it cannot start at version 1
    with pytest.raises(CaptureError, match="does not reach from version 1"):
        folder.select(22)
    folder = _v2_folder()  # the commit log still holds version 22's entry, and names another file
    folder.files["commits/21"] = b'v2\n{"stateUniqueIds":{"0":[["retry"]]}}'
    with pytest.raises(CaptureError, match="the commit log names \\['retry'\\] for version 22"):
        folder.select(22)
