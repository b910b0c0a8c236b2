"""Deferrable wait for a completed checkpoint: storage is checked in a thread, never in the event loop."""

from __future__ import annotations

from typing import Any

from airflow_checkpoint_provider.durations import Duration
from airflow_checkpoint_provider.triggers.polling import StoragePollingTrigger
from spark_checkpoint_runtime.layout import JobFolder, find_completed_checkpoint


class CheckpointTrigger(StoragePollingTrigger):
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
        super().__init__(
            job_name=job_name, checkpoint_root=checkpoint_root, storage_conn_id=storage_conn_id, interval=poke_interval
        )
        self.newer_than = newer_than
        self.completed_after_ms = completed_after_ms

    def own_kwargs(self) -> dict[str, Any]:
        return {"newer_than": self.newer_than, "completed_after_ms": self.completed_after_ms}

    def poll_once(self, storage: JobFolder) -> list[dict[str, Any]]:
        found = find_completed_checkpoint(storage, self.newer_than, self.completed_after_ms)
        return [] if found is None else [{"status": "success", "checkpoint": found}]
