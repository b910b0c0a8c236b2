"""Checkpoint health, judged the way the Flink Kubernetes Operator does."""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from airflow.providers.common.compat.sdk import conf
from airflow.sdk import BaseSensorOperator, Context, PokeReturnValue
from airflow.sdk.exceptions import AirflowException, AirflowFailException

from airflow_checkpoint_provider.durations import Duration, sensor_durations, to_seconds
from airflow_checkpoint_provider.failures import definitive_arguments
from airflow_checkpoint_provider.hooks.checkpoint_storage import CheckpointStorageHook
from airflow_checkpoint_provider.sensors.checkpoint import parse_instant_ms
from airflow_checkpoint_provider.triggers.health import RunningJobHealthTrigger, judge_running_job
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
        super().__init__(**sensor_durations(kwargs))
        self.job_name = job_name
        self.checkpoint_root = checkpoint_root
        self.checkpoint_interval = checkpoint_interval
        self.checkpoint_timeout = checkpoint_timeout
        self.tolerable_failed_checkpoints = tolerable_failed_checkpoints
        self.max_age = max_age
        self.storage_conn_id = storage_conn_id

    def window(self) -> float:
        """The progress window in seconds; arguments that do not parse are definitive (no retry is spent)."""
        with definitive_arguments(f"health of job {self.job_name!r}"):
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


class RunningJobHealthSensor(CheckpointHealthSensor):
    """Watch a job while it runs, beside its task: fail as soon as its checkpoints stall, succeed when it ends.

    Put it next to a continuous ``CheckpointedStreamingJobOperator`` (no dependency between the two) and hang
    ``StopStreamingJobOperator`` and a restore on its failure. It watches the run that takes the job's lease
    after ``started_after`` (``"{{ dag_run.start_date }}"``): progress is that run's newest checkpoint, or its
    start before the first one, and no progress for longer than the window (``max_age``, or the Flink
    Kubernetes Operator's rule, as ``CheckpointHealthSensor``) fails the task. A run that lets go of the job,
    reports its end or is taken over ends the watch successfully. With ``deferrable=True`` the watch waits in
    the triggerer, holding no worker slot for the job's whole life (the example DAG does so). Returns
    ``{"status": "ended", "run_id", "run_key", "epoch", "run_status", ...}`` (``run_status``: how the run
    ended, e.g. ``finished``).

    :param started_after: only a run that took the job after this moment counts (templated; a datetime or
        ISO-8601 string).
    :param start_timeout: how long to wait for that run to take the job (default ``10min``; templated).
    :param deferrable: wait in the triggerer instead of a worker slot (default: Airflow's
        ``[operators] default_deferrable``, as every deferrable operator here).
    """

    template_fields: Sequence[str] = (*CheckpointHealthSensor.template_fields, "started_after", "start_timeout")

    def __init__(
        self,
        *,
        started_after: datetime | str,
        start_timeout: Duration = "10min",
        deferrable: bool = conf.getboolean("operators", "default_deferrable", fallback=False),
        **kwargs: Any,
    ):
        super().__init__(**kwargs)
        self.started_after = started_after
        self.start_timeout = start_timeout
        self.deferrable = deferrable
        self._epoch: int | None = None

    def _started_after_ms(self) -> int:
        started = parse_instant_ms(self.started_after, "started_after")
        if started is None:
            raise AirflowFailException("started_after is required, e.g. '{{ dag_run.start_date }}'")
        return started

    def poke(self, context: Context) -> PokeReturnValue:
        hook = CheckpointStorageHook(self.storage_conn_id)
        self.checkpoint_root = hook.root(self.checkpoint_root)
        storage = hook.storage(self.checkpoint_root, self.job_name)
        with definitive_arguments(f"health of job {self.job_name!r}"):
            start_timeout = to_seconds(self.start_timeout, name="start_timeout")
        health = judge_running_job(
            storage, self._started_after_ms(), self.window(), time.time(), self._epoch, start_timeout
        )
        self._epoch = health.details.get("epoch", self._epoch)  # later runs are not the one watched
        self.log.info("%s", health.message)
        if health.state in ("stalled", "not_started"):
            raise AirflowException(health.message)
        done = health.state == "ended"
        return PokeReturnValue(is_done=done, xcom_value={**health.details, "status": health.state} if done else None)

    def execute(self, context: Context) -> Any:
        if not self.deferrable:
            return super().execute(context)
        first = self.poke(context)
        if first.is_done:
            return first.xcom_value
        self.defer(
            trigger=RunningJobHealthTrigger(
                job_name=self.job_name,
                checkpoint_root=self.checkpoint_root,
                started_after_ms=self._started_after_ms(),
                window_s=self.window(),
                start_timeout_s=to_seconds(self.start_timeout, name="start_timeout"),
                epoch=self._epoch,
                storage_conn_id=self.storage_conn_id,
                poke_interval=self.poke_interval,
            ),
            method_name="execute_complete",
            timeout=timedelta(seconds=self.timeout),
        )

    def execute_complete(self, context: Context, event: dict[str, Any]) -> Any:
        if event.get("status") in ("stalled", "not_started"):
            raise AirflowException(event["message"])
        if event.get("status") != "ended":
            raise AirflowException(f"watching job {self.job_name!r} failed: {event.get('message')}")
        self.log.info("%s", event["message"])
        return event
