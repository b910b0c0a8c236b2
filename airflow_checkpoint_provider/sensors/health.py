"""Checkpoint health, judged the way the Flink Kubernetes Operator does."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from airflow.sdk import BaseSensorOperator, Context, PokeReturnValue
from airflow.sdk.exceptions import AirflowException

from airflow_checkpoint_provider.durations import Duration, to_seconds
from airflow_checkpoint_provider.hooks.checkpoint_storage import CheckpointStorageHook
from spark_checkpoint_runtime.durations import format_duration


def progress_window(interval: float, timeout: float, tolerable_failures: int) -> float:
    """Seconds within which a healthy job completes a checkpoint: max(interval, timeout) x (tolerable + 2)."""
    return max(interval, timeout) * (tolerable_failures + 2)


class CheckpointHealthSensor(BaseSensorOperator):
    """Fail when a job's checkpoints have stalled; succeed when the latest one is recent enough.

    "Recent enough" is within ``max_age`` if given, else max(interval, timeout) x (tolerable failed
    checkpoints + 2), the Flink Kubernetes Operator's checkpoint-progress window. A stale checkpoint fails
    the task at once (hang restore automation on that); no checkpoint yet keeps poking until the
    sensor's ``timeout``. Returns ``{"healthy", "checkpoint_id", "age_seconds", "window_seconds"}``.

    :param job_name: the job folder (templated).
    :param checkpoint_root: the checkpoint root (templated);
        default: the Host of the ``storage_conn_id`` connection.
    :param checkpoint_interval: the job's checkpoint interval (default ``10s``; templated). Like every duration
        here: seconds, a ``timedelta``, or a string with a unit.
    :param checkpoint_timeout: the job's checkpoint timeout (default ``10min``; templated).
    :param tolerable_failed_checkpoints: the job's ``--tolerable-failed-checkpoints`` (default 0; templated).
    :param max_age: overrides the window, e.g. ``5min`` (templated).
    :param storage_conn_id: ``checkpoint_storage`` connection, if the storage needs credentials.
    """

    template_fields: Sequence[str] = (
        "job_name",
        "checkpoint_root",
        "checkpoint_interval",
        "checkpoint_timeout",
        "tolerable_failed_checkpoints",
        "max_age",
    )
    ui_color = "#f8f0e0"

    def __init__(
        self,
        *,
        job_name: str,
        checkpoint_root: str | None = None,
        checkpoint_interval: Duration = "10s",
        checkpoint_timeout: Duration = "10min",
        tolerable_failed_checkpoints: int = 0,
        max_age: Duration | None = None,
        storage_conn_id: str | None = None,
        **kwargs: Any,
    ):
        super().__init__(**kwargs)
        self.job_name = job_name
        self.checkpoint_root = checkpoint_root
        self.checkpoint_interval = checkpoint_interval
        self.checkpoint_timeout = checkpoint_timeout
        self.tolerable_failed_checkpoints = tolerable_failed_checkpoints
        self.max_age = max_age
        self.storage_conn_id = storage_conn_id

    def window(self) -> float:
        if self.max_age not in (None, "", "None"):
            return to_seconds(self.max_age, name="max_age")
        return progress_window(
            to_seconds(self.checkpoint_interval, name="checkpoint_interval"),
            to_seconds(self.checkpoint_timeout, name="checkpoint_timeout"),
            int(self.tolerable_failed_checkpoints),
        )

    def poke(self, context: Context) -> PokeReturnValue:
        window = self.window()
        hook = CheckpointStorageHook(self.storage_conn_id)
        self.checkpoint_root = hook.root(self.checkpoint_root)
        latest = hook.latest_checkpoint(self.checkpoint_root, self.job_name)
        if latest is None:
            self.log.info("job %r has no completed checkpoint yet", self.job_name)
            return PokeReturnValue(is_done=False)
        age = time.time() - latest["completion_timestamp_ms"] / 1000
        if age > window:
            raise AirflowException(
                f"job {self.job_name!r} is unhealthy: its latest checkpoint chk-{latest['checkpoint_id']} completed "
                f"{format_duration(age)} ago, longer than the {format_duration(window)} progress window; "
                "restore from the latest checkpoint or look at the job's logs"
            )
        return PokeReturnValue(
            is_done=True,
            xcom_value={
                "healthy": True,
                "checkpoint_id": latest["checkpoint_id"],
                "age_seconds": round(age, 3),
                "window_seconds": window,
            },
        )
