"""The job operator's deferrable path: its driver on a standalone cluster, followed from the triggerer."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow.sdk import Context
from airflow.sdk.exceptions import AirflowException, AirflowFailException

from airflow_checkpoint_provider.durations import to_seconds
from airflow_checkpoint_provider.triggers.driver import ClusterDriverTrigger

if TYPE_CHECKING:
    from airflow_checkpoint_provider.hooks.streaming_job import StreamingJobHook


class DeferredDriverMixin:
    """``CheckpointedStreamingJobOperator(deferrable=True)``: submit the driver to the cluster, free the worker
    slot while it runs (``ClusterDriverTrigger`` follows it), and resume when it ends with the outcome the
    blocking path would give. Part of the job operator, whose attributes (``job_name``, ``checkpoint_root``,
    ``storage_hook``, ``_outcome``...) it uses; DAG authors use the operator."""

    def _defer_to_the_driver(self, hook: StreamingJobHook, args: list[str], *, heartbeat_timeout: float) -> None:
        """Submit the driver, then defer until it ends; a run whose heartbeat stays unchanged for
        ``heartbeat_timeout`` (its lease timeout) while the driver runs is killed through the master."""
        if not hook.runs_on_standalone_cluster():
            raise AirflowFailException(
                f"{self.task_id}: deferrable=True needs the driver to run on the cluster: a Spark connection with "
                "the extra deploy-mode cluster on a standalone master (spark://...). Otherwise the driver runs in "
                "this task, which cannot be freed"
            )
        # Not the task's temporary folder: the worker copies the launcher when it starts the driver.
        folder = Path(tempfile.gettempdir())
        files = hook.start_on_standalone_cluster(args, self.storage_hook.storage_options(), folder)
        driver = hook.driver
        self.defer(
            trigger=ClusterDriverTrigger(
                job_name=self.job_name,
                checkpoint_root=self.checkpoint_root,
                rest_url=driver.rest_url,
                driver_id=driver.driver_id,
                run_key=self._run_key,
                stop_timeout=to_seconds(self.stop_timeout, name="stop_timeout"),
                storage_conn_id=self.storage_conn_id,
                poll_interval=self.driver_poll_interval,
                files=[str(path) for path in files],
                heartbeat_timeout=heartbeat_timeout,
            ),
            method_name="execute_complete",
        )

    def execute_complete(self, context: Context, event: dict[str, Any]) -> dict[str, Any]:
        """The driver ended (``deferrable=True``): the run's outcome, as the blocking path has it."""
        for path in event.get("files") or []:  # on another machine than the submission's: left there
            Path(path).unlink(missing_ok=True)
        if event.get("status") == "error":
            raise AirflowException(f"job {self.job_name!r}: following its driver failed: {event.get('reason')}")
        self.checkpoint_root = self.storage_hook.root(self.checkpoint_root)
        self._run_key = event["run_key"]
        control = self.storage_hook.control(self.checkpoint_root, self.job_name)
        # The request, not only the trigger's memory of serving it: a triggerer restart forgets that, and the
        # killed driver's graceful stop writes a report of its own.
        request = control.kill_request(self._run_key)
        if event.get("killed") or request is not None:
            reason = event.get("killed") or (request or {}).get("reason") or "a kill was requested"
            raise AirflowException(f"job {self.job_name!r} was killed: {reason}")
        state = event["driver_state"]
        failure = None if state == "FINISHED" else AirflowException(f"driver {event['driver_id']} ended {state}")
        return self._outcome(context, control, failure, None)
