"""``_metadata`` above ``COMPRESS_ABOVE_BYTES`` is stored gzip-compressed (format version 3), through the format
module on real files: it reads back as written, smaller ones stay plain JSON, and what is not ours is refused
as damaged, never taken for an empty or another checkpoint."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from spark_checkpoint_runtime.layout import DamagedCheckpoint, FileEntry, JobFolder, SavepointFolder
from spark_checkpoint_runtime.layout.metadata import (
    COMPRESS_ABOVE_BYTES,
    COMPRESSED_FORMAT_VERSION,
    MAX_METADATA_BYTES,
    CheckpointMetadata,
)
from tests.support.helpers import checkpoint_metadata


def _big(checkpoint_id: int, partitions: int = 2000, kind: str = "checkpoint") -> CheckpointMetadata:
    # A delta file per partition, each a range of the checkpoint's segment, as a job of 2,000 partitions has.
    files = [
        FileEntry(f"shared/r1/segment-{checkpoint_id}", f"state/0/{p}/{checkpoint_id}.delta", 120, True, p * 120)
        for p in range(partitions)
    ]
    meta = checkpoint_metadata(checkpoint_id, files, job="orders")
    return meta if kind == "checkpoint" else CheckpointMetadata(**{**meta.__dict__, "kind": kind})


def test_a_large_metadata_is_compressed_and_reads_back_as_written(tmp_path: Path):
    storage = JobFolder(str(tmp_path), "orders")
    meta = _big(1)
    plain = meta.to_json().encode()
    assert len(plain) > COMPRESS_ABOVE_BYTES
    storage.checkpoints.write_metadata(meta)
    stored = (tmp_path / "orders" / "chk-1" / "_metadata").read_bytes()
    assert stored[:2] == b"\x1f\x8b" and len(stored) < len(plain) / 10, (len(stored), len(plain))
    assert json.loads(gzip.decompress(stored))["format_version"] == COMPRESSED_FORMAT_VERSION
    back = storage.checkpoints.read(1)
    assert back.files == meta.files and back.format_version == COMPRESSED_FORMAT_VERSION
    assert meta.to_bytes() == stored, "the same bytes every time (no timestamp in the header)"


def test_a_small_metadata_stays_plain_json(tmp_path: Path):
    storage = JobFolder(str(tmp_path), "orders")
    storage.checkpoints.write_metadata(_big(1, partitions=3))
    data = json.loads((tmp_path / "orders" / "chk-1" / "_metadata").read_text())
    assert data["format_version"] == 2 and len(data["files"]) == 3


def test_the_threshold_is_on_the_indented_json_even_where_the_compact_one_would_fit():
    # to_bytes decides from the compact JSON first; a _metadata whose indented text is just over the threshold
    # and whose compact text is under it is compressed all the same, and one just under it stays plain.
    def sizes(partitions: int) -> tuple[int, int]:
        indented = _big(1, partitions=partitions).to_json()
        compact = json.dumps(json.loads(indented), sort_keys=True, separators=(",", ":"))
        return len(indented.encode()), len(compact.encode())

    low, high = 1, 2000  # the largest partition count whose indented _metadata still fits
    while low < high:
        middle = (low + high + 1) // 2
        low, high = (middle, high) if sizes(middle)[0] <= COMPRESS_ABOVE_BYTES else (low, middle - 1)
    assert sizes(low + 1)[1] <= COMPRESS_ABOVE_BYTES < sizes(low + 1)[0]
    fits, over = _big(1, partitions=low), _big(1, partitions=low + 1)
    assert fits.to_bytes() == fits.to_json().encode()
    assert over.to_bytes()[:2] == b"\x1f\x8b"


def test_a_compressed_savepoint_is_found_where_a_restore_looks(tmp_path: Path):
    folder = tmp_path / "savepoint-big"
    folder.mkdir()
    (folder / "_metadata").write_bytes(_big(5, kind="savepoint").to_bytes())
    assert SavepointFolder.probe(str(folder)) is not None


@pytest.mark.parametrize(
    "stored, reason",
    [
        (lambda meta: meta.to_bytes()[:-20], "gzip stream ends early"),
        (lambda meta: b"\x1f\x8b" + b"not gzip at all" * 10, "not valid gzip"),
        (lambda meta: gzip.compress(meta.to_json().encode()), "says format version 2 but is compressed"),
        (lambda meta: gzip.decompress(meta.to_bytes()), "is not compressed"),
        (lambda meta: gzip.compress(b" " * (MAX_METADATA_BYTES + 1)), "unpacks to more than any we write"),
    ],
    ids=["truncated", "not-gzip", "compressed-version-2", "plain-version-3", "bomb"],
)
def test_what_is_not_a_compressed_metadata_we_wrote_is_damaged(tmp_path: Path, stored, reason: str):
    storage = JobFolder(str(tmp_path), "orders")
    (tmp_path / "orders" / "chk-1").mkdir(parents=True)
    (tmp_path / "orders" / "chk-1" / "_metadata").write_bytes(stored(_big(1)))
    with pytest.raises(DamagedCheckpoint, match=reason):
        storage.checkpoints.read(1)
