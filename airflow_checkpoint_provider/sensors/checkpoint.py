"""Wait for a completed checkpoint of a job."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from airflow.sdk import BaseSensorOperator, Context, PokeReturnValue
from airflow.sdk.exceptions import AirflowException

from airflow_checkpoint_provider.hooks.checkpoint_storage import CheckpointStorageHook
from airflow_checkpoint_provider.triggers.checkpoint import CheckpointTrigger


def parse_checkpoint_id(value: Any) -> int | None:
    """``newer_than`` after templating: an id, or nothing ("", "None", None)."""
    if value is None or str(value).strip() in ("", "None", "null"):
        return None
    try:
        return int(str(value).strip())
    except ValueError:
        raise AirflowException(f"newer_than {value!r} is not a checkpoint id (a whole number)") from None


class CheckpointSensor(BaseSensorOperator):
    """Wait until a job has a valid completed checkpoint, optionally newer than a given id.

    Works in poke, reschedule and deferrable modes (``deferrable=True``: no worker slot is held; the
    trigger checks storage in a thread). Returns the checkpoint's summary to XCom, with ``checkpoint_id``
    and ``checkpoint_path``.

    :param job_name: the job folder under the root (templated).
    :param checkpoint_root: the checkpoint root (templated).
    :param newer_than: only a checkpoint with a larger id counts, e.g.
        ``"{{ ti.xcom_pull('job')['checkpoint_id'] }}"`` (templated).
    :param storage_conn_id: ``checkpoint_storage`` connection, if the storage needs credentials.
    :param deferrable: wait in the triggerer instead of a worker slot.
    """

    template_fields: Sequence[str] = ("job_name", "checkpoint_root", "newer_than")
    ui_color = "#e8eef8"

    def __init__(
        self,
        *,
        job_name: str,
        checkpoint_root: str,
        newer_than: int | str | None = None,
        storage_conn_id: str | None = None,
        deferrable: bool = False,
        **kwargs: Any,
    ):
        super().__init__(**kwargs)
        self.job_name = job_name
        self.checkpoint_root = checkpoint_root
        self.newer_than = newer_than
        self.storage_conn_id = storage_conn_id
        self.deferrable = deferrable

    def poke(self, context: Context) -> PokeReturnValue:
        found = CheckpointStorageHook(self.storage_conn_id).latest_checkpoint(
            self.checkpoint_root, self.job_name, parse_checkpoint_id(self.newer_than)
        )
        if found is None:
            self.log.info("no completed checkpoint of job %r newer than %s yet", self.job_name, self.newer_than)
        return PokeReturnValue(is_done=found is not None, xcom_value=found)

    def execute(self, context: Context) -> Any:
        if not self.deferrable:
            return super().execute(context)
        first = self.poke(context)  # no need to defer when it is already there
        if first.is_done:
            return first.xcom_value
        self.defer(
            trigger=CheckpointTrigger(
                job_name=self.job_name,
                checkpoint_root=self.checkpoint_root,
                newer_than=parse_checkpoint_id(self.newer_than),
                storage_conn_id=self.storage_conn_id,
                poke_interval=self.poke_interval,
            ),
            method_name="execute_complete",
            timeout=timedelta(seconds=self.timeout),
        )

    def execute_complete(self, context: Context, event: dict[str, Any]) -> Any:
        if event.get("status") != "success":
            raise AirflowException(f"waiting for a checkpoint of job {self.job_name!r} failed: {event.get('message')}")
        self.log.info("checkpoint %s of job %r completed", event["checkpoint"]["checkpoint_id"], self.job_name)
        return event["checkpoint"]
