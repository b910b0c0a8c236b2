"""Event-driven scheduling on each commit of a running job: an Asset watcher trigger.

The job operator's own Asset event comes when its task ends, which for a continuous run is once, at the
end. For a DAG that should run after every commit of a long-running job, watch the output Asset::

    from airflow.sdk import DAG, Asset, AssetWatcher
    from airflow_checkpoint_provider.triggers.commits import CheckpointCommitTrigger

    commits = CheckpointCommitTrigger(job_name="orders", checkpoint_root="s3://bucket/ck")
    orders = Asset("s3://bucket/orders", watchers=[AssetWatcher(name="orders-commits", trigger=commits)])
    with DAG("after_each_commit", schedule=[orders], ...): ...

The triggerer runs it; each checkpoint whose completion published sink output becomes one Asset event,
its extra's ``payload`` carrying ``job_name``, ``checkpoint_id``, ``batch_id``, ``batches`` and
``checkpoint_path``.

Where it resumes: a *cursor* in the job's ``_control/cursors/<cursor>.json`` records the newest commit whose
event Airflow has stored. The trigger runs in the triggerer's ack mode (a shared stream with a producer,
Airflow 3.3): the cursor moves only after the triggerer has confirmed the event is in Airflow's database. A
triggerer restart, or a move to another triggerer, resumes after the cursor: commits made while no triggerer
ran arrive then, and none the cursor had passed arrives twice. A triggerer that stops or dies in the second
between storing an event and moving the cursor (the confirmation comes on its next sync) sends that event
again on restart, and a stream restarted after a confirmation timed out sends again what followed the cursor:
a consumer that must act once per commit keys its work on ``job_name`` and ``checkpoint_id``. The first watch
of a job starts at its newest completed checkpoint. Two Airflow deployments watching one job each give their
own ``cursor`` name; ``cursor=None`` keeps no cursor (each start begins at the newest checkpoint, and nothing
is written to the job folder). Airflow before 3.3 has no ack mode: there the watch keeps no cursor either.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Hashable, Sequence
from typing import Any

from airflow.triggers.base import BaseEventTrigger, TriggerEvent

try:  # Airflow 3.3: the triggerer's ack mode, which moves the cursor only once events are stored
    from airflow.triggers.shared_stream import AdvanceItem, SharedStreamProducer

    ACK_MODE = True
except ImportError:  # Airflow before 3.3: the plain loop, which keeps no cursor
    AdvanceItem = Any  # type: ignore[assignment,misc]
    SharedStreamProducer = object  # type: ignore[assignment,misc]
    ACK_MODE = False

from airflow_checkpoint_provider.durations import Duration
from airflow_checkpoint_provider.triggers.polling import StoragePollingTrigger
from spark_checkpoint_runtime.layout import ControlChannel, DamagedCheckpoint, JobFolder, validate_key

#: the cursor a watcher keeps unless told otherwise
DEFAULT_CURSOR = "airflow"


def new_commits(storage: JobFolder, after: int) -> tuple[list[dict[str, Any]], int]:
    """Checkpoints newer than ``after`` that published output, oldest first, and the id to continue after.

    A folder without ``_metadata`` is in progress only while no later checkpoint completed (the runtime takes
    one checkpoint at a time): the scan stops there and looks again next time. One followed by a completed
    checkpoint was abandoned (a crashed run) and is passed over, so it never holds back later commits.
    """
    ids = [i for i in storage.checkpoints.ids() if i > after]
    read: dict[int, Any] = {}
    for checkpoint_id in ids:
        try:
            read[checkpoint_id] = storage.checkpoints.read(checkpoint_id)
        except DamagedCheckpoint as exc:
            read[checkpoint_id] = None if exc.reason.startswith("no _metadata") else exc
    completed = [i for i in ids if read[i] is not None]
    commits, seen = [], after
    for checkpoint_id in ids:
        meta = read[checkpoint_id]
        if meta is None and not any(i > checkpoint_id for i in completed):
            break  # in progress: the next look picks it up
        seen = checkpoint_id
        if meta is None or isinstance(meta, DamagedCheckpoint) or meta.staged is None:
            continue  # abandoned, damaged for good, or published nothing
        commits.append(
            {
                "job_name": storage.job_name,
                "checkpoint_id": meta.id,
                "batch_id": meta.batch_id,
                "batches": list(meta.staged.batches),
                "checkpoint_path": storage.url_of(storage.checkpoints.path(meta.id)),
            }
        )
    return commits, seen


class CheckpointCommitTrigger(StoragePollingTrigger, BaseEventTrigger):
    """Yields one event per checkpoint of ``job_name`` that committed sink output (for ``AssetWatcher``).

    :param job_name: the job folder under the root.
    :param checkpoint_root: the checkpoint root (a path or fsspec URL).
    :param storage_conn_id: a ``checkpoint_storage`` or standard cloud connection, if needed.
    :param poke_interval: time between looks at the job folder (seconds, a ``timedelta`` or e.g. ``"10s"``).
    :param cursor: the name of the cursor that keeps the watch's place across triggerer restarts (letters,
        digits, ``.``, ``_``, ``-``); give each Airflow deployment that watches the same job its own. ``None``
        keeps no cursor: each start of the trigger begins at the newest checkpoint.
    """

    ends_at_first_event = False

    def __init__(
        self,
        *,
        job_name: str,
        checkpoint_root: str,
        storage_conn_id: str | None = None,
        poke_interval: Duration = 5.0,
        cursor: str | None = DEFAULT_CURSOR,
    ):
        super().__init__(
            job_name=job_name, checkpoint_root=checkpoint_root, storage_conn_id=storage_conn_id, interval=poke_interval
        )
        self.cursor = None if cursor is None else validate_key(cursor, "cursor")
        self._seen = 0
        self._control: ControlChannel | None = None
        self._keeps_cursor = False  # set by ``CommitStream``: in ack mode the cursor moves with stored events

    def own_kwargs(self) -> dict[str, Any]:
        # The default is left out so that a watcher declared before cursors existed keeps its identity (the
        # scheduler tells watchers apart by a hash of these kwargs).
        return {} if self.cursor == DEFAULT_CURSOR else {"cursor": self.cursor}

    async def begin(self, storage: JobFolder) -> None:
        self._seen = await asyncio.to_thread(_start_after, storage, self.cursor)
        self._control = ControlChannel(storage)
        if self._keeps_cursor:
            # Keep the start: a restart before the first commit then delivers that commit rather than skip it.
            await asyncio.to_thread(self._control.commit_cursor, self.cursor, self._seen)

    def poll_once(self, storage: JobFolder) -> list[dict[str, Any]]:
        commits, self._seen = new_commits(storage, self._seen)
        return commits

    def poll_failed(self, exc: Exception) -> list[dict[str, Any]]:
        # A storage hiccup (throttling, network) must not end the watch and lose its place.
        self.log.exception("could not look for new commits of job %r; trying again", self.job_name)
        return []

    # --- the triggerer's ack mode: the cursor moves once Airflow has stored the event ----------------------

    def shared_stream_key(self) -> Hashable | None:
        """Watchers of one job with one cursor share one look at storage (and one cursor)."""
        if self.cursor is None or not ACK_MODE:
            return None  # no cursor to keep, or an Airflow before 3.3: the plain loop in ``run``
        return (type(self).__qualname__, self.checkpoint_root, self.job_name, self.storage_conn_id, self.cursor)

    @classmethod
    def create_shared_stream_producer(cls, kwargs: dict[str, Any]) -> SharedStreamProducer:
        return CommitStream(cls(**kwargs))

    async def filter_shared_stream(self, shared_stream: AsyncIterator[Any]) -> AsyncIterator[TriggerEvent]:
        async for commit in shared_stream:
            yield TriggerEvent(commit)


def _start_after(storage: JobFolder, cursor: str | None) -> int:
    """The checkpoint id a watch delivers commits after: its cursor's, else the newest completed checkpoint
    (not one still in progress)."""
    committed = ControlChannel(storage).cursor(cursor) if cursor is not None else None
    if committed is not None:
        return committed
    return storage.checkpoints.newest_metadata_id() or 0


class CommitStream(SharedStreamProducer):
    """The commits of one job for the triggerer's ack mode: the watch's own loop, each commit yielded with its
    checkpoint id, and the cursor moved when Airflow has stored the events of a batch of them."""

    def __init__(self, watch: CheckpointCommitTrigger):
        self.watch = watch
        watch._keeps_cursor = True

    async def open_stream(self) -> AsyncIterator[tuple[dict[str, Any], int]]:
        async for event in self.watch.run():
            yield event.payload, event.payload["checkpoint_id"]

    async def advance(self, batch: Sequence[AdvanceItem]) -> None:
        """Move the cursor past the batch's commits that every watcher stored; a commit a watcher failed to
        store (Airflow's ack timeout) stops the stream, which starts again from the cursor and sends it again."""
        stored = None
        for item in batch:
            if item.outcome.failed:
                if stored is not None:
                    await self._commit(stored)
                raise RuntimeError(
                    f"the event of checkpoint {item.broker_payload} of job {self.watch.job_name!r} was not stored; "
                    f"the watch starts again from its cursor and sends it again"
                )
            stored = item.broker_payload
        if stored is not None:
            await self._commit(stored)

    async def _commit(self, checkpoint_id: int) -> None:
        await asyncio.to_thread(self.watch._control.commit_cursor, self.watch.cursor, checkpoint_id)
