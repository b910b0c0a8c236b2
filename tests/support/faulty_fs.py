"""An fsspec filesystem over real local files that fails on purpose: ``faulty:///path``.

Storage that fails part-way is what checkpoint tolerance exists for. ``FaultyFileSystem.plan`` says which
operations fail: writes (opening a file for writing), renames (``mv``, and the rename behind an exclusive
create, as on HDFS), deletes (``rm``/``rm_file``), or writes that are slow (to push a checkpoint past its
timeout). Only paths matching ``plan.only`` are affected (by default checkpoint data: ``_control`` is left
alone). Every injected fault is counted in ``plan.injected``.
"""

from __future__ import annotations

import os
import re
import time
import uuid
from dataclasses import dataclass, field

import fsspec
from fsspec.implementations.local import LocalFileSystem
from fsspec.spec import AbstractFileSystem


@dataclass
class FaultPlan:
    """Which operations fail. ``fail`` maps write/rename/delete to how many calls in a row fail from now."""

    fail: dict[str, int] = field(default_factory=dict)
    pass_first: dict[str, int] = field(default_factory=dict)  # let this many calls through before failing
    slow_write_seconds: float = 0.0
    only: str = r"/chk-|/shared/"  # a regular expression the path must match
    injected: int = 0

    def hit(self, operation: str, path: str) -> None:
        if not re.search(self.only, path):
            return
        if operation == "write" and self.slow_write_seconds:
            self.injected += 1
            time.sleep(self.slow_write_seconds)
        if self.pass_first.get(operation, 0) > 0:
            self.pass_first[operation] -= 1
            return
        if self.fail.get(operation, 0) > 0:
            self.fail[operation] -= 1
            self.injected += 1
            raise OSError(f"injected {operation} failure on {path}")


class FaultyFileSystem(AbstractFileSystem):
    """Local files behind an fsspec protocol of their own, so code takes the generic (non-local) paths."""

    protocol = "faulty"
    root_marker = "/"
    plan = FaultPlan()

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.local = LocalFileSystem()

    @classmethod
    def _strip_protocol(cls, path):
        path = str(path)
        if path.startswith("faulty://"):
            path = path[len("faulty://") :]
        return path.rstrip("/") or "/"

    def ls(self, path, detail=True, **kwargs):
        return self.local.ls(self._strip_protocol(path), detail=detail, **kwargs)

    def info(self, path, **kwargs):
        return self.local.info(self._strip_protocol(path), **kwargs)

    def makedirs(self, path, exist_ok=False):
        return self.local.makedirs(self._strip_protocol(path), exist_ok=exist_ok)

    def mkdir(self, path, create_parents=True, **kwargs):
        return self.local.mkdir(self._strip_protocol(path), create_parents=create_parents, **kwargs)

    def _open(self, path, mode="rb", **kwargs):
        path = self._strip_protocol(path)
        if "w" in mode or "x" in mode or "a" in mode:
            self.plan.hit("write", path)
            os.makedirs(os.path.dirname(path), exist_ok=True)
        return self.local._open(path, mode, **kwargs)

    def pipe_file(self, path, value, mode="overwrite", **kwargs):
        path = self._strip_protocol(path)
        if mode != "create":
            with self.open(path, "wb") as handle:
                handle.write(value)
            return
        temporary = f"{path}.{uuid.uuid4().hex}.tmp"
        with self.open(temporary, "wb") as handle:
            handle.write(value)
        try:
            self.plan.hit("rename", path)
            os.link(temporary, path)  # rename without overwrite: FileExistsError if there
        finally:
            os.unlink(temporary)

    def mv(self, path1, path2, recursive=False, maxdepth=None, **kwargs):
        path1, path2 = self._strip_protocol(path1), self._strip_protocol(path2)
        self.plan.hit("rename", path2)
        return self.local.mv(path1, path2, recursive=recursive, **kwargs)

    def cp_file(self, path1, path2, **kwargs):
        path2 = self._strip_protocol(path2)
        self.plan.hit("write", path2)
        return self.local.cp_file(self._strip_protocol(path1), path2, **kwargs)

    def rm_file(self, path):
        path = self._strip_protocol(path)
        self.plan.hit("delete", path)
        return self.local.rm_file(path)

    def rm(self, path, recursive=False, maxdepth=None):
        for one in path if isinstance(path, list) else [path]:
            one = self._strip_protocol(one)
            self.plan.hit("delete", one)
            self.local.rm(one, recursive=recursive, maxdepth=maxdepth)


def install(plan: FaultPlan) -> FaultPlan:
    """Register ``faulty://`` for this process with ``plan``; returns the plan (to read ``injected``)."""
    fsspec.register_implementation("faulty", FaultyFileSystem, clobber=True)
    FaultyFileSystem.plan = plan
    return plan
