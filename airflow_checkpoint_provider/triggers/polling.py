"""The one loop of every trigger here: look at a job's checkpoint storage every interval, in a thread."""

from __future__ import annotations

import asyncio
from abc import abstractmethod
from collections.abc import AsyncIterator
from typing import Any, ClassVar

from airflow.triggers.base import BaseTrigger, TriggerEvent

from airflow_checkpoint_provider.durations import Duration, to_seconds
from airflow_checkpoint_provider.hooks.checkpoint_storage import CheckpointStorageHook
from spark_checkpoint_runtime.layout import JobFolder


class StoragePollingTrigger(BaseTrigger):
    """Base of the triggers that watch one job's folder: each look at storage runs in a thread
    (``poll_once``), never in the event loop, and the watch sleeps the interval between looks.

    A subclass keeps only what it decides: its own arguments (``own_kwargs``), what a look finds
    (``poll_once``), if it needs one a start (``begin``), and whether a failed look is ridden out
    (``poll_failed``). Its keyword for the interval is ``interval_kwarg``; the seconds are kept under that
    name too.

    By default the first look that finds something ends the watch (a deferred task's wait), and any failure
    ends it with ``{"status": "error", <error_key>: "<type>: <message>"}`` for the task to fail clearly on.
    With ``ends_at_first_event`` False it watches on (an Asset watcher), and a failure raises: such a
    subclass overrides ``poll_failed`` to ride out a failed look.

    :param job_name: the job folder under the root.
    :param checkpoint_root: the checkpoint root (a path or fsspec URL).
    :param storage_conn_id: a ``checkpoint_storage`` or standard cloud connection, if needed.
    :param interval: time between looks (seconds, a ``timedelta`` or e.g. ``"10s"``).
    """

    #: the keyword the interval is passed, kept and serialized under
    interval_kwarg: ClassVar[str] = "poke_interval"
    #: whether the first look that finds something ends the watch, a failure with an error event
    ends_at_first_event: ClassVar[bool] = True
    #: the key of the failure's description in the error event
    error_key: ClassVar[str] = "message"

    def __init__(self, *, job_name: str, checkpoint_root: str, storage_conn_id: str | None, interval: Duration):
        super().__init__()
        self.job_name = job_name
        self.checkpoint_root = checkpoint_root
        self.storage_conn_id = storage_conn_id
        setattr(self, self.interval_kwarg, to_seconds(interval, name=self.interval_kwarg))

    @property
    def interval(self) -> float:
        """Seconds between looks."""
        return getattr(self, self.interval_kwarg)

    def own_kwargs(self) -> dict[str, Any]:
        """The subclass's own arguments, as serialized (between the root and the connection)."""
        return {}

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "job_name": self.job_name,
                "checkpoint_root": self.checkpoint_root,
                **self.own_kwargs(),
                "storage_conn_id": self.storage_conn_id,
                self.interval_kwarg: self.interval,
            },
        )

    async def begin(self, storage: JobFolder) -> None:
        """Runs once before the first look, in the event loop (read storage with ``asyncio.to_thread``)."""

    @abstractmethod
    def poll_once(self, storage: JobFolder) -> list[dict[str, Any]]:
        """One look at storage, in a thread: the payloads of the events to yield (none: look again later)."""

    def poll_failed(self, exc: Exception) -> list[dict[str, Any]]:
        """What a look that raised yields instead (called in the event loop, within the ``except``); by default
        the failure goes on to end the watch."""
        raise exc

    async def run(self) -> AsyncIterator[TriggerEvent]:
        try:
            storage = await CheckpointStorageHook.astorage(self.storage_conn_id, self.checkpoint_root, self.job_name)
            await self.begin(storage)
            while True:
                try:
                    payloads = await asyncio.to_thread(self.poll_once, storage)
                except Exception as exc:
                    payloads = self.poll_failed(exc)
                for payload in payloads:
                    yield TriggerEvent(payload)
                if payloads and self.ends_at_first_event:
                    return
                await asyncio.sleep(self.interval)
        except Exception as exc:
            if not self.ends_at_first_event:
                raise
            # The sensor or operator turns this into a clear task failure.
            yield TriggerEvent({"status": "error", self.error_key: f"{type(exc).__name__}: {exc}"})
