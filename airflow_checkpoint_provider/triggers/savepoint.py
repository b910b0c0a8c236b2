"""Deferrable wait for a savepoint's answer in ``_control/responses/`` (storage read in a thread)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

from airflow_checkpoint_provider.durations import Duration, to_seconds
from airflow_checkpoint_provider.hooks.checkpoint_storage import CheckpointStorageHook
from spark_checkpoint_runtime.layout import TERMINAL_STATUSES, ControlChannel


class SavepointTrigger(BaseTrigger):
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
        super().__init__()
        self.job_name = job_name
        self.checkpoint_root = checkpoint_root
        self.trigger_id = trigger_id
        self.timeout = to_seconds(timeout, name="timeout")
        self.storage_conn_id = storage_conn_id
        self.poll_interval = to_seconds(poll_interval, name="poll_interval")
        self.started = started if started is not None else time.time()

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "job_name": self.job_name,
                "checkpoint_root": self.checkpoint_root,
                "trigger_id": self.trigger_id,
                "timeout": self.timeout,
                "storage_conn_id": self.storage_conn_id,
                "poll_interval": self.poll_interval,
                "started": self.started,
            },
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        try:
            storage = await CheckpointStorageHook.astorage(self.storage_conn_id, self.checkpoint_root, self.job_name)
            control = ControlChannel(storage)
            while True:
                answer = await asyncio.to_thread(control.response, self.trigger_id)
                if answer is not None and answer.get("status") in TERMINAL_STATUSES:
                    yield TriggerEvent(answer)
                    return
                if time.time() - self.started > self.timeout:
                    yield TriggerEvent({"status": "timeout", "last_answer": answer})
                    return
                await asyncio.sleep(self.poll_interval)
        except Exception as exc:  # the operator turns this into a clear task failure
            yield TriggerEvent({"status": "error", "reason": f"{type(exc).__name__}: {exc}"})
