"""Deferrable wait for a job's driver on a standalone cluster (cluster deploy mode) to end."""

from __future__ import annotations

import asyncio
import math
import time
from pathlib import Path
from typing import Any

from airflow_checkpoint_provider.durations import Duration
from airflow_checkpoint_provider.hooks.checkpoint_storage import CheckpointStorageHook
from airflow_checkpoint_provider.hooks.kill_watch import record_kill, stop_request_id
from airflow_checkpoint_provider.hooks.standalone_driver import (
    DRIVER_KILL_GRACE_SECONDS,
    FINAL_STATES,
    DriverStateUnknown,
    StandaloneDriver,
    kill_driver,
)
from airflow_checkpoint_provider.triggers.polling import StoragePollingTrigger
from spark_checkpoint_runtime.layout import ControlChannel, JobFolder

#: Looks in a row the master's REST server may miss before the wait fails (a master restarting).
TOLERATED_MISSES = 10
#: Seconds past the heartbeat timeout a driver may run on once its run has released the job and removed its
#: heartbeat: the runtime ends a process that cannot exit 30 s after its run, and the JVM follows.
RELEASED_GRACE_SECONDS = 90.0


class ClusterDriverTrigger(StoragePollingTrigger):
    """Fires when driver ``driver_id`` has ended on the standalone master at ``rest_url``, with its final state
    (the task then reads the run's report, ``_control/runs/<run_key>.json``).

    ``CheckpointedStreamingJobOperator(deferrable=True)`` builds it once the driver runs; DAG authors rarely need
    it directly. Each look reads the driver's state from the master, the job's newest checkpoint (logged when it
    changes, so the task's log follows the job), the run's heartbeat and its kill request. A driver that no
    longer answers a stop is killed through the master on a kill request, as the blocking operator's kill
    watch does. So is a running driver whose job's heartbeat has not changed for ``heartbeat_timeout`` (hung,
    frozen, or cut off from the storage): its lease has lapsed by then, so a retry may take the job over, and
    the task fails so that it does. So is a driver still running ``heartbeat_timeout`` plus 90 s after its
    run released the job (frozen, or unable to exit), which no heartbeat could show.

    :param job_name: the job folder under the root.
    :param checkpoint_root: the checkpoint root (a path or fsspec URL).
    :param rest_url: ``http://HOST:PORT`` of the master's REST server.
    :param driver_id: the driver (``driver-...``).
    :param run_key: the run key the job was submitted with.
    :param stop_timeout: seconds a graceful stop may take (``on_kill``); past it and a grace of 30 s the master
        is asked to kill the driver.
    :param storage_conn_id: a ``checkpoint_storage`` or standard cloud connection, if needed.
    :param poll_interval: time between looks (seconds, a ``timedelta`` or e.g. ``"10s"``).
    :param files: what the submission wrote (the launcher jar, the private spec), handed back in the event for
        the task to remove.
    :param heartbeat_timeout: seconds the run's heartbeat may stay unchanged, once seen, before the driver is
        killed (the job's lease timeout; None: not watched). Timed by the triggerer's own clock, from the
        last change it saw: a triggerer restart starts the count again.
    """

    interval_kwarg = "poll_interval"
    error_key = "reason"

    def __init__(
        self,
        *,
        job_name: str,
        checkpoint_root: str,
        rest_url: str,
        driver_id: str,
        run_key: str,
        stop_timeout: float,
        storage_conn_id: str | None = None,
        poll_interval: Duration = 10.0,
        files: list[str] | None = None,
        heartbeat_timeout: float | None = None,
    ):
        super().__init__(
            job_name=job_name, checkpoint_root=checkpoint_root, storage_conn_id=storage_conn_id, interval=poll_interval
        )
        self.rest_url = rest_url
        self.driver_id = driver_id
        self.run_key = run_key
        self.stop_timeout = float(stop_timeout)
        self.files = list(files or [])
        self.heartbeat_timeout = float(heartbeat_timeout) if heartbeat_timeout is not None else None
        self.misses = 0
        self._newest: int | None = None
        self._killed: str | None = None
        self._beat: tuple[int, float] | None = None  # the run's last heartbeat seen, and when it changed
        self._released: float | None = None  # when the run's heartbeat, once seen, was first found gone

    def own_kwargs(self) -> dict[str, Any]:
        return {
            "rest_url": self.rest_url,
            "driver_id": self.driver_id,
            "run_key": self.run_key,
            "stop_timeout": self.stop_timeout,
            "files": self.files,
            "heartbeat_timeout": self.heartbeat_timeout,
        }

    def poll_once(self, storage: JobFolder) -> list[dict[str, Any]]:
        try:
            state = StandaloneDriver(self.rest_url, self.driver_id).state()
            self.misses = 0
        except DriverStateUnknown:
            self.misses += 1
            if self.misses > TOLERATED_MISSES:
                # The task fails and may retry: the driver, which may run on, is asked to end first.
                self._stop_driver(storage, 0.0)
                raise
            self.log.warning("the master did not answer for driver %s (%d in a row)", self.driver_id, self.misses)
            return []
        control = ControlChannel(storage)
        if state not in FINAL_STATES:
            try:
                newest = storage.checkpoints.newest_metadata_id()
                # A kill request (StopStreamingJobOperator, for a driver that does not answer): the master kills it.
                request = control.kill_request(self.run_key)
                silent = self._silence(control)
            except Exception:  # a storage hiccup: look again next time; the driver is what this wait follows
                self.log.warning("could not read job %r's storage", self.job_name, exc_info=True)
                return []
            if newest != self._newest:
                self._newest = newest
                self.log.info("driver %s is %s; the job's newest checkpoint is chk-%s", self.driver_id, state, newest)
            if self._killed is None and request is not None:
                reason = str(request.get("reason") or "a kill was requested")
                self._kill(control, reason, f"killed by request: {reason}")
            elif self._killed is None and silent is not None and state == "RUNNING":
                self._kill(control, silent, f"killed by its task's trigger: {silent}")
            return []
        return [
            {
                "status": "ended",
                "driver_state": state,
                "driver_id": self.driver_id,
                "run_key": self.run_key,
                "killed": self._killed,
                "files": self.files,
            }
        ]

    def _silence(self, control: ControlChannel) -> str | None:
        """Why the driver must be killed, when the run has been silent too long; else None. A run not heard
        from yet (its driver still starting) is not judged."""
        if self.heartbeat_timeout is None:
            return None
        beats = [b for b in control.live_runs(stale_after=math.inf) if b.get("run_key") == self.run_key]
        now = time.monotonic()
        if not beats:
            if self._beat is None:
                return None  # not heard from yet: still starting
            # Gone: a run removes its heartbeat as it releases the lease at its end (a frozen or killed run
            # leaves its own behind). Its driver exits then; one that runs on is frozen or cannot exit.
            self._released = self._released or now
            after = now - self._released
            if after <= self.heartbeat_timeout + RELEASED_GRACE_SECONDS:
                return None
            return (
                f"its run released the job {after:.0f} s ago but the driver still runs: its Python process is "
                "frozen or cannot exit"
            )
        newest = max(int(b.get("updated_ms") or 0) for b in beats)
        if self._beat is None or newest != self._beat[0]:
            self._beat = (newest, now)
        self._released = None
        silent = now - self._beat[1]
        if silent <= self.heartbeat_timeout:
            return None
        return (
            f"its heartbeat did not change for {silent:.0f} s (the lease timeout is {self.heartbeat_timeout:g} s): "
            "the job hangs or cannot reach its storage"
        )

    def _kill(self, control: ControlChannel, reason: str, error: str) -> None:
        killed = kill_driver(StandaloneDriver(self.rest_url, self.driver_id))
        if killed is None:  # the master refused or did not answer: the next look asks again
            self.log.warning("could not kill driver %s yet (%s)", self.driver_id, reason)
            return
        self._killed = reason
        self.log.error("killed %s: %s", killed, reason)
        try:
            record_kill(control, self.run_key, error)
        except Exception:  # the task fails it as killed all the same (the event says so)
            self.log.warning("could not write the report of killed run %s", self.run_key, exc_info=True)

    def _stop_driver(self, storage: JobFolder, seconds: float) -> None:
        """Ask the job to stop gracefully, and the master to kill the driver if it still runs ``seconds`` later."""
        StandaloneDriver(self.rest_url, self.driver_id).kill_later(seconds, [Path(path) for path in self.files])
        try:
            ControlChannel(storage).request(stop_request_id(self.run_key), "stop", self.run_key)
        except Exception:
            self.log.warning("could not ask job %r to stop", self.job_name, exc_info=True)

    async def on_kill(self) -> None:
        """The deferred task was marked failed or succeeded, or cleared: ask the job to stop gracefully, and
        the master to kill the driver if it still runs past the stop timeout. Airflow calls this on a person's
        action only, not when the trigger moves to another triggerer."""
        storage = await CheckpointStorageHook.astorage(self.storage_conn_id, self.checkpoint_root, self.job_name)
        await asyncio.to_thread(self._stop_driver, storage, self.stop_timeout + DRIVER_KILL_GRACE_SECONDS)
        self.log.info("asked job %r (driver %s) to stop", self.job_name, self.driver_id)
