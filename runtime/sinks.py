"""Sinks: where each batch's output goes, with Flink's two-phase commit.

A sink has three methods (a user's ``module:Class`` sink needs the same three):

- ``write(batch_id, df, run_id)`` stages the batch's output as run ``run_id``'s (called for every batch, on
  the driver). Staged output belongs to the run that wrote it: a zombie run's late writes never mix with
  the live run's.
- ``commit(staged)`` publishes exactly the batches a ``StagedOutput`` names (staged by ``staged.run_id``),
  tagged with ``staged.checkpoint_id``. It must be idempotent: a commit cut short by a crash is repeated.
- ``recover(staged, lineage)`` on restore: publishes ``staged`` (what the restored snapshot names, or None),
  aborts every other staged batch of any run, and sets aside published output whose checkpoint id is not
  in ``lineage`` (the restored history): the replay recomputes it. Output set aside earlier whose id is in
  ``lineage`` is published again (a rewind to a branch abandoned before).

Optional: ``prune(older_than_s, before_delete=None)`` deletes output set aside longer ago than that
(``--set-aside-retention``), calling ``before_delete()`` once before its first delete (the run confirms its
lease there; a ``prune(older_than_s)`` without it is confirmed before the call);
``highest_published_id()``, the largest checkpoint id in published (or set-aside) output, so the
next checkpoint id is above it (ids then never repeat in one sink, whichever job or savepoint wrote it), and
``published_ids()``, the ids of what is published now (what ``--existing-output keep`` adopts), and
``used_ids()``, those and the ids of output set aside (a long history's unused gaps are closed by them).

With ``exactly-once`` the job commits when a checkpoint that names the batch completes; with
``at-least-once`` right after ``write``.
"""

from __future__ import annotations

import importlib
import inspect
import logging
import posixpath
import re
import time
from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

from fsspec.implementations.local import LocalFileSystem

from spark_checkpoint_runtime import faults
from spark_checkpoint_runtime.layout import Lineage, StagedOutput, open_url, validate_key
from spark_checkpoint_runtime.layout.store import is_object_store, make_folder, modified_time, sync_file, sync_folder

log = logging.getLogger(__name__)

STAGING_DIR = "_staging"
ABORTED_DIR = "_aborted"  # staged batches no restored snapshot named; another snapshot may still publish them
ROLLED_BACK_DIR = "_rolled_back"
_STAGED_BATCH = re.compile(r"^batch-(\d+)$")
_PUBLISHED = re.compile(r"^c(\d+)-b(\d+)-")
SINK_METHODS = ("write", "commit", "recover")
# Object stores: files copied at once (async stores such as s3fs run the copies concurrently), then deleted in
# one batched request. At 200 partitions a checkpoint publishes hundreds of files; one at a time, at tens of ms
# a request, that took longer than a 10 s checkpoint interval.
MOVES_AT_ONCE = 100


@runtime_checkable
class Sink(Protocol):
    """What the job calls on a sink; see the module docstring for the contract."""

    def write(self, batch_id: int, df: Any, run_id: str) -> None: ...

    def commit(self, staged: StagedOutput) -> None: ...

    def recover(self, staged: StagedOutput | None, lineage: Lineage) -> None: ...


def highest_published_id(sink: Sink) -> int:
    """The largest checkpoint id in the sink's published output (0 if it cannot tell or has none)."""
    method = getattr(sink, "highest_published_id", None)
    return int(method()) if callable(method) else 0


class ParquetSink:
    """Two-phase Parquet output under ``path``, readable by ``spark.read.parquet`` and pyarrow.

    Batches are staged under ``path/_staging/<run>/batch-<N>/`` (hidden from readers: names starting with
    ``_``). Commit moves each staged file to ``path/c<checkpoint>-b<batch>-<file>``; a move is atomic per file,
    and a commit cut short by a crash is finished on restore. Recovery moves published files whose
    checkpoint id is outside the restored history to ``path/_rolled_back/restore-<id>/``: the replay
    recomputes them, so keeping them would count rows twice; files set aside earlier whose id is in the restored
    history move back. Nothing is deleted but aborted staging.
    """

    def __init__(self, path: str, storage_options: dict[str, Any] | None = None):
        self.url = path
        self.fs, self.path = open_url(path, storage_options)
        self.path = self.path.rstrip("/")
        self.staging = posixpath.join(self.path, STAGING_DIR)

    def _staged_batch_path(self, run_id: str, batch_id: int) -> str:
        return posixpath.join(self.staging, validate_key(run_id, "run id"), f"batch-{int(batch_id)}")

    def write(self, batch_id: int, df: Any, run_id: str) -> None:
        df.write.mode("overwrite").parquet(self.fs.unstrip_protocol(self._staged_batch_path(run_id, batch_id)))

    def staged_batches(self) -> dict[str, list[int]]:
        """Every staged batch, by the run that staged it."""
        found: dict[str, list[int]] = {}
        for run_folder in self._ls(self.staging):
            batches = (_STAGED_BATCH.match(posixpath.basename(n.rstrip("/"))) for n in self._ls(run_folder))
            found[posixpath.basename(run_folder.rstrip("/"))] = sorted(int(m.group(1)) for m in batches if m)
        return found

    def commit(self, staged: StagedOutput) -> None:
        for batch_id in staged.batches:
            parts = self._batch_parts(staged.run_id, batch_id)
            moves = [
                (source, posixpath.join(self.path, f"c{staged.checkpoint_id}-b{batch_id}-{name}"))
                for name, source in sorted(parts.items())
            ]
            self._move_all(moves, after_each="sink-commit")
            if parts:
                sync_folder(self.fs, self.path)  # the published names are durable before the commit returns
            # Both folders go: a part found in both (an abort cut short) was published from one of them.
            self._rm(self._staged_batch_path(staged.run_id, batch_id))
            self._rm(self._aborted_batch_path(staged.run_id, batch_id))

    def _move(self, source: str, destination: str) -> None:
        """Move one file (see ``_move_all``)."""
        self._move_all([(source, destination)])

    def _move_all(self, moves: list[tuple[str, str]], after_each: str | None = None) -> None:
        """Move files, ``(source, destination)`` pairs; fault point ``after_each`` once each file is moved.

        On a local (or locally mounted) filesystem, a rename each, the file fsynced first (Spark does not fsync
        what it wrote: the bytes go before the name). Elsewhere (object stores, HDFS through fsspec)
        ``MOVES_AT_ONCE`` copies (run together by async stores such as s3fs), then the deletes of their sources
        (one batched request where the store has it): a kill in between leaves those files in both places,
        whole (an object store's copy is atomic), and whichever step comes next repeats the moves, which are
        idempotent: the same bytes are copied over the same names, then the sources go."""
        if isinstance(self.fs, LocalFileSystem):
            for source, destination in moves:
                sync_file(self.fs, source)
                self.fs.mv(source, destination)
                if after_each:
                    faults.reach(after_each)
            return
        for start in range(0, len(moves), MOVES_AT_ONCE):
            chunk = moves[start : start + MOVES_AT_ONCE]
            self.fs.copy([source for source, _ in chunk], [destination for _, destination in chunk])
            for _ in chunk:
                faults.reach("sink-move")
            if getattr(self.fs, "async_impl", False):
                self.fs.rm([source for source, _ in chunk])  # one batched delete (s3fs: up to 1,000 keys)
            else:
                for source, _ in chunk:  # some stores' rm takes one path (pyarrow's HDFS, webhdfs)
                    self.fs.rm(source)
            for _ in chunk if after_each else ():
                faults.reach(after_each)

    def recover(self, staged: StagedOutput | None, lineage: Lineage) -> None:
        if staged is not None:
            self.commit(staged)
        for run_id, batches in self.staged_batches().items():
            for batch_id in batches:
                # Set aside, not deleted: another snapshot (a savepoint whose commit was cut short) may name
                # it, and a restore from that snapshot publishes it from there.
                log.info(
                    "aborting staged output of batch %d (run %s): the restored snapshot does not name it",
                    batch_id,
                    run_id,
                )
                # File by file, over whatever an earlier abort cut short left there: never a delete of it.
                aborted = self._aborted_batch_path(run_id, batch_id)
                make_folder(self.fs, aborted)
                parts = self._parts_in(self._staged_batch_path(run_id, batch_id))
                self._move_all([(source, posixpath.join(aborted, posixpath.basename(source))) for source in parts])
                self._rm(self._staged_batch_path(run_id, batch_id))
        self._rm(self.staging)  # what is left has no shape a snapshot could name
        rolled_back = posixpath.join(self.path, ROLLED_BACK_DIR, f"restore-{lineage.highest}")
        for published in self._published():
            match = _PUBLISHED.match(posixpath.basename(published))
            if match and not lineage.contains(int(match.group(1))):
                log.warning(
                    "moving %s to %s: checkpoint %s is not in the restored history (%s)",
                    posixpath.basename(published),
                    rolled_back,
                    match.group(1),
                    lineage.describe(),
                )
                make_folder(self.fs, rolled_back)
                self._move(published, posixpath.join(rolled_back, posixpath.basename(published)))
                faults.reach("rollback")
        # Output an earlier restore set aside comes back when the restored history is the one it belongs to
        # (a rewind to a checkpoint of a branch that was abandoned before). Ids never repeat in one sink, so
        # its names cannot clash with what is published.
        for aside in self._set_aside():
            match = _PUBLISHED.match(posixpath.basename(aside))
            if match and lineage.contains(int(match.group(1))):
                log.warning(
                    "moving %s back from %s: checkpoint %s is in the restored history (%s)",
                    posixpath.basename(aside),
                    posixpath.dirname(aside),
                    match.group(1),
                    lineage.describe(),
                )
                self._move(aside, posixpath.join(self.path, posixpath.basename(aside)))
                faults.reach("rollback")

    def prune(
        self, older_than_s: float, now: float | None = None, before_delete: Callable[[], None] | None = None
    ) -> int:
        """Delete output set aside longer than ``older_than_s`` ago (``_aborted/`` batches, ``_rolled_back/``
        folders); returns how many folders went. Called at a run's start, after recovery, under the lease:
        ``before_delete`` (the run confirming it still holds the job) runs once before the first delete, and
        not at all when nothing is due.

        An aborted batch no restored snapshot named is garbage unless an old snapshot whose commit was cut short
        is restored later; output set aside by a restore comes back only on a rewind to the history it belonged
        to. Both are kept for ``--set-aside-retention`` (age: the newest file a folder holds, as the store
        reports it), so the sink's bookkeeping stays bounded however many runs a job has.
        """
        now = time.time() if now is None else now
        aborted = {run: self._ls(run) for run in self._ls(posixpath.join(self.path, ABORTED_DIR))}
        folders = [batch for batches in aborted.values() for batch in batches]
        folders += self._ls(posixpath.join(self.path, ROLLED_BACK_DIR))
        doomed = []
        for folder in folders:
            try:
                found = self.fs.find(folder, detail=True)
            except FileNotFoundError:
                continue
            # A local folder's own time is when the last file was moved into it (a rename keeps the file's).
            times = [modified_time(info) for info in [*found.values(), self._info(folder)]]
            newest = max((t for t in times if t is not None), default=None)
            if newest is None or now - newest > older_than_s:
                doomed.append(folder)
        emptied = [run for run, batches in aborted.items() if all(batch in doomed for batch in batches)]
        if (doomed or emptied) and before_delete is not None:
            before_delete()
        for folder in doomed:
            self._rm(folder)
        for run in emptied:
            self._rmdir(run)
        if doomed:
            log.info("deleted %d folder(s) of output set aside more than %ds ago", len(doomed), older_than_s)
        return len(doomed)

    def published_ids(self) -> set[int]:
        """Checkpoint ids of the output published now (not what is set aside)."""
        found = (_PUBLISHED.match(posixpath.basename(p)) for p in self._published())
        return {int(m.group(1)) for m in found if m}

    def used_ids(self) -> set[int]:
        """Checkpoint ids of output published now or set aside earlier (both were used)."""
        aside = (_PUBLISHED.match(posixpath.basename(p)) for p in self._set_aside())
        return self.published_ids() | {int(m.group(1)) for m in aside if m}

    def highest_published_id(self) -> int:
        """The largest checkpoint id in output published now or set aside earlier (both were used)."""
        return max(self.used_ids(), default=0)

    def _published(self) -> list[str]:
        return [p for p in self._ls(self.path) if _PUBLISHED.match(posixpath.basename(p))]

    def _aborted_batch_path(self, run_id: str, batch_id: int) -> str:
        return posixpath.join(self.path, ABORTED_DIR, validate_key(run_id, "run id"), f"batch-{int(batch_id)}")

    def _parts_in(self, folder: str) -> list[str]:
        try:
            return [p for p in self.fs.find(folder) if posixpath.basename(p).startswith("part-")]
        except FileNotFoundError:
            return []

    def _batch_parts(self, run_id: str, batch_id: int) -> dict[str, str]:
        """A named batch's part files by name, wherever they are: staged, set aside by an earlier recovery, or
        split between the two by an abort cut short (the staged copy wins; both are whole). Empty when the batch
        was published already (a repeated commit)."""
        parts: dict[str, str] = {}
        for folder in (self._aborted_batch_path(run_id, batch_id), self._staged_batch_path(run_id, batch_id)):
            parts.update({posixpath.basename(p): p for p in self._parts_in(folder)})
        return parts

    def _set_aside(self) -> list[str]:
        try:
            found = self.fs.find(posixpath.join(self.path, ROLLED_BACK_DIR))
        except FileNotFoundError:
            return []
        return [p for p in found if _PUBLISHED.match(posixpath.basename(p))]

    def _info(self, path: str) -> dict[str, Any]:
        try:
            return self.fs.info(path)
        except (FileNotFoundError, OSError):
            return {}

    def _ls(self, folder: str) -> list[str]:
        try:
            return self.fs.ls(folder, detail=False)
        except FileNotFoundError:
            return []

    def _rm(self, folder: str) -> None:
        try:
            self.fs.rm(folder, recursive=True)
        except FileNotFoundError:
            pass

    def _rmdir(self, folder: str) -> None:
        """Remove ``folder`` if it is empty now; on an object store it went with its last object."""
        if is_object_store(self.fs):
            return
        try:
            self.fs.rmdir(folder)
        except OSError:
            pass  # something was set aside into it since it was listed: it stays


class ConsoleSink:
    """Prints each batch (at-least-once by nature: printed rows cannot be taken back)."""

    def write(self, batch_id: int, df: Any, run_id: str) -> None:
        print(f"-------- batch {batch_id} --------", flush=True)
        df.show(truncate=False)

    def commit(self, staged: StagedOutput) -> None:
        """Nothing to publish: rows were printed when written."""

    def recover(self, staged: StagedOutput | None, lineage: Lineage) -> None:
        """Nothing staged: rows were printed when written."""


class SinkError(ValueError):
    """A sink spec that cannot be loaded."""


def load_sink(spec: str, storage_options: dict[str, Any] | None = None) -> Sink:
    """Build the sink named by ``--sink``: ``parquet:PATH``, ``console`` or ``module:Class``."""
    if spec == "console":
        return ConsoleSink()
    if spec.startswith("parquet:"):
        return ParquetSink(spec[len("parquet:") :], storage_options)
    module_name, _, class_name = spec.partition(":")
    try:
        cls = getattr(importlib.import_module(module_name), class_name)
    except (ImportError, AttributeError) as exc:
        raise SinkError(f"--sink {spec!r} cannot be loaded: {exc}") from None
    # A sink that takes storage options gets the job's (credentials for the same store, never on a command line).
    accepts_options = "storage_options" in inspect.signature(cls).parameters
    sink = cls(storage_options=dict(storage_options or {})) if accepts_options else cls()
    missing = [m for m in SINK_METHODS if not callable(getattr(sink, m, None))]
    if missing:
        raise SinkError(
            f"--sink {spec!r}: {class_name} lacks {', '.join(missing)}; a sink needs {', '.join(SINK_METHODS)} "
            "(see 'Sinks' in docs/runtime.md)"
        )
    return sink
