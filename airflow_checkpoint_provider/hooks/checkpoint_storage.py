"""Read checkpoint storage from Airflow: jobs, checkpoints, savepoints, the latest valid checkpoint.

Everything goes through the runtime's format module (``spark_checkpoint_runtime.layout``) over fsspec. A
``checkpoint_storage`` connection holds, in fields that all do something:

- Host: the default checkpoint root (a path or fsspec URL), used when a task gives no ``checkpoint_root``;
- Login / Password: the access key and secret (fsspec's ``key`` / ``secret``; the password field is masked);
- Endpoint URL / Region: an S3-compatible store's endpoint and the bucket's region (s3fs's ``client_kwargs``);
- Extra: any other fsspec storage options, e.g. ``{"config_kwargs": {"s3": {"addressing_style": "path"}}}``.

The form's labels, placeholders and fields are declared in ``get_provider_info.py`` (Airflow reads them from
there, with or without the FAB provider).

Airflow's standard cloud connections (``aws``, ``google_cloud_platform``, ``wasb``) work too, as
``storage_conn_id``: their credentials become the storage options (``hooks/storage_options.py``).

Storage options are handed to fsspec and to the runtime's spec file, and never logged or written to
``_metadata`` or XCom.
"""

from __future__ import annotations

import asyncio
from typing import Any

from airflow.sdk import BaseHook
from airflow.sdk.exceptions import AirflowFailException

from airflow_checkpoint_provider.hooks.storage_options import CHECKPOINT_STORAGE, storage_options_from
from spark_checkpoint_runtime.layout import (
    ControlChannel,
    DamagedCheckpoint,
    JobFolder,
    find_completed_checkpoint,
)


class CheckpointStorageHook(BaseHook):
    """Access to checkpoint roots, with storage options from an optional ``checkpoint_storage`` connection.

    :param storage_conn_id: a ``checkpoint_storage`` connection, or a standard cloud connection such as
        ``aws_default``; None for storage that needs none (local paths, or credentials from the environment).
    """

    conn_name_attr = "storage_conn_id"
    default_conn_name = "checkpoint_storage_default"
    conn_type = "checkpoint_storage"
    hook_name = "Checkpoint Storage (fsspec)"

    def __init__(self, storage_conn_id: str | None = None, **kwargs: Any):
        super().__init__(**kwargs)
        self.storage_conn_id = storage_conn_id

    @staticmethod
    def storage_options_of(connection: Any) -> dict[str, Any]:
        """fsspec storage options of a ``checkpoint_storage`` connection or a standard cloud connection.

        See ``storage_options.storage_options_from`` for what each connection type's fields become.
        """
        return storage_options_from(connection)

    def root(self, checkpoint_root: str | None) -> str:
        """``checkpoint_root`` if given, else the ``checkpoint_storage`` connection's Host (its default root)."""
        if checkpoint_root:
            return checkpoint_root
        connection = self.get_connection(self.storage_conn_id) if self.storage_conn_id else None
        if connection is not None and connection.conn_type == CHECKPOINT_STORAGE and connection.host:
            return connection.host
        if connection is None:
            where = "no storage_conn_id"
        elif connection.conn_type != CHECKPOINT_STORAGE:
            where = f"connection {self.storage_conn_id!r} is a {connection.conn_type} connection, which names no root"
        else:
            where = f"connection {self.storage_conn_id!r} has no Host"
        raise AirflowFailException(
            f"no checkpoint root: the task gives no checkpoint_root and {where}; pass checkpoint_root or set the "
            "Host of a checkpoint_storage connection to the default root"
        )

    def test_connection(self) -> tuple[bool, str]:
        """List the default checkpoint root (the connection form's Test button)."""
        try:
            root = self.root(None)
            jobs = self.list_jobs(root)
        except Exception as exc:  # noqa: BLE001 - the form shows whatever went wrong
            return False, f"{type(exc).__name__}: {exc}"
        return True, f"listed {root}: {len(jobs)} job(s)" + (f" ({', '.join(jobs[:5])})" if jobs else "")

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

    @classmethod
    async def astorage(cls, storage_conn_id: str | None, checkpoint_root: str, job_name: str) -> JobFolder:
        """Like ``storage``, for triggers: the connection and the filesystem are set up off the event loop."""
        options = await cls.astorage_options(storage_conn_id)
        return await asyncio.to_thread(JobFolder, checkpoint_root, job_name, options)

    def storage(self, checkpoint_root: str, job_name: str) -> JobFolder:
        """The format module's view of one job under ``checkpoint_root``."""
        return JobFolder(checkpoint_root, job_name, self.storage_options())

    def control(self, checkpoint_root: str, job_name: str) -> ControlChannel:
        """The job's ``_control/`` channel (stop requests, run reports)."""
        return ControlChannel(self.storage(checkpoint_root, job_name))

    def list_jobs(self, checkpoint_root: str) -> list[str]:
        """Job folders under a checkpoint root."""
        return JobFolder(checkpoint_root, "_", self.storage_options()).job_names()

    def list_checkpoints(self, checkpoint_root: str, job_name: str) -> list[dict[str, Any]]:
        """Every completed checkpoint (``_metadata`` parses), oldest first, as summaries."""
        storage = self.storage(checkpoint_root, job_name)
        return [
            {**meta.summary(), "checkpoint_path": storage.url_of(storage.checkpoints.path(meta.id))}
            for meta in storage.checkpoints.completed()
        ]

    def list_savepoints(self, checkpoint_root: str, job_name: str) -> list[dict[str, Any]]:
        """Every readable savepoint, as summaries with their path."""
        storage = self.storage(checkpoint_root, job_name)
        found = []
        for name in storage.savepoints.names():
            try:
                meta = storage.savepoints.read(name)
            except (DamagedCheckpoint, ValueError):
                continue
            found.append({**meta.summary(), "savepoint_path": storage.url_of(storage.savepoints.path(name))})
        return found

    def latest_checkpoint(
        self,
        checkpoint_root: str,
        job_name: str,
        newer_than: int | None = None,
        completed_after_ms: int | None = None,
    ) -> dict[str, Any] | None:
        """The newest valid checkpoint (files all present), or None.

        ``newer_than`` and ``completed_after_ms`` (epoch ms) narrow which one counts.
        """
        return find_completed_checkpoint(self.storage(checkpoint_root, job_name), newer_than, completed_after_ms)

    def read_metadata(self, checkpoint_root: str, job_name: str, checkpoint_id: int) -> dict[str, Any]:
        """A checkpoint's full ``_metadata`` as a dict."""
        import json

        return json.loads(self.storage(checkpoint_root, job_name).checkpoints.read(checkpoint_id).to_json())
