"""Stop the run that holds a job: a stop request first, a kill when the driver does not answer."""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from airflow.sdk import BaseOperator, Context
from airflow.sdk.exceptions import AirflowException, AirflowFailException

from airflow_checkpoint_provider.durations import Duration, to_seconds
from airflow_checkpoint_provider.failures import definitive_arguments
from airflow_checkpoint_provider.hooks.checkpoint_storage import CheckpointStorageHook
from airflow_checkpoint_provider.hooks.kill_watch import KILL_POLL_SECONDS, stop_request_id
from airflow_checkpoint_provider.sensors.checkpoint import parse_instant_ms
from airflow_checkpoint_provider.triggers.health import how_run_ended
from spark_checkpoint_runtime.durations import format_duration
from spark_checkpoint_runtime.layout import ControlChannel, LeaseFiles


class StopStreamingJobOperator(BaseOperator):
    """Stop whichever run holds a job: gracefully if it answers, by a kill if it does not.

    Hang it on a failed health watch (``trigger_rule=ONE_FAILED``) to end a stalled job before restoring it:

    1. It writes a stop request for the run that holds the job's lease; a live driver finishes its batch,
       checkpoints, commits and ends within ``stop_timeout``.
    2. A driver that does not end in time (frozen, hung) gets a kill request: the Airflow task that submitted
       it (``CheckpointedStreamingJobOperator``, wherever it runs) kills spark-submit with every process under
       it and fails, which is what a restore downstream waits for.
    3. Nobody confirming the kill within ``kill_timeout`` fails this task: the submitting task is gone (its
       worker was lost). A restore still works: it takes the job over once the lease has been silent for the
       lease timeout, which fences the old run off.

    Returns ``{"run_key", "run_id", "outcome"}`` with ``outcome`` one of ``not_running``, ``stopped``,
    ``killed``.

    :param job_name: the job (templated).
    :param checkpoint_root: its checkpoint root (templated); default: the Host of the ``storage_conn_id``
        connection.
    :param reason: why it is stopped, for the logs and the killed run's report (templated).
    :param started_after: stop only a run that took the job at or after this moment (templated; a datetime or
        ISO-8601 string, e.g. ``"{{ dag_run.start_date }}"``): a run from before (another DAG's, or one this
        DAG run's job task found holding the job) is left alone and the outcome is ``not_running``.
    :param stop_timeout: how long the run may take to stop once asked (templated).
    :param kill_timeout: how long to wait for the kill to be confirmed (templated; default: the job operator's
        kill poll interval plus a minute).
    :param storage_conn_id: ``checkpoint_storage`` connection, if the storage needs credentials.
    :param poll_interval: time between looks at whether the run ended (seconds, a ``timedelta`` or e.g.
        ``"2s"``).
    """

    template_fields: Sequence[str] = (
        "job_name",
        "checkpoint_root",
        "reason",
        "started_after",
        "stop_timeout",
        "kill_timeout",
        "poll_interval",
    )
    ui_color = "#f8e4e4"

    def __init__(
        self,
        *,
        job_name: str,
        checkpoint_root: str | None = None,
        reason: str = "stopped by {{ ti.dag_id }}.{{ ti.task_id }}",
        started_after: datetime | str | None = None,
        stop_timeout: Duration = "2min",
        kill_timeout: Duration = KILL_POLL_SECONDS + 60,
        storage_conn_id: str | None = None,
        poll_interval: Duration = 2.0,
        **kwargs: Any,
    ):
        super().__init__(**kwargs)
        self.job_name = job_name
        self.checkpoint_root = checkpoint_root
        self.reason = reason
        self.started_after = started_after
        self.stop_timeout = stop_timeout
        self.kill_timeout = kill_timeout
        self.storage_conn_id = storage_conn_id
        self.poll_interval = poll_interval

    def execute(self, context: Context) -> dict[str, Any]:
        with definitive_arguments(f"stopping job {self.job_name!r}"):
            stop_timeout = to_seconds(self.stop_timeout, name="stop_timeout")
            kill_timeout = to_seconds(self.kill_timeout, name="kill_timeout")
            poll_interval = to_seconds(self.poll_interval, name="poll_interval")
            since = parse_instant_ms(self.started_after, "started_after")
        hook = CheckpointStorageHook(self.storage_conn_id)
        storage = hook.storage(hook.root(self.checkpoint_root), self.job_name)
        control, lease = ControlChannel(storage), LeaseFiles(storage)
        holder = lease.unreleased_grant()
        if holder is None:
            self.log.info("no run holds job %r: nothing to stop", self.job_name)
            return {"run_key": None, "run_id": None, "outcome": "not_running"}
        run_key, run_id, epoch = holder.get("run_key"), holder.get("run_id"), holder["epoch"]
        result = {"run_key": run_key, "run_id": run_id}
        if since is not None and int(holder.get("acquired_ms", 0)) < since:
            self.log.info(
                "run %s holds job %r since before %s: not the run to stop, left alone",
                run_id,
                self.job_name,
                self.started_after,
            )
            return {"run_key": None, "run_id": None, "outcome": "not_running"}

        def ended() -> bool:
            return how_run_ended(storage, lease.listing(), epoch, run_key) is not None

        if ended():
            return {**result, "outcome": "stopped"}
        where = f"run {run_id} (lease epoch {epoch}, host {holder.get('host', '?')}, pid {holder.get('pid', '?')})"
        self.log.info("asking %s of job %r to stop: %s", where, self.job_name, self.reason)
        control.request(stop_request_id(run_key or run_id), "stop", run_key)
        if self._wait(ended, stop_timeout, poll_interval):
            self.log.info("%s stopped", where)
            return {**result, "outcome": "stopped"}
        if not run_key:  # definitive: no retry can kill it either
            raise AirflowFailException(
                f"{where} of job {self.job_name!r} did not stop within {format_duration(stop_timeout)}, and it was "
                "not started by Airflow (no run key), so no task can kill it: kill its driver by hand"
            )
        self.log.warning("%s did not stop within %s; asking its task to kill it", where, format_duration(stop_timeout))
        control.request_kill(
            run_key, f"{self.reason}; it did not answer a stop request within {format_duration(stop_timeout)}"
        )
        if self._wait(lambda: control.run_report(run_key) is not None, kill_timeout, poll_interval):
            report = control.run_report(run_key) or {}
            outcome = "killed" if report.get("status") == "killed" else "stopped"
            self.log.info("%s %s", where, outcome)
            return {**result, "outcome": outcome}
        raise AirflowException(
            f"{where} of job {self.job_name!r} did not stop within {format_duration(stop_timeout)}, and no task "
            f"confirmed killing it within {format_duration(kill_timeout)}: the task that submitted it is gone (a "
            "lost worker). A restore takes the job over once its lease has been silent for the lease timeout, "
            "which fences the old run off; kill its driver by hand if it still runs"
        )

    def _wait(self, done: Any, timeout: float, poll_interval: float) -> bool:
        deadline = time.monotonic() + timeout
        while True:
            if done():
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(min(poll_interval, max(0.0, deadline - time.monotonic())))
