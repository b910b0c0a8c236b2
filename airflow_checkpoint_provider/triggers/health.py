"""Watch a running job's checkpoints from beside it: the judgement, and its deferrable trigger."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from airflow_checkpoint_provider.durations import Duration
from airflow_checkpoint_provider.triggers.polling import StoragePollingTrigger
from spark_checkpoint_runtime.durations import format_duration
from spark_checkpoint_runtime.layout import (
    ControlChannel,
    JobFolder,
    LeaseFiles,
    LeaseListing,
    find_completed_checkpoint,
)


@dataclass
class RunHealth:
    """One look at a running job: ``waiting`` (no run started since the watch began), ``not_started`` (none
    within the start timeout), ``running``, ``ended`` (the run let go of the job, reported its end, or another
    run took it over) or ``stalled``."""

    state: str
    message: str
    details: dict[str, Any] = field(default_factory=dict)


def how_run_ended(storage: JobFolder, listing: LeaseListing, epoch: int, run_key: str | None) -> str | None:
    """How the run holding lease ``epoch`` ended, or None while it holds the job: ``taken over`` (a newer
    epoch exists), the status of its run report, or ``released the job``."""
    if listing.latest > epoch:
        return "taken over"
    report = ControlChannel(storage).run_report(run_key) if run_key else None
    if report is not None:
        return str(report.get("status", "reported"))
    return "released the job" if epoch in listing.released else None


def first_run_since(lease: LeaseFiles, listing: LeaseListing, started_after_ms: int) -> tuple[int, dict | None]:
    """The oldest lease epoch (and its grant) granted at or after ``started_after_ms``; ``(0, None)`` if none.

    A sensor in reschedule mode is a new instance at every poke, and a trigger rebuilt after a triggerer restart
    has only its arguments: neither remembers which run it watched. The first run since the watch began is that
    run, so a later run (a restore after the watched one ended) is never mistaken for it. Reads grants from the
    newest back to the first one older than the watch: usually one or two.
    """
    watched, grant = 0, None
    for candidate in reversed(listing.epochs):
        found = lease.read(candidate)
        if found is None or int(found.get("acquired_ms", 0)) < started_after_ms:
            break
        watched, grant = candidate, found
    return watched, grant


def judge_running_job(
    storage: JobFolder,
    started_after_ms: int,
    window_s: float,
    now_s: float,
    epoch: int | None = None,
    start_timeout_s: float | None = None,
) -> RunHealth:
    """Judge the run that took the job's lease at or after ``started_after_ms`` (epoch ms), or, once known, the
    run of lease ``epoch`` (``details["epoch"]`` of an earlier judgement: a later run is another run).

    Progress is its newest completed checkpoint, or its start before it has one: a run with no progress for
    longer than ``window_s`` has stalled (frozen, hung, or killed without a chance to let go). No run within
    ``start_timeout_s`` of ``started_after_ms`` is ``not_started``.
    """
    lease = LeaseFiles(storage)
    listing = lease.listing()
    if epoch is not None:
        watched, grant = epoch, lease.read(epoch)
    else:
        watched, grant = first_run_since(lease, listing, started_after_ms)
    started_ms = int(grant.get("acquired_ms", 0)) if grant else 0
    if epoch is None and grant is None:
        if start_timeout_s is not None and now_s - started_after_ms / 1000 > start_timeout_s:
            return RunHealth("not_started", not_started(storage.job_name, start_timeout_s))
        return RunHealth("waiting", f"no run of job {storage.job_name!r} has started since the watch began")
    grant = grant or {}
    run_key = grant.get("run_key")
    details: dict[str, Any] = {"run_id": grant.get("run_id"), "run_key": run_key, "epoch": watched}
    ended = how_run_ended(storage, listing, watched, run_key)
    if ended is not None:
        return RunHealth("ended", f"run {grant.get('run_id')} ended ({ended})", {**details, "run_status": ended})
    latest = find_completed_checkpoint(storage, None, started_ms)
    progress_ms = max(started_ms, latest["completion_timestamp_ms"] if latest else 0)
    age = now_s - progress_ms / 1000
    details.update(checkpoint_id=latest["checkpoint_id"] if latest else None, age_seconds=round(age, 3))
    if age > window_s:
        since = f"chk-{latest['checkpoint_id']} completed" if latest else "it started, with no checkpoint yet"
        return RunHealth(
            "stalled",
            f"job {storage.job_name!r} has stalled: run {grant.get('run_id')} (lease epoch {watched}, host "
            f"{grant.get('host', '?')}, pid {grant.get('pid', '?')}) made no progress for {format_duration(age)} "
            f"(since {since}), longer than the {format_duration(window_s)} progress window; stop it and "
            "restore from the latest checkpoint",
            details,
        )
    return RunHealth("running", f"run {grant.get('run_id')} is checkpointing", details)


class RunningJobHealthTrigger(StoragePollingTrigger):
    """Watches a running job until it ends (``{"status": "ended"}``) or stalls (``{"status": "stalled"}``).

    It judges the run of lease ``epoch`` if given, else the first run found that started after
    ``started_after_ms``. A job that never starts within ``start_timeout_s`` yields ``{"status":
    "not_started"}``, a failure to read storage ``{"status": "error"}``. ``RunningJobHealthSensor`` builds it.

    :param job_name: the job folder under the root.
    :param checkpoint_root: the checkpoint root (a path or fsspec URL).
    :param started_after_ms: the watch's start (epoch milliseconds): the first run that took the job at or
        after it is the one watched.
    :param window_s: the progress window in seconds: no checkpoint for longer is a stall.
    :param start_timeout_s: how long (seconds) a run may take to appear before the watch yields
        ``not_started``.
    :param epoch: the lease epoch of the run watched, once known.
    :param storage_conn_id: a ``checkpoint_storage`` or standard cloud connection, if needed.
    :param poke_interval: time between judgements (seconds, a ``timedelta`` or e.g. ``"5s"``).
    """

    def __init__(
        self,
        *,
        job_name: str,
        checkpoint_root: str,
        started_after_ms: int,
        window_s: float,
        start_timeout_s: float,
        epoch: int | None = None,
        storage_conn_id: str | None = None,
        poke_interval: Duration = 5.0,
    ):
        super().__init__(
            job_name=job_name, checkpoint_root=checkpoint_root, storage_conn_id=storage_conn_id, interval=poke_interval
        )
        self.started_after_ms = started_after_ms
        self.epoch = epoch
        self.window_s = window_s
        self.start_timeout_s = start_timeout_s
        self._watched_epoch = epoch  # else learnt at the first look that finds the run, then kept

    def own_kwargs(self) -> dict[str, Any]:
        return {
            "started_after_ms": self.started_after_ms,
            "epoch": self.epoch,
            "window_s": self.window_s,
            "start_timeout_s": self.start_timeout_s,
        }

    def poll_once(self, storage: JobFolder) -> list[dict[str, Any]]:
        health = judge_running_job(
            storage, self.started_after_ms, self.window_s, time.time(), self._watched_epoch, self.start_timeout_s
        )
        self._watched_epoch = health.details.get("epoch", self._watched_epoch)
        if health.state in ("ended", "stalled", "not_started"):
            return [{**health.details, "status": health.state, "message": health.message}]
        return []


def not_started(job_name: str, start_timeout_s: float) -> str:
    return (
        f"no run of job {job_name!r} took the job within {format_duration(start_timeout_s)} of the watch's start; "
        "look at the job task's log (it may have failed before starting)"
    )
