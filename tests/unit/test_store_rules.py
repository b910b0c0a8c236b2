"""What the store must do: exclusive create, probed once per run; a store that cannot is refused untouched."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import fsspec
import pytest
from fsspec.implementations.local import LocalFileSystem

from spark_checkpoint_runtime.layout import (
    JobFolder,
    StoreNotExclusive,
    create_exclusively,
    probe_exclusive_create,
)
from tests.support.helpers import tree_state


class _LocalFilesUnderAnotherName(fsspec.AbstractFileSystem):
    """Real local files behind a protocol of their own, so the format takes its generic (non-local) paths."""

    protocol = "probe-base"

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.local = LocalFileSystem()

    @classmethod
    def _strip_protocol(cls, path):
        return path.split("://", 1)[-1] if "://" in path else path

    def ls(self, path, detail=True, **kwargs):
        return self.local.ls(path, detail=detail)

    def info(self, path, **kwargs):
        return self.local.info(path)

    def makedirs(self, path, exist_ok=False):
        self.local.makedirs(path, exist_ok=exist_ok)

    def _open(self, path, mode="rb", **kwargs):
        return self.local._open(path, mode)

    def rm(self, path, recursive=False, maxdepth=None):
        self.local.rm(path, recursive=recursive)


class ChecksThenWrites(_LocalFilesUnderAnotherName):
    """fsspec's base ``pipe_file``: create mode checks, then writes (HDFS via arrow, webhdfs, sftp, smb, ftp)."""

    protocol = "checks-then-writes"


class IgnoresIfNoneMatch(_LocalFilesUnderAnotherName):
    """An S3-compatible store that accepts ``If-None-Match: *`` and overwrites anyway."""

    protocol = "ignores-if-none-match"

    def pipe_file(self, path, value, mode="overwrite", **kwargs):
        with self.local.open(path, "wb") as handle:
            handle.write(value)


class LostResponse(_LocalFilesUnderAnotherName):
    """s3fs retrying a PUT whose response was lost: the object is written, then the retry sees 412."""

    protocol = "lost-response"

    def pipe_file(self, path, value, mode="overwrite", **kwargs):
        exists = self.local.exists(path)
        if mode == "create" and exists:
            raise FileExistsError(path)
        temporary = f"{path}.{uuid.uuid4().hex}"
        with self.local.open(temporary, "wb") as handle:
            handle.write(value)
        os.link(temporary, path)
        os.unlink(temporary)
        if mode == "create":
            raise FileExistsError(path)  # the retry's 412, for this writer's own object


@pytest.mark.parametrize("store", [ChecksThenWrites, IgnoresIfNoneMatch])
def test_a_store_without_exclusive_create_is_refused_and_left_untouched(tmp_path: Path, store):
    fsspec.register_implementation(store.protocol, store, clobber=True)
    (tmp_path / "root").mkdir()
    before = tree_state(tmp_path)
    storage = JobFolder(f"{store.protocol}://{tmp_path}/root", "orders")
    with pytest.raises(StoreNotExclusive) as refused:
        storage.check_exclusive_create()
    message = str(refused.value)
    assert store.__name__ in message and "job 'orders'" in message and "S3 (s3fs)" in message
    assert tree_state(tmp_path) == before


def test_a_local_disk_and_a_conditional_put_pass_the_probe(tmp_path: Path):
    storage = JobFolder(str(tmp_path / "root"), "orders")
    storage.check_exclusive_create()
    assert tree_state(tmp_path / "root") == {}, "the probe leaves no file behind"
    fsspec.register_implementation(LostResponse.protocol, LostResponse, clobber=True)
    probe_exclusive_create(LostResponse(), str(tmp_path / "other"), location="lost-response")


def test_a_retry_that_finds_its_own_write_counts_as_created(tmp_path: Path):
    fs = LostResponse()
    path = str(tmp_path / "epoch.json")
    assert create_exclusively(fs, path, b'{"run_id": "a"}'), "its own object: created"
    assert not create_exclusively(fs, path, b'{"run_id": "b"}'), "another writer's object: not ours"
    assert Path(path).read_bytes() == b'{"run_id": "a"}'


def test_a_local_mount_without_hard_links_is_refused_at_start(tmp_path: Path, monkeypatch):
    def no_links(source, destination):
        raise PermissionError(1, "Operation not permitted (hard links unsupported)")

    monkeypatch.setattr(os, "link", no_links)  # a FUSE mount's answer; no such mount can be made here
    with pytest.raises(StoreNotExclusive, match="hard links unsupported"):
        JobFolder(str(tmp_path / "root"), "orders").check_exclusive_create()
