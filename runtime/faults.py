"""Fault injection for reliability tests: kill the job at a named point. Off unless ``CHECKPOINT_FAULTS`` is set.

Crash tests need to kill a job at moments a timer rarely hits: between a checkpoint's last upload and its
``_metadata``, half-way through a sink commit, in the middle of retention's deletes. Set::

    CHECKPOINT_FAULTS="upload@2"                 # the 2nd time any checkpoint stores a file
    CHECKPOINT_FAULTS="sink-commit@1,batch@5"    # whichever is reached first

and the run SIGKILLs its whole process group (the Spark JVM and the Python driver, as an OOM killer or a
lost node would) the n-th time it reaches that point. Nothing is cleaned up and nothing is flushed except
one log line naming the point, so what is left on storage is exactly what a real crash leaves.

Points (``POINTS``):

- ``batch``: inside a batch, after the sink staged its output and before Spark commits it;
- ``upload``: during a checkpoint's uploads, after one file (or segment) is stored; to an object store, files
  of their own go up a chunk at a time, and the point is reached once per file after its chunk;
- ``before-metadata``: after all of a checkpoint's files are stored, before its ``_metadata``;
- ``retention-delete``: during retention (subsume), after one checkpoint folder, or the shared files, is deleted;
- ``sink-commit``: during a sink commit, after one file is published;
- ``sink-move``: on a store without rename (object stores), between a sink file's copy and the delete of its
  source (a commit, an abort);
- ``rollback``: during a restore's recovery, after one published file outside the restored history is
  moved aside;
- ``savepoint``: during a savepoint's uploads, after one file is copied (to an object store: once per file
  after its chunk);
- ``rescale``: during a rescale of the HDFS-backed store's state in its private working folder, after one old
  partition's state is moved, then after each offset log file is re-pinned.

Under spark-submit the driver's stderr reaches the log through the JVM, which dies in the same instant, so
the log line can be lost: set ``CHECKPOINT_FAULTS_RECORD=/path/file`` and the line is appended there first.

Only for a job started in a process group of its own (``setsid``, ``start_new_session=True``): the kill
takes the whole group.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading

log = logging.getLogger(__name__)

ENV = "CHECKPOINT_FAULTS"
RECORD_ENV = "CHECKPOINT_FAULTS_RECORD"
POINTS = (
    "batch",
    "upload",
    "before-metadata",
    "retention-delete",
    "sink-commit",
    "sink-move",
    "rollback",
    "savepoint",
    "rescale",
)


class FaultSpecError(ValueError):
    """``CHECKPOINT_FAULTS`` cannot be parsed."""


def parse_faults(spec: str) -> dict[str, int]:
    """``"point@n,..."`` to ``{point: n}``; raises ``FaultSpecError`` naming what is wrong."""
    plan: dict[str, int] = {}
    for item in (part.strip() for part in spec.split(",")):
        if not item:
            continue
        point, _, count = item.partition("@")
        if point not in POINTS:
            raise FaultSpecError(f"{ENV}: unknown point {point!r} in {spec!r}; points are {', '.join(POINTS)}")
        if not count.isdigit() or int(count) < 1:
            raise FaultSpecError(f"{ENV}: {item!r} needs a hit count of 1 or more, like {point}@2")
        plan[point] = int(count)
    return plan


_lock = threading.Lock()
_plan: dict[str, int] | None = None
_hits: dict[str, int] = {}


def configure(spec: str | None = None) -> dict[str, int]:
    """Read the plan (from ``CHECKPOINT_FAULTS`` unless ``spec`` is given) and reset the hit counts."""
    global _plan
    with _lock:
        _plan = parse_faults(spec if spec is not None else os.environ.get(ENV, ""))
        _hits.clear()
        if _plan:
            log.warning("fault injection is ON: %s", ", ".join(f"{p}@{n}" for p, n in _plan.items()))
        return dict(_plan)


def reach(point: str) -> None:
    """Mark that the run reached ``point``; kill the process group if the plan says this is the hit."""
    if _plan is None:
        configure()
    if not _plan or point not in _plan:
        return
    with _lock:
        _hits[point] = _hits.get(point, 0) + 1
        fire = _hits[point] == _plan[point]
    if fire:
        message = f"fault injection: SIGKILL at {point}@{_plan[point]} (pid {os.getpid()})"
        record = os.environ.get(RECORD_ENV)
        if record:
            with open(record, "a", encoding="utf-8") as handle:
                handle.write(message + "\n")
        log.warning(message)
        print(message, file=sys.stderr, flush=True)
        os.killpg(os.getpgrp(), signal.SIGKILL)
