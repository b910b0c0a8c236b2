"""Deferrable wait for a savepoint's answer in ``_control/responses/`` (storage read in a thread)."""

from __future__ import annotations

import time
from typing import Any

from airflow_checkpoint_provider.durations import Duration, to_seconds
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
        self.trigger_id = trigger_id
        self.timeout = to_seconds(timeout, name="timeout")
        self.started = started if started is not None else time.time()

    def own_kwargs(self) -> dict[str, Any]:
        return {"trigger_id": self.trigger_id, "timeout": self.timeout, "started": self.started}

    def poll_once(self, storage: JobFolder) -> list[dict[str, Any]]:
        answer = ControlChannel(storage).response(self.trigger_id)
        if answer is not None and answer.get("status") in TERMINAL_STATUSES:
            return [answer]
        if time.time() - self.started > self.timeout:
            return [{"status": "timeout", "last_answer": answer}]
        return []
