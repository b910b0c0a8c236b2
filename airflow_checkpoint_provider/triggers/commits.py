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
``checkpoint_path``. Only checkpoints completed after the trigger started count: after a triggerer restart
it starts from the newest checkpoint then.
"""

from __future__ import annotations

import asyncio
from typing import Any

from airflow.triggers.base import BaseEventTrigger

from airflow_checkpoint_provider.durations import Duration
from airflow_checkpoint_provider.triggers.polling import StoragePollingTrigger
from spark_checkpoint_runtime.layout import DamagedCheckpoint, JobFolder


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
    """

    ends_at_first_event = False

    def __init__(
        self,
        *,
        job_name: str,
        checkpoint_root: str,
        storage_conn_id: str | None = None,
        poke_interval: Duration = 5.0,
    ):
        super().__init__(
            job_name=job_name, checkpoint_root=checkpoint_root, storage_conn_id=storage_conn_id, interval=poke_interval
        )
        self._seen = 0

    async def begin(self, storage: JobFolder) -> None:
        # Commits from now on: the newest completed checkpoint (not one still in progress) is the start.
        self._seen = await asyncio.to_thread(storage.checkpoints.newest_metadata_id) or 0

    def poll_once(self, storage: JobFolder) -> list[dict[str, Any]]:
        commits, self._seen = new_commits(storage, self._seen)
        return commits

    def poll_failed(self, exc: Exception) -> list[dict[str, Any]]:
        # A storage hiccup (throttling, network) must not end the watch and lose its place.
        self.log.exception("could not look for new commits of job %r; trying again", self.job_name)
        return []
