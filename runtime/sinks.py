"""Sinks: where each batch's output goes, with Flink's two-phase commit.

A sink has three methods (a user's ``module:Class`` sink needs the same three):

- ``write(batch_id, df)`` stages the batch's output (called for every batch, on the driver);
- ``commit(batch_id, checkpoint_id)`` publishes every staged batch up to ``batch_id``;
- ``abort(after_batch_id, checkpoint_id)`` on restore: discards staged output of batches after
  ``after_batch_id`` (they are recomputed). ``checkpoint_id`` is the restored checkpoint, or None for a
  fresh start.

With ``exactly-once`` the job calls ``commit`` only when a checkpoint covering the batch completes; with
``at-least-once`` right after ``write``.
"""

from __future__ import annotations

import importlib
import logging
import posixpath
import re
from typing import Any, Protocol, runtime_checkable

from spark_checkpoint_runtime import faults
from spark_checkpoint_runtime.layout import open_url

log = logging.getLogger(__name__)

STAGING_DIR = "_staging"
ROLLED_BACK_DIR = "_rolled_back"
_STAGED_BATCH = re.compile(r"^batch-(\d+)$")
_PUBLISHED = re.compile(r"^c(\d+)-b(\d+)-")


@runtime_checkable
class Sink(Protocol):
    """What the job calls on a sink; see the module docstring for the contract."""

    def write(self, batch_id: int, df: Any) -> None: ...

    def commit(self, batch_id: int, checkpoint_id: int) -> None: ...

    def abort(self, after_batch_id: int, checkpoint_id: int | None) -> None: ...


class ParquetSink:
    """Two-phase Parquet output under ``path``, readable by ``spark.read.parquet`` and pyarrow.

    Batches are staged under ``path/_staging/batch-<N>/`` (hidden from readers: names starting with ``_``).
    Commit moves each staged file to ``path/c<checkpoint>-b<batch>-<file>``; a move is atomic per file, and
    a commit cut short by a crash is finished on restore. A restore from checkpoint K also moves files
    published after K (``c<id>`` > K) to ``path/_rolled_back/``: they are recomputed by the replay, so
    keeping them would count rows twice. Nothing is deleted.
    """

    def __init__(self, path: str, storage_options: dict[str, Any] | None = None):
        self.url = path
        self.fs, self.path = open_url(path, storage_options)
        self.path = self.path.rstrip("/")
        self.staging = posixpath.join(self.path, STAGING_DIR)

    def _staged_batch_path(self, batch_id: int) -> str:
        return posixpath.join(self.staging, f"batch-{batch_id}")

    def write(self, batch_id: int, df: Any) -> None:
        df.write.mode("overwrite").parquet(self.fs.unstrip_protocol(self._staged_batch_path(batch_id)))

    def staged_batches(self) -> list[int]:
        try:
            names = self.fs.ls(self.staging, detail=False)
        except FileNotFoundError:
            return []
        found = (_STAGED_BATCH.match(posixpath.basename(n.rstrip("/"))) for n in names)
        return sorted(int(m.group(1)) for m in found if m)

    def commit(self, batch_id: int, checkpoint_id: int) -> None:
        for staged in self.staged_batches():
            if staged > batch_id:
                continue
            folder = self._staged_batch_path(staged)
            for source in self.fs.find(folder):
                name = posixpath.basename(source)
                if not name.startswith("part-"):
                    continue
                self.fs.mv(source, posixpath.join(self.path, f"c{checkpoint_id}-b{staged}-{name}"))
                faults.reach("sink-commit")
            self.fs.rm(folder, recursive=True)

    def abort(self, after_batch_id: int, checkpoint_id: int | None) -> None:
        for staged in self.staged_batches():
            if staged > after_batch_id:
                log.info("aborting staged output of batch %d (after restored batch %d)", staged, after_batch_id)
                self.fs.rm(self._staged_batch_path(staged), recursive=True)
        if checkpoint_id is None:
            return
        rolled_back = posixpath.join(self.path, ROLLED_BACK_DIR, f"after-chk-{checkpoint_id}")
        for published in self._published():
            match = _PUBLISHED.match(posixpath.basename(published))
            if match and int(match.group(1)) > checkpoint_id:
                log.warning(
                    "moving %s to %s: it was published after checkpoint %d, which this run restores from",
                    posixpath.basename(published),
                    rolled_back,
                    checkpoint_id,
                )
                self.fs.makedirs(rolled_back, exist_ok=True)
                self.fs.mv(published, posixpath.join(rolled_back, posixpath.basename(published)))

    def _published(self) -> list[str]:
        try:
            return [p for p in self.fs.ls(self.path, detail=False) if _PUBLISHED.match(posixpath.basename(p))]
        except FileNotFoundError:
            return []


class ConsoleSink:
    """Prints each batch (at-least-once by nature: printed rows cannot be taken back)."""

    def write(self, batch_id: int, df: Any) -> None:
        print(f"-------- batch {batch_id} --------", flush=True)
        df.show(truncate=False)

    def commit(self, batch_id: int, checkpoint_id: int) -> None:
        """Nothing to publish: rows were printed when written."""

    def abort(self, after_batch_id: int, checkpoint_id: int | None) -> None:
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
    sink = cls()
    missing = [m for m in ("write", "commit", "abort") if not callable(getattr(sink, m, None))]
    if missing:
        raise SinkError(f"--sink {spec!r}: {class_name} lacks {', '.join(missing)}; a sink needs write, commit, abort")
    return sink
