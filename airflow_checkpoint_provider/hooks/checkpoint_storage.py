"""Read checkpoint storage from Airflow: jobs, checkpoints, savepoints, the latest valid checkpoint.

Everything goes through the runtime's format module (``spark_checkpoint_runtime.layout``) over fsspec. Credentials come
from a ``checkpoint_storage`` connection whose extra JSON holds fsspec storage options (for s3fs:
``{"key": "...", "secret": "...", "client_kwargs": {"endpoint_url": "..."}}``). They are handed to
fsspec and to the runtime's spec file, and never logged or written to ``_metadata`` or XCom.
"""

from __future__ import annotations

from typing import Any

from airflow.sdk import BaseHook

from spark_checkpoint_runtime.layout import (
    CheckpointStorage,
    ControlChannel,
    DamagedCheckpoint,
    find_completed_checkpoint,
)


class CheckpointStorageHook(BaseHook):
    """Access to checkpoint roots, with storage options from an optional ``checkpoint_storage`` connection.

    :param storage_conn_id: connection whose extra JSON holds fsspec storage options; None for storage
        that needs none (local paths, or credentials from the environment).
    """

    conn_name_attr = "storage_conn_id"
    default_conn_name = "checkpoint_storage_default"
    conn_type = "checkpoint_storage"
    hook_name = "Checkpoint Storage (fsspec)"

    def __init__(self, storage_conn_id: str | None = None, **kwargs: Any):
        super().__init__(**kwargs)
        self.storage_conn_id = storage_conn_id

    @classmethod
    def get_ui_field_behaviour(cls) -> dict[str, Any]:
        return {
            "hidden_fields": ["schema", "port", "login", "password"],
            "relabeling": {"host": "Default checkpoint root (optional)", "extra": "fsspec storage options (JSON)"},
            "placeholders": {"extra": '{"key": "...", "secret": "...", "client_kwargs": {"endpoint_url": "..."}}'},
        }

    @staticmethod
    def storage_options_of(connection: Any) -> dict[str, Any]:
        """fsspec storage options from a connection's extra JSON."""
        return dict(connection.extra_dejson or {}) if connection is not None else {}

    def storage_options(self) -> dict[str, Any]:
        if not self.storage_conn_id:
            return {}
        return self.storage_options_of(self.get_connection(self.storage_conn_id))

    @classmethod
    async def astorage_options(cls, storage_conn_id: str | None) -> dict[str, Any]:
        """Like ``storage_options``, for triggers (no blocking call in the event loop)."""
        if not storage_conn_id:
            return {}
        return cls.storage_options_of(await cls.aget_connection(storage_conn_id))

    def storage(self, checkpoint_root: str, job_name: str) -> CheckpointStorage:
        """The format module's view of one job under ``checkpoint_root``."""
        return CheckpointStorage(checkpoint_root, job_name, self.storage_options())

    def control(self, checkpoint_root: str, job_name: str) -> ControlChannel:
        """The job's ``_control/`` channel (stop requests, run reports)."""
        return ControlChannel(self.storage(checkpoint_root, job_name))

    def list_jobs(self, checkpoint_root: str) -> list[str]:
        """Job folders under a checkpoint root."""
        return CheckpointStorage(checkpoint_root, "_", self.storage_options()).job_names()

    def list_checkpoints(self, checkpoint_root: str, job_name: str) -> list[dict[str, Any]]:
        """Every completed checkpoint (``_metadata`` parses), oldest first, as summaries."""
        storage = self.storage(checkpoint_root, job_name)
        return [
            {**meta.summary(), "checkpoint_path": storage.url_of(storage.checkpoint_path(meta.id))}
            for meta in storage.completed_checkpoints()
        ]

    def list_savepoints(self, checkpoint_root: str, job_name: str) -> list[dict[str, Any]]:
        """Every readable savepoint, as summaries with their path."""
        storage = self.storage(checkpoint_root, job_name)
        found = []
        for name in storage.savepoint_names():
            try:
                meta = storage.read_savepoint(name)
            except (DamagedCheckpoint, ValueError):
                continue
            found.append({**meta.summary(), "savepoint_path": storage.url_of(storage.savepoint_path(name))})
        return found

    def latest_checkpoint(
        self, checkpoint_root: str, job_name: str, newer_than: int | None = None
    ) -> dict[str, Any] | None:
        """The newest valid checkpoint (files all present), or None."""
        return find_completed_checkpoint(self.storage(checkpoint_root, job_name), newer_than)

    def read_metadata(self, checkpoint_root: str, job_name: str, checkpoint_id: int) -> dict[str, Any]:
        """A checkpoint's full ``_metadata`` as a dict."""
        import json

        return json.loads(self.storage(checkpoint_root, job_name).read_checkpoint(checkpoint_id).to_json())
