"""Spark's working checkpoint folder for one run (Flink's task-local state).

Each run gets a fresh folder ``<working-dir>/<job>/<run-id>/spark`` (without ``--working-dir``: a private
temporary folder with an unpredictable name), created with mode 700: Spark's ``checkpointLocation``. It is
never reused across runs, so stale state files of a later batch cannot leak into a restore. On a local
disk (or a shared mount such as NFS), a capture is frozen with hard links (instant, and immune to Spark
cleaning old files while the upload runs); on HDFS or object storage it is frozen by copies within that
filesystem. Every frozen file is checked against the size the capture's listing saw.
"""

from __future__ import annotations

import json
import logging
import os
import posixpath
import re
import shutil
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import fsspec
from fsspec.core import url_to_fs
from fsspec.implementations.local import LocalFileSystem

from spark_checkpoint_runtime.layout import relative_to
from spark_checkpoint_runtime.layout.store import files_under, make_folder
from spark_checkpoint_runtime.state_files import CaptureRaced

log = logging.getLogger(__name__)

OWNER_FILE = "owner.json"  # which job folder a run's working folder belongs to (beside spark/ and frozen/)
_FOLDER_PID = re.compile(r"-p(\d+)-[^-]*$")  # the end of a private_folder's name: -p<pid>-<random>


@contextmanager
def private_folder(prefix: str) -> Iterator[str]:
    """A private local folder (mode 700, unpredictable name) for one command, removed when it ends.

    For commands that hold no lease: ``rescale`` (its materialised snapshot, as large as the state) and
    ``state``. One killed before its end (SIGKILL, the OOM killer) leaves its folder behind; the next command
    with the same ``prefix`` removes each such folder whose process is gone (the name carries the pid).
    """
    remove_orphaned_folders(prefix)
    with tempfile.TemporaryDirectory(prefix=f"{prefix}-p{os.getpid()}-") as folder:
        yield folder


def remove_orphaned_folders(prefix: str) -> int:
    """Remove the ``private_folder`` folders of ``prefix`` whose process no longer runs; how many went."""
    removed = 0
    for entry in Path(tempfile.gettempdir()).glob(f"{prefix}-p*"):
        match = _FOLDER_PID.search(entry.name[len(prefix) :])
        if match is None or not entry.is_dir() or _process_runs(int(match[1])):
            continue
        shutil.rmtree(entry, ignore_errors=True)
        removed += 1
    if removed:
        log.info("removed %d folder(s) that killed %s commands left", removed, prefix)
    return removed


def _process_runs(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    return True


class WorkingCopy:
    """The folders of one run: Spark's checkpoint location and frozen captures."""

    def __init__(self, working_dir: str | None, job_name: str, run_id: str):
        self.fs: fsspec.AbstractFileSystem
        self._private_temporary = not working_dir
        if working_dir:
            self.fs, base = url_to_fs(working_dir)
            self.run_path = posixpath.join(base, job_name, run_id)
        else:
            # Never a predictable /tmp path: another local user could plant files or links there first.
            self.fs = LocalFileSystem()
            self.run_path = tempfile.mkdtemp(prefix=f"checkpointed-{job_name}-")  # mode 700
        self.spark_path = posixpath.join(self.run_path, "spark")
        self.frozen_path = posixpath.join(self.run_path, "frozen")

    @property
    def is_local(self) -> bool:
        return isinstance(self.fs, LocalFileSystem)

    @property
    def spark_location(self) -> str:
        """The value for Spark's ``checkpointLocation`` option."""
        return self.spark_path if self.is_local else self.fs.unstrip_protocol(self.spark_path)

    @property
    def schema_location(self) -> str:
        """Spark's own, fully qualified name of its checkpoint location (as it writes it into metadata)."""
        return f"file:{self.spark_path}" if self.is_local else self.fs.unstrip_protocol(self.spark_path)

    def create(self, owner: str | None = None) -> None:
        """Create the run's folders; ``owner`` (the job folder's URL) is recorded so that a later run of the
        same job can tell this folder from another job's when this run is killed and leaves it behind."""
        if not self._private_temporary and self.fs.exists(self.run_path):
            raise FileExistsError(f"working folder {self.run_path} already exists; run ids must be unique")
        if self.is_local:
            os.makedirs(posixpath.dirname(self.run_path), exist_ok=True)
            os.makedirs(self.run_path, mode=0o700, exist_ok=self._private_temporary)
            os.chmod(self.run_path, 0o700)  # whatever the umask: state and source data stay the job's own
        self.fs.makedirs(self.spark_path, exist_ok=True)
        self.owner = owner
        if owner is not None:
            self.fs.pipe_file(posixpath.join(self.run_path, OWNER_FILE), json.dumps({"job": owner}).encode())

    def remove_abandoned(self) -> int:
        """Remove the working folders that killed runs of the same job left (call it holding the job's lease:
        every other run of the job is then gone or fenced). Returns how many went.

        Only folders whose owner file names this run's job go: another job's folders, and folders of runs from
        before owner files, are left alone.
        """
        if getattr(self, "owner", None) is None:
            return 0
        parent = posixpath.dirname(self.run_path)
        try:
            siblings = self.fs.ls(parent, detail=False)
        except (FileNotFoundError, PermissionError):
            return 0
        if self._private_temporary:  # a temporary folder of its own: siblings are every program's temporaries
            prefix = posixpath.basename(self.run_path).rsplit("-", 1)[0] + "-"
            siblings = [s for s in siblings if posixpath.basename(s.rstrip("/")).startswith(prefix)]
        removed = 0
        for sibling in siblings:
            sibling = sibling.rstrip("/")
            if sibling == self.run_path.rstrip("/"):
                continue
            try:
                owner = json.loads(self.fs.cat_file(posixpath.join(sibling, OWNER_FILE)))
            except (FileNotFoundError, NotADirectoryError, PermissionError, IsADirectoryError, ValueError):
                continue
            if not isinstance(owner, dict) or owner.get("job") != self.owner:
                continue
            try:
                self.fs.rm(sibling, recursive=True)
                removed += 1
            except OSError:
                log.warning("could not remove %s, a killed run's working folder", sibling, exc_info=True)
        if removed:
            log.info("removed %d working folder(s) that killed runs of this job left", removed)
        return removed

    def listing(self) -> dict[str, int]:
        """Every file in Spark's folder: path relative to it, and size (each capture lists it)."""
        found = files_under(self.fs, self.spark_path)
        return {relative_to(path, self.spark_path): size for path, (size, _) in found.items()}

    def file_path(self, target: str) -> str:
        return posixpath.join(self.spark_path, target)

    def committed_batches(self) -> list[int]:
        """Batch ids with an entry in Spark's commit log, ascending."""
        try:
            names = self.fs.ls(posixpath.join(self.spark_path, "commits"), detail=False)
        except FileNotFoundError:
            return []
        return sorted(int(b) for b in (posixpath.basename(n) for n in names) if b.isdigit())

    def read_text(self, target: str) -> str:
        return self.read_bytes(target).decode("utf-8")

    def read_bytes(self, target: str) -> bytes:
        """A working file's bytes (small files: zips' metadata, commit log entries)."""
        return self.fs.cat_file(self.file_path(target))

    def replace_text(self, target: str, text: str) -> None:
        """Write a working file afresh (never through a hard link into the stored copy it came from)."""
        path = self.file_path(target)
        if self.is_local:
            temporary = f"{path}.relocating"
            with open(temporary, "w", encoding="utf-8") as handle:
                handle.write(text)
            os.replace(temporary, path)
        else:
            self.fs.pipe_file(path, text.encode("utf-8"))

    def freeze(self, name: str, sizes: dict[str, int]) -> dict[str, str]:
        """Pin the given files (target -> size listed) for an upload; returns target -> path to read from.

        Spark may delete or replace its old files while the upload runs, so the upload reads a frozen copy:
        a hard link on a local disk (instant: the linked inode stays), a copy within the working filesystem
        elsewhere (HDFS, object storage: no links there). Either way the frozen file must have the size the
        listing saw, or Spark replaced it in between and ``CaptureRaced`` says to list again.
        """
        frozen = posixpath.join(self.frozen_path, name)
        # One flat folder, each file numbered: mirroring the targets' folders made (and later removed) a folder
        # per state partition, 200 a checkpoint at Spark's default, a third of a checkpoint's cost to the job's
        # process. The number keeps apart files that share a name in different folders.
        make_folder(self.fs, frozen)
        paths = {}
        for number, (target, size) in enumerate(sizes.items()):
            source = self.file_path(target)
            pinned = posixpath.join(frozen, f"{number}-{posixpath.basename(target)}")
            if self.is_local:
                link_or_copy(source, pinned)
                frozen_size = os.stat(pinned).st_size
            else:
                self.fs.cp_file(source, pinned)
                frozen_size = int(self.fs.info(pinned).get("size") or 0)
            if frozen_size != size:
                raise CaptureRaced(
                    f"{target} changed while it was captured ({size} bytes listed, {frozen_size} frozen)"
                )
            paths[target] = pinned
        return paths

    def release(self, name: str) -> None:
        """Drop a frozen capture once uploaded (or abandoned)."""
        frozen = posixpath.join(self.frozen_path, name)
        if self.is_local:
            shutil.rmtree(frozen, ignore_errors=True)
            return
        try:
            self.fs.rm(frozen, recursive=True)
        except FileNotFoundError:
            pass

    def remove(self, attempts: int = 20, pause: float = 0.25) -> None:
        """Delete the whole run folder (the durable copy lives under the checkpoint root).

        Spark's state store maintenance can still write into the folder for a moment after the query
        stopped (a session that outlives the run keeps its state store providers loaded), and a removal
        that meets a file created mid-way fails. It is retried; when the folder still cannot go, a warning
        names it and the run's outcome stands, since a leftover working folder holds nothing durable.
        """
        for attempt in range(1, attempts + 1):
            try:
                self.fs.rm(self.run_path, recursive=True)
                return
            except FileNotFoundError:
                return
            except OSError as error:
                if attempt == attempts:
                    log.warning("could not remove working folder %s (%s); delete it by hand", self.run_path, error)
                    return
                time.sleep(pause)


def link_or_copy(source: str, destination: str) -> None:
    """Hard-link a local file, or copy it when a link is impossible (another device, no link support).

    Safe because Spark never writes into an existing checkpoint file: it writes a temporary file and
    renames it over the name, which replaces the directory entry and leaves the linked inode alone.
    """
    try:
        os.link(source, destination)
    except OSError:
        shutil.copyfile(source, destination)
