"""RocksDB file selection over synthetic working folders (real zip files; the Spark runs are elsewhere)."""

from __future__ import annotations

import io
import json
import zipfile

import pytest

from spark_checkpoint_runtime.state_files import CaptureError, CaptureRaced, select_files


def _zip(ssts: dict[str, int]) -> bytes:
    meta = {"sstFiles": [{"localFileName": n, "dfsSstFileName": n, "sizeBytes": s} for n, s in ssts.items()]}
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("CURRENT", "MANIFEST-000005\n")
        archive.writestr("metadata", "v1\n" + json.dumps({**meta, "numKeys": 3}))
    return buffer.getvalue()


class Folder:
    """A working folder in memory: path -> bytes."""

    def __init__(self, batch: int, commit_ids: dict[int, list[str]] | None = None):
        self.files: dict[str, bytes] = {"metadata": b"{}"}
        for n in range(batch + 1):
            self.files[f"offsets/{n}"] = b"v1\n{}\n"
            ids = (commit_ids or {}).get(n)
            body = {"nextBatchWatermarkMs": 0, **({"stateUniqueIds": {"0": [ids]}} if ids else {})}
            self.files[f"commits/{n}"] = f"v{2 if ids else 1}\n{json.dumps(body)}".encode()

    def add_zip(self, name: str, ssts: dict[str, int], *, crc: bool = False) -> None:
        self.files[f"state/0/0/{name}"] = _zip(ssts)
        for sst, size in ssts.items():
            self.files[f"state/0/0/SSTs/{sst}"] = b"x" * size
        if crc:
            self.files[f"state/0/0/{name}.crc"] = b'{"algorithm":"CRC32C"}'

    def listing(self) -> dict[str, int]:
        return {p: len(b) for p, b in self.files.items()}

    def read(self, path: str) -> bytes:
        return self.files[path]

    def select(self, batch: int) -> list[str]:
        return sorted(f.target for f in select_files(self.listing(), batch, read=self.read) if "state/" in f.target)


def test_a_zip_brings_exactly_the_ssts_its_metadata_names():
    folder = Folder(2)
    folder.add_zip("1.zip", {"000008-a.sst": 10})
    folder.add_zip("2.zip", {"000008-a.sst": 10, "000009-b.sst": 11})
    folder.add_zip("3.zip", {"000009-b.sst": 11, "000012-c.sst": 12})
    folder.add_zip("4.zip", {"000013-d.sst": 13})  # a later batch: left out
    folder.files["state/0/0/SSTs/000010-orphan.sst"] = b"o"  # an attempt's leftover, named by no zip
    assert folder.select(2) == ["state/0/0/3.zip", "state/0/0/SSTs/000009-b.sst", "state/0/0/SSTs/000012-c.sst"]


def test_changelog_chains_start_at_the_newest_zip_or_at_version_one():
    folder = Folder(5)
    for v in range(1, 8):
        folder.files[f"state/0/0/{v}.changelog"] = b"c" * v
    assert folder.select(2) == [f"state/0/0/{v}.changelog" for v in (1, 2, 3)], "no zip yet: replay from empty"
    folder.add_zip("4.zip", {"000011-a.sst": 5})
    assert folder.select(5) == ["state/0/0/4.zip", "state/0/0/5.changelog", "state/0/0/6.changelog"] + [
        "state/0/0/SSTs/000011-a.sst"
    ]
    del folder.files["state/0/0/5.changelog"]
    with pytest.raises(CaptureError, match="version 5 has neither a zip nor a changelog"):
        folder.select(5)


def test_format_v2_picks_the_files_the_commit_log_names_and_keeps_checksum_sidecars():
    folder = Folder(1, commit_ids={0: ["u1"], 1: ["u2"]})
    folder.add_zip("1_u1.zip", {"000008-a.sst": 10}, crc=True)
    folder.add_zip("1_retry.zip", {"000009-r.sst": 10})  # a failed attempt of batch 0
    folder.files["state/0/0/2_u2.changelog"] = b"c"
    folder.files["state/0/0/2_u2.changelog.crc"] = b"{}"
    folder.files["state/0/0/2_other.changelog"] = b"c"
    assert folder.select(1) == [
        "state/0/0/1_u1.zip",
        "state/0/0/1_u1.zip.crc",
        "state/0/0/2_u2.changelog",
        "state/0/0/2_u2.changelog.crc",
        "state/0/0/SSTs/000008-a.sst",
    ]
    del folder.files["commits/0"]  # the commit entry is gone and this changelog has no lineage: no guess
    with pytest.raises(CaptureError, match="cannot tell which zip of version 1 the committed batch wrote"):
        folder.select(1)


def test_a_vanished_or_damaged_sst_is_a_race_or_an_error_never_a_silent_gap():
    folder = Folder(0)
    folder.add_zip("1.zip", {"000008-a.sst": 10})
    del folder.files["state/0/0/SSTs/000008-a.sst"]
    with pytest.raises(CaptureRaced, match="names SSTs/000008-a.sst, which is gone"):
        folder.select(0)
    folder.files["state/0/0/SSTs/000008-a.sst"] = b"short"
    with pytest.raises(CaptureError, match="has 5 bytes, but 1.zip says 10"):
        folder.select(0)
    folder.files["state/0/0/1.zip"] = b"not a zip"
    with pytest.raises(CaptureError, match="1.zip is unreadable"):
        folder.select(0)
