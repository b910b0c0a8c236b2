"""Take a savepoint of a running job, optionally stopping it (stop-with-savepoint)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from airflow.providers.common.compat.sdk import conf
from airflow.sdk import BaseOperator, Context
from airflow.sdk.exceptions import AirflowException, AirflowFailException

from airflow_checkpoint_provider.durations import Duration, to_seconds
from airflow_checkpoint_provider.failures import definitive_arguments
from airflow_checkpoint_provider.hooks.checkpoint_storage import CheckpointStorageHook
from airflow_checkpoint_provider.operators.task_keys import task_instance_name
from airflow_checkpoint_provider.triggers.savepoint import SavepointTrigger
from spark_checkpoint_runtime.layout import TERMINAL_STATUSES, ControlChannel, key_from


class SavepointOperator(BaseOperator):
    """Ask the running job for a savepoint through ``_control/`` and wait for it (deferrable by default).

    Each try asks anew: the trigger id is derived from the DAG run, the task, its map index and its try
    number, so a retry after a failed or timed-out savepoint takes a new one rather than reading the old
    answer. A request nobody waits for any more (the task timed out, or was killed while it waited in the
    worker) is withdrawn, so a job that was slow to look does not take it, or stop for it, later.

    Failures are split the way retries need. Definitive, raised as ``AirflowFailException`` (no retry is
    spent): no job of that name has ever written to the root, an argument that is not valid, a target
    directory the job refuses. Transient, raised as ``AirflowException`` (a retry may succeed): no run of the
    job is alive right now, the savepoint failed or expired in the job, or it did not complete in ``timeout``.
    Returns the savepoint's path to XCom (and pushes ``savepoint_id`` and ``batch_id``).

    :param job_name: the running job (templated).
    :param checkpoint_root: its checkpoint root (templated);
        default: the Host of the ``storage_conn_id`` connection.
    :param stop: stop the job after the savepoint (finish the batch, savepoint, commit, exit 0) (templated).
    :param target_directory: where the savepoint goes; default ``<root>/<job>/savepoints/`` (templated).
    :param timeout: how long to wait: seconds, a ``timedelta`` or e.g. ``"5min"`` (templated).
    :param storage_conn_id: ``checkpoint_storage`` connection, if the storage needs credentials.
    :param deferrable: wait in the triggerer instead of holding a worker slot (default: Airflow's
        ``[operators] default_deferrable``).
    :param poll_interval: time between looks for the answer when not deferred (seconds, a ``timedelta`` or
        e.g. ``"2s"``; templated).
    """

    template_fields: Sequence[str] = (
        "job_name",
        "checkpoint_root",
        "stop",
        "target_directory",
        "timeout",
        "poll_interval",
    )
    ui_color = "#efe4f4"

    def __init__(
        self,
        *,
        job_name: str,
        checkpoint_root: str | None = None,
        stop: bool | str = False,
        target_directory: str | None = None,
        timeout: Duration = "5min",
        storage_conn_id: str | None = None,
        deferrable: bool = conf.getboolean("operators", "default_deferrable", fallback=False),
        poll_interval: Duration = 2.0,
        **kwargs: Any,
    ):
        super().__init__(**kwargs)
        self.job_name = job_name
        self.checkpoint_root = checkpoint_root
        self.stop = stop
        self.target_directory = target_directory
        self.timeout = timeout
        self.storage_conn_id = storage_conn_id
        self.deferrable = deferrable
        self.poll_interval = poll_interval
        self._waiting: tuple[ControlChannel, str] | None = None  # the request a non-deferred wait is for

    def trigger_id(self, context: Context) -> str:
        """The request's id: one per try of each task instance (mapped tasks and retries ask anew)."""
        return key_from(f"{task_instance_name(context)}.try{context['ti'].try_number}")

    def execute(self, context: Context) -> str:
        hook = CheckpointStorageHook(self.storage_conn_id)
        with definitive_arguments(f"savepoint of job {self.job_name!r}"):  # a bad job name too
            timeout = to_seconds(self.timeout, name="timeout")
            poll_interval = to_seconds(self.poll_interval, name="poll_interval")
            stop = _as_bool(self.stop, name="stop")
            self.checkpoint_root = hook.root(self.checkpoint_root)
            control = hook.control(self.checkpoint_root, self.job_name)
        trigger_id = self.trigger_id(context)
        try:
            answer = control.request_savepoint(trigger_id, stop=stop, target_directory=self.target_directory or None)
        except LookupError as exc:
            if not control.storage.fs.exists(control.storage.job_path):
                raise AirflowFailException(
                    f"there is no job {self.job_name!r} under {control.storage.root_url}: nothing has run there; "
                    "check job_name and checkpoint_root"
                ) from None
            raise AirflowException(str(exc)) from None
        self.log.info("savepoint %s of job %r requested (stop=%s)", trigger_id, self.job_name, stop)
        if answer is not None and answer.get("status") in TERMINAL_STATUSES:
            return self.execute_complete(context, answer)
        if self.deferrable:
            self.defer(
                trigger=SavepointTrigger(
                    job_name=self.job_name,
                    checkpoint_root=self.checkpoint_root,
                    trigger_id=trigger_id,
                    timeout=timeout,
                    storage_conn_id=self.storage_conn_id,
                    poll_interval=poll_interval,
                ),
                method_name="execute_complete",
                timeout=timedelta(seconds=timeout + 60),  # the trigger reports its own timeout first
            )
        self._waiting = (control, trigger_id)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            answer = control.response(trigger_id)
            if answer is not None and answer.get("status") in TERMINAL_STATUSES:
                self._waiting = None
                return self.execute_complete(context, answer)
            time.sleep(poll_interval)
        self._waiting = None
        return self.execute_complete(context, {"status": "timeout"})

    def on_kill(self) -> None:
        """Withdraw the request this task waits for in the worker: nobody would read the answer."""
        if self._waiting is not None:
            control, trigger_id = self._waiting
            if control.withdraw(trigger_id):
                self.log.info("withdrew savepoint request %s of job %r", trigger_id, self.job_name)

    def execute_complete(self, context: Context, event: dict[str, Any]) -> str:
        status = event.get("status")
        if status == "timeout":
            hook = CheckpointStorageHook(self.storage_conn_id)  # after a deferral this is a new instance
            control = hook.control(hook.root(self.checkpoint_root), self.job_name)
            if control.withdraw(self.trigger_id(context)):
                outcome = "the job never took the request on, and it is withdrawn"
            else:
                outcome = "the job took the request on and may still finish it (see _control/responses/)"
            raise AirflowException(
                f"savepoint of job {self.job_name!r} did not complete within {self.timeout}: {outcome}; a retry "
                "asks for a new savepoint"
            )
        if status == "rejected":
            raise AirflowFailException(f"savepoint of job {self.job_name!r} rejected: {event.get('reason')}")
        if status != "completed":
            raise AirflowException(f"savepoint of job {self.job_name!r} {status}: {event.get('reason')}")
        context["ti"].xcom_push(key="savepoint_id", value=event["savepoint_id"])
        context["ti"].xcom_push(key="batch_id", value=event["batch_id"])
        self.log.info(
            "savepoint %s of job %r completed at %s", event["savepoint_id"], self.job_name, event["savepoint_path"]
        )
        return event["savepoint_path"]


def _as_bool(value: bool | str, *, name: str) -> bool:
    """A flag given as a bool or a rendered template ("True", "false")."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text not in ("true", "false"):
        raise ValueError(f"{name}: {value!r} is not true or false")
    return text == "true"
