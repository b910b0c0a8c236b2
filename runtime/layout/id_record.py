"""``_ids/``: the job's durable id record.

Checkpoints and savepoints share one counter (as in Flink). Each id is reserved here with an exclusive create
before anything of its snapshot is written, wherever the snapshot goes (a savepoint in another directory
included), so an id is never used twice: the next id is above the highest record. Only the newest records are
kept; the highest is all that matters.

``_ids/completed.json`` is written once, after the job's first checkpoint completes. From then on a job with
no valid checkpoint left refuses to start from empty state unless told to (``--restore-from none``).
"""

from __future__ import annotations

import json
import logging
import posixpath
import re
from typing import Any

from spark_checkpoint_runtime.layout.errors import CheckpointFormatError
from spark_checkpoint_runtime.layout.metadata import now_ms
from spark_checkpoint_runtime.layout.names import IDS_DIR
from spark_checkpoint_runtime.layout.store import create_exclusively, make_folder
from spark_checkpoint_runtime.layout.untrusted import read_json_object

log = logging.getLogger(__name__)

KEEP_RECORDS = 10  # records kept below the highest; older ones go
COMPLETED_FILE = "completed.json"
MAX_RECORD_BYTES = 16 * 1024
_RECORD = re.compile(r"^(\d{1,20})\.json$")


class IdRecord:
    """The id record of one job folder (``JobFolder``)."""

    def __init__(self, job: Any):
        self.job = job
        self.fs = job.fs
        self.base = posixpath.join(job.job_path, IDS_DIR)

    def _path(self, snapshot_id: int) -> str:
        return posixpath.join(self.base, f"{int(snapshot_id):020d}.json")

    def ids(self) -> list[int]:
        """Every reserved id still on record, ascending (one listing)."""
        try:
            entries = self.fs.ls(self.base, detail=False)
        except FileNotFoundError:
            return []
        found = (_RECORD.match(posixpath.basename(e.rstrip("/"))) for e in entries)
        return sorted(int(m.group(1)) for m in found if m)

    def highest(self) -> int:
        """The highest reserved id (0: no record, a job from before the record existed or a new one)."""
        return max(self.ids(), default=0)

    def reserve(self, snapshot_id: int, *, kind: str, run_id: str, target: str | None = None) -> bool:
        """Reserve ``snapshot_id`` for a snapshot about to be taken; False if the id is taken already."""
        make_folder(self.fs, self.base)
        record = {"id": snapshot_id, "kind": kind, "run_id": run_id, "target": target, "reserved_ms": now_ms()}
        return create_exclusively(self.fs, self._path(snapshot_id), json.dumps(record, sort_keys=True).encode())

    def forget(self, snapshot_ids: list[int]) -> None:
        """Delete the records of ``snapshot_ids`` (older ones: the highest record alone sets the next id)."""
        paths = [self._path(i) for i in snapshot_ids]
        if paths:
            self.fs.rm(paths)

    def prune(self) -> int:
        """Keep the newest ``KEEP_RECORDS`` records; return how many went."""
        ids = self.ids()
        old = ids[:-KEEP_RECORDS] if len(ids) > KEEP_RECORDS else []
        self.forget(old)
        return len(old)

    def mark_completed(self, checkpoint_id: int, run_id: str) -> None:
        """Record, once, that the job has completed a checkpoint (the first run to do so writes it)."""
        path = posixpath.join(self.base, COMPLETED_FILE)
        if self.fs.exists(path):  # every run after the first: a look is cheaper than a refused create (an fsync)
            return
        make_folder(self.fs, self.base)
        record = {"first_checkpoint": checkpoint_id, "run_id": run_id, "completed_ms": now_ms()}
        create_exclusively(self.fs, path, json.dumps(record).encode())

    def completed(self) -> dict[str, Any] | None:
        """What the completed-record says (None: the job never completed a checkpoint since it was kept).

        A damaged record still says the job completed checkpoints: it is never taken as "never".
        """
        path = posixpath.join(self.base, COMPLETED_FILE)
        try:
            return read_json_object(self.fs, path, max_bytes=MAX_RECORD_BYTES, what="the id record")
        except FileNotFoundError:
            return None
        except (CheckpointFormatError, ValueError, OSError) as exc:
            log.warning("%s is damaged (%s); it still counts as a completed checkpoint", path, exc)
            return {"damaged": str(exc)}
