"""What the checkpoint pages show, as plain data: the job list and one job's history.

Everything is read through the format module (``spark_checkpoint_runtime.layout``), synchronously: the web
app calls these from worker threads, never in the API server's event loop. Reading one job costs one listing
of the job folder, one ``_metadata`` read per checkpoint shown, and, for the restore point, listings of the
``shared/<run>/`` folders the newest checkpoints reference, never a listing of all of ``shared/``.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

from airflow_checkpoint_provider.hooks.checkpoint_storage import CheckpointStorageHook
from airflow_checkpoint_provider.redaction import Redaction, public_url
from airflow_checkpoint_provider.sensors.health import progress_window
from airflow_checkpoint_provider.ui.roots import ConfiguredRoot
from spark_checkpoint_runtime.layout import CheckpointMetadata, ControlChannel, DamagedCheckpoint, JobFolder
from spark_checkpoint_runtime.state_inspection import state_bytes

# The health sensor's rule with its defaults (10 s interval, 10 min timeout, no tolerable failures): 20 min.
HEALTH_WINDOW_SECONDS = progress_window(10, 600, 0)
# A job page shows this many of the newest checkpoints unless asked for more (a job whose retention never
# ran can have tens of thousands: each shown one costs a ``_metadata`` read); the count of all is shown beside.
SHOWN_CHECKPOINTS = 100
MAX_SHOWN_CHECKPOINTS = 2_000


def storage_of(root: ConfiguredRoot, job_name: str) -> JobFolder:
    """The format module's view of one job under a configured root, with the root's connection."""
    return CheckpointStorageHook(root.conn_id).storage(root.url, job_name)


def list_jobs(root: ConfiguredRoot) -> list[str]:
    return CheckpointStorageHook(root.conn_id).list_jobs(root.url)


def _iso(ms: int | None) -> str | None:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S UTC") if ms else None


def _row(meta: CheckpointMetadata, status: str, path: str) -> dict[str, Any]:
    return {
        "id": meta.id,
        "kind": meta.kind,
        "batch_id": meta.batch_id,
        "completed": _iso(meta.completion_timestamp_ms),
        "completion_timestamp_ms": meta.completion_timestamp_ms,
        "duration_ms": meta.durations_ms.get("total"),
        "bytes_written": meta.bytes_written,
        "total_bytes": meta.summary()["total_bytes"],
        "state_bytes": meta.state_bytes,
        "restored_from": meta.restored_from,
        "status": status,
        "path": path,
    }


def _read_one(storage: JobFolder, checkpoint_id: int) -> CheckpointMetadata | DamagedCheckpoint | None:
    """A checkpoint's ``_metadata``, why it did not parse, or None when there is none yet (in progress)."""
    try:
        return storage.checkpoints.read(checkpoint_id)
    except DamagedCheckpoint as exc:
        return None if exc.reason.startswith("no _metadata") else exc


def restore_point(storage: JobFolder, ids: list[int]) -> tuple[dict[str, Any], CheckpointMetadata | None]:
    """What ``--restore-from latest`` would pick now, each damaged checkpoint it would skip and why, and the
    picked checkpoint's metadata.

    The runtime's own newest-first walk (``checkpoints.iter_valid``), stopped at the first valid checkpoint, so
    it reads only what ``latest`` reads; a folder without ``_metadata`` (in progress) is skipped silently.
    ``ids``: the job's ``checkpoints.ids()``, already listed.
    """
    damaged: list[dict[str, Any]] = []
    for checkpoint_id, result in storage.checkpoints.iter_valid(ids=ids):
        if isinstance(result, DamagedCheckpoint):
            if not result.reason.startswith("no _metadata"):
                damaged.append({"id": checkpoint_id, "reason": result.reason})
            continue
        path = storage.url_of(storage.checkpoints.path(checkpoint_id))
        return {"id": checkpoint_id, "path": path, "damaged": damaged}, result
    return {"id": None, "path": None, "damaged": damaged}, None


def _savepoints(storage: JobFolder) -> list[dict[str, Any]]:
    rows = []
    for name in storage.savepoints.names():
        path = name  # a folder whose name breaks the rules has no path of ours to show
        try:
            path = storage.url_of(storage.savepoints.path(name))
            rows.append(_row(storage.savepoints.read(name), "savepoint", path))
        except (DamagedCheckpoint, ValueError) as exc:
            rows.append({"id": None, "kind": "savepoint", "status": f"damaged: {exc}", "path": path})
    return rows


def health(latest: dict[str, Any] | None, any_damaged: bool, now_s: float) -> dict[str, Any]:
    """The health sensor's verdict: healthy when the restore point completed within the window."""
    if latest is None or latest.get("completion_timestamp_ms") is None:
        state = "damaged" if any_damaged else "no checkpoint"
        return {"state": state, "age_seconds": None, "window_seconds": HEALTH_WINDOW_SECONDS}
    age = max(0.0, now_s - latest["completion_timestamp_ms"] / 1000)
    state = "healthy" if age <= HEALTH_WINDOW_SECONDS else "stalled"
    return {"state": state, "age_seconds": round(age, 1), "window_seconds": HEALTH_WINDOW_SECONDS}


def job_history(root: ConfiguredRoot, job_name: str, limit: int = SHOWN_CHECKPOINTS) -> dict[str, Any]:
    """One job: its newest ``limit`` checkpoints and every savepoint, the restore point, health and live runs.

    Credentials are removed from every string (``redaction.py``): this is what a page and its JSON show.
    """
    return Redaction.for_root(root).value(_job_history(root, job_name, limit))


def _job_history(root: ConfiguredRoot, job_name: str, limit: int) -> dict[str, Any]:
    storage = storage_of(root, job_name)
    ids = storage.checkpoints.ids()
    shown_ids = ids[-max(1, min(limit, MAX_SHOWN_CHECKPOINTS)) :]
    read = {checkpoint_id: _read_one(storage, checkpoint_id) for checkpoint_id in shown_ids}
    point, point_meta = restore_point(storage, ids)
    damaged = {d["id"]: d["reason"] for d in point["damaged"]}
    checkpoints = []
    for checkpoint_id in shown_ids:
        meta, path = read[checkpoint_id], storage.url_of(storage.checkpoints.path(checkpoint_id))
        if meta is None:
            checkpoints.append({"id": checkpoint_id, "kind": "checkpoint", "status": "in progress", "path": path})
        elif isinstance(meta, DamagedCheckpoint):
            checkpoints.append({"id": checkpoint_id, "kind": "checkpoint", "status": f"damaged: {meta.reason}"})
            checkpoints[-1]["path"] = path
        else:
            if checkpoint_id in damaged:
                status = f"damaged: {damaged[checkpoint_id]}"
            elif checkpoint_id == point["id"]:
                status = "restore point"
            else:
                status = "retained"
            checkpoints.append(_row(meta, status, path))
    latest = next((c for c in checkpoints if c["id"] == point["id"]), None)
    live = ControlChannel(storage).live_runs()
    return {
        "root_index": root.index,
        "root": root.url,
        "job_name": job_name,
        "location": storage.location,
        "checkpoint_count": len(ids),
        "shown": len(shown_ids),
        "checkpoints": checkpoints,
        "savepoints": _savepoints(storage),
        "restore_point": point,
        "partitions": partition_bytes(point_meta),
        "health": health(latest, bool(point["damaged"]), time.time()),
        "live_runs": live,
    }


def partition_bytes(meta: CheckpointMetadata | None) -> list[dict[str, Any]]:
    """The restore point's state bytes per stateful operator, store and partition (from its ``_metadata``: a
    skewed partition shows here; ``spark_checkpoint_runtime state --summary`` adds the rows, with Spark)."""
    if meta is None:
        return []
    found = state_bytes(meta)
    return [
        {"operator": operator, "store": store, "partition": partition, "bytes": found[(operator, store, partition)]}
        for operator, store, partition in sorted(found)
    ]


def job_summary(root: ConfiguredRoot, job_name: str, redaction: Redaction | None = None) -> dict[str, Any]:
    """One row of the job list, without credentials. Reads only what the restore point needs, not the whole
    history. ``redaction``: the root's, when the caller has it already (one connection lookup per root)."""
    return (redaction or Redaction.for_root(root)).value(_job_summary(root, job_name))


def _job_summary(root: ConfiguredRoot, job_name: str) -> dict[str, Any]:
    storage = storage_of(root, job_name)
    ids = storage.checkpoints.ids()
    point, meta = restore_point(storage, ids)
    latest = _row(meta, "restore point", point["path"]) if meta is not None else None
    return {
        "root_index": root.index,
        "root": root.url,
        "job_name": job_name,
        "health": health(latest, bool(point["damaged"]), time.time()),
        "latest_checkpoint_id": point["id"],
        "latest_completed": latest["completed"] if latest else None,
        "damaged_checkpoints": len(point["damaged"]),
        "retained_checkpoints": len(ids),
        "savepoints": len(storage.savepoints.names()),
        "running": bool(ControlChannel(storage).live_runs()),
    }


def job_history_if_exists(root: ConfiguredRoot, job_name: str, limit: int) -> dict[str, Any] | None:
    """``job_history``, or None when the root has no such job."""
    return job_history(root, job_name, limit) if job_name in list_jobs(root) else None


def overview(roots: list[ConfiguredRoot]) -> tuple[list[dict[str, Any]], list[str]]:
    """Every job's row under every root, and an error line per root (or job) that could not be read: a short
    reason without credentials, the full error in the API server's log."""
    rows: list[dict[str, Any]] = []
    errors: list[str] = []
    for root in roots:
        redaction = Redaction.for_root(root)
        try:
            jobs = list_jobs(root)
        except Exception as exc:  # noqa: BLE001 - one unreachable root must not hide the others
            where = f"root {root.index} ({public_url(root.url)})"
            errors.append(f"{where}: {redaction.reason(exc, f'listing {where}')}")
            continue
        for job in jobs:
            try:
                rows.append(job_summary(root, job, redaction))
            except Exception as exc:  # noqa: BLE001 - nor one unreadable job the rest of its root
                where = f"job {job!r} under root {root.index}"
                errors.append(f"{where}: {redaction.reason(exc, f'reading {where}')}")
    return rows, errors


def request_savepoint(root: ConfiguredRoot, job_name: str, trigger_id: str, stop: bool) -> None:
    """Write the savepoint request to the job's ``_control/``; ``LookupError`` when no run is alive."""
    ControlChannel(storage_of(root, job_name)).request_savepoint(trigger_id, stop=stop)
