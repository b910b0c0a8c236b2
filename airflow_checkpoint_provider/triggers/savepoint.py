"""Deferrable wait for a savepoint's answer in ``_control/responses/`` (storage read in a thread)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from airflow_checkpoint_provider.durations import Duration, to_seconds
from airflow_checkpoint_provider.hooks.checkpoint_storage import CheckpointStorageHook
from airflow_checkpoint_provider.triggers.polling import StoragePollingTrigger
from spark_checkpoint_runtime.layout import TERMINAL_STATUSES, ControlChannel, JobFolder


class SavepointTrigger(StoragePollingTrigger):
    """Fires when the job answers savepoint request ``trigger_id``, or after ``timeout`` seconds.

    Yields the job's answer (``status`` completed, failed, rejected or expired) or ``{"status": "timeout"}``.
    ``SavepointOperator(deferrable=True)`` builds it; DAG authors rarely need it directly.

    :param job_name: the job folder under the root.
    :param checkpoint_root: the checkpoint root (a path or fsspec URL).
    :param trigger_id: the savepoint request to wait for (written to the job's ``_control/`` before).
    :param timeout: how long to wait for the answer, from ``started`` (seconds, a ``timedelta`` or e.g.
        ``"5min"``).
    :param storage_conn_id: a ``checkpoint_storage`` or standard cloud connection, if needed.
    :param poll_interval: time between looks for the answer (seconds, a ``timedelta`` or e.g. ``"2s"``).
    :param started: when the request was made (epoch seconds; default: now), so that a trigger rebuilt after
        a triggerer restart keeps the original deadline.
    """

    interval_kwarg = "poll_interval"
    error_key = "reason"

    def __init__(
        self,
        *,
        job_name: str,
        checkpoint_root: str,
        trigger_id: str,
        timeout: Duration,
        storage_conn_id: str | None = None,
        poll_interval: Duration = 2.0,
        started: float | None = None,
    ):
        super().__init__(
            job_name=job_name, checkpoint_root=checkpoint_root, storage_conn_id=storage_conn_id, interval=poll_interval
        )
        # Not self.trigger_id: the triggerer sets that attribute to the trigger's row id in its database.
        self.request_id = trigger_id
        self.timeout = to_seconds(timeout, name="timeout")
        self.started = started if started is not None else time.time()

    def own_kwargs(self) -> dict[str, Any]:
        return {"trigger_id": self.request_id, "timeout": self.timeout, "started": self.started}

    def poll_once(self, storage: JobFolder) -> list[dict[str, Any]]:
        answer = ControlChannel(storage).response(self.request_id)
        if answer is not None and answer.get("status") in TERMINAL_STATUSES:
            return [answer]
        if time.time() - self.started > self.timeout:
            return [{"status": "timeout", "last_answer": answer}]
        return []

    async def on_kill(self) -> None:
        """The deferred task was marked failed or succeeded, or cleared: nobody will read the answer, so the
        request is withdrawn (unless the job already took it on). Airflow calls this on a person's action
        only, not when the trigger moves to another triggerer or its triggerer restarts, where the task still
        waits."""
        storage = await CheckpointStorageHook.astorage(self.storage_conn_id, self.checkpoint_root, self.job_name)
        if await asyncio.to_thread(ControlChannel(storage).withdraw, self.request_id):
            self.log.info("withdrew savepoint request %s of job %r", self.request_id, self.job_name)
        else:
            self.log.info("savepoint request %s of job %r was already taken on", self.request_id, self.job_name)
