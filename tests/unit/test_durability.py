"""Durable before announced (issue 28, hole 10): on a local or network filesystem, ``_metadata``, lease grants
and the sink's published names are fsynced (the file, then its folder) before anyone is told.

A recording wrapper around the calls that make a name durable (``os.fsync``, ``os.link``, ``os.rename``) shows
their order; the writes themselves are real, on a real disk.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from spark_checkpoint_runtime.layout import JobFolder, LeaseFiles, StagedOutput
from spark_checkpoint_runtime.sinks import ParquetSink
from tests.support.helpers import checkpoint_metadata


@pytest.fixture
def calls(monkeypatch) -> list[tuple[str, str]]:
    recorded: list[tuple[str, str]] = []
    real_fsync, real_link, real_rename = os.fsync, os.link, os.rename

    def fsync(fd: int) -> None:
        recorded.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
        real_fsync(fd)

    def link(source, destination, *args, **kwargs) -> None:
        real_link(source, destination, *args, **kwargs)
        recorded.append(("link", str(destination)))

    def rename(source, destination, *args, **kwargs) -> None:
        real_rename(source, destination, *args, **kwargs)
        recorded.append(("rename", str(destination)))

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "link", link)
    monkeypatch.setattr(os, "rename", rename)
    return recorded


def _index(calls: list[tuple[str, str]], kind: str, predicate) -> int:
    return next(i for i, (k, path) in enumerate(calls) if k == kind and predicate(path))


def test_metadata_is_fsynced_file_then_folder_before_it_is_announced(tmp_path: Path, calls):
    storage = JobFolder(str(tmp_path), "j")
    storage.checkpoints.write_metadata(checkpoint_metadata(1, []))
    final = str(tmp_path / "j" / "chk-1" / "_metadata")
    linked = _index(calls, "link", lambda p: p == final)
    content = _index(calls, "fsync", lambda p: p.startswith(final + "."))  # the temporary the name links to
    folder = _index(calls, "fsync", lambda p: p == str(tmp_path / "j" / "chk-1"))
    job = _index(calls, "fsync", lambda p: p == str(tmp_path / "j"))
    assert job < content < linked < folder, calls


def test_a_lease_grant_is_durable_before_the_run_writes(tmp_path: Path, calls):
    storage = JobFolder(str(tmp_path), "j")
    assert LeaseFiles(storage).create(1, {"run_id": "r1", "epoch": 1, "acquired_ms": 1})
    grant = _index(calls, "link", lambda p: p.endswith("/lease/000000000001.json"))
    folder = _index(calls, "fsync", lambda p: p.endswith("/_control/lease"))
    assert grant < folder


def test_published_output_is_fsynced_before_its_name_and_its_folder_after(tmp_path: Path, calls):
    output = tmp_path / "out"
    staged = output / "_staging" / "r1" / "batch-0"
    staged.mkdir(parents=True)
    (staged / "part-0.parquet").write_bytes(b"rows")
    ParquetSink(str(output)).commit(StagedOutput(3, "r1", (0,)))
    published = str(output / "c3-b0-part-0.parquet")
    assert Path(published).read_bytes() == b"rows"
    content = _index(calls, "fsync", lambda p: p == str(staged / "part-0.parquet"))
    renamed = _index(calls, "rename", lambda p: p == published)
    folder = _index(calls, "fsync", lambda p: p == str(output))
    assert content < renamed < folder, calls
