"""Deferrable wait for a completed checkpoint: storage is checked in a thread, never in the event loop."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

from airflow_checkpoint_provider.durations import Duration, to_seconds
from airflow_checkpoint_provider.hooks.checkpoint_storage import CheckpointStorageHook
from spark_checkpoint_runtime.layout import find_completed_checkpoint


class CheckpointTrigger(BaseTrigger):
    """Fires once a valid checkpoint of ``job_name`` exists (newer than ``newer_than`` and completed after
    ``completed_after_ms``, epoch milliseconds, where given).

    Yields ``{"status": "success", "checkpoint": {...}}`` or ``{"status": "error", "message": ...}``.
    ``CheckpointSensor(deferrable=True)`` builds it; DAG authors rarely need it directly.

    :param job_name: the job folder under the root.
    :param checkpoint_root: the checkpoint root (a path or fsspec URL).
    :param newer_than: only a checkpoint with a higher id counts.
    :param completed_after_ms: only a checkpoint completed after this moment (epoch milliseconds) counts.
    :param storage_conn_id: a ``checkpoint_storage`` or standard cloud connection, if needed.
    :param poke_interval: time between looks at the job folder (seconds, a ``timedelta`` or e.g. ``"10s"``).
    """

    def __init__(
        self,
        *,
        job_name: str,
        checkpoint_root: str,
        newer_than: int | None = None,
        completed_after_ms: int | None = None,
        storage_conn_id: str | None = None,
        poke_interval: Duration = 5.0,
    ):
        super().__init__()
        self.job_name = job_name
        self.checkpoint_root = checkpoint_root
        self.newer_than = newer_than
        self.completed_after_ms = completed_after_ms
        self.storage_conn_id = storage_conn_id
        self.poke_interval = to_seconds(poke_interval, name="poke_interval")

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "job_name": self.job_name,
                "checkpoint_root": self.checkpoint_root,
                "newer_than": self.newer_than,
                "completed_after_ms": self.completed_after_ms,
                "storage_conn_id": self.storage_conn_id,
                "poke_interval": self.poke_interval,
            },
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        try:
            storage = await CheckpointStorageHook.astorage(self.storage_conn_id, self.checkpoint_root, self.job_name)
            while True:
                found = await asyncio.to_thread(
                    find_completed_checkpoint, storage, self.newer_than, self.completed_after_ms
                )
                if found is not None:
                    yield TriggerEvent({"status": "success", "checkpoint": found})
                    return
                await asyncio.sleep(self.poke_interval)
        except Exception as exc:  # the sensor turns this into a clear task failure
            yield TriggerEvent({"status": "error", "message": f"{type(exc).__name__}: {exc}"})
