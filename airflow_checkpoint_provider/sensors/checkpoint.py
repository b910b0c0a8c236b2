"""Wait for a completed checkpoint of a job."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from airflow.providers.common.compat.sdk import conf
from airflow.sdk import BaseSensorOperator, Context, PokeReturnValue
from airflow.sdk.exceptions import AirflowException, AirflowFailException

from airflow_checkpoint_provider.durations import sensor_durations
from airflow_checkpoint_provider.hooks.checkpoint_storage import CheckpointStorageHook
from airflow_checkpoint_provider.triggers.checkpoint import CheckpointTrigger


def push_checkpoint_keys(context: Context, report: dict[str, Any]) -> dict[str, Any]:
    """XCom keys ``checkpoint_id`` and ``checkpoint_path``, so ``task.output["checkpoint_id"]`` works directly.

    Returns ``report``.
    """
    for key in ("checkpoint_id", "checkpoint_path"):
        context["ti"].xcom_push(key=key, value=report.get(key))
    return report


def parse_checkpoint_id(value: Any, name: str = "newer_than") -> int | None:
    """A checkpoint id argument (``name``) after templating: an id, or nothing ("", "None", None)."""
    if value is None or str(value).strip() in ("", "None", "null"):
        return None
    try:
        return int(str(value).strip())
    except ValueError:
        raise AirflowFailException(f"{name} {value!r} is not a checkpoint id (a whole number)") from None


def parse_instant_ms(value: Any, name: str = "completed_after") -> int | None:
    """A moment argument (``name``) after templating: a datetime or an ISO-8601 string, as epoch ms; nothing
    gives None.

    A time without a zone is taken as UTC (Airflow's dates are UTC).
    """
    if value is None or str(value).strip() in ("", "None", "null"):
        return None
    if not isinstance(value, datetime):
        try:
            value = datetime.fromisoformat(str(value).strip())
        except ValueError:
            raise AirflowFailException(
                f"{name} {value!r} is not a date and time (ISO 8601, e.g. '{{{{ dag_run.start_date }}}}')"
            ) from None
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return int(value.timestamp() * 1000)


class CheckpointSensor(BaseSensorOperator):
    """Wait until a job has a valid completed checkpoint, optionally newer than a given id.

    Works in poke, reschedule and deferrable modes (``deferrable=True``: no worker slot is held; the
    trigger checks storage in a thread). Returns the checkpoint's summary to XCom, with ``checkpoint_id``
    and ``checkpoint_path``.

    :param job_name: the job folder under the root (templated).
    :param checkpoint_root: the checkpoint root (templated);
        default: the Host of the ``storage_conn_id`` connection.
    :param newer_than: only a checkpoint with a larger id counts: an id, an XComArg such as
        ``run.output["checkpoint_id"]`` (the job operator pushes that key), or a template (templated).
    :param at_least: that checkpoint or a newer one counts, e.g. ``run.output["checkpoint_id"]`` to confirm the
        checkpoint a run reported (templated; give ``newer_than`` or ``at_least``, not both).
    :param completed_after: only a checkpoint completed after this moment counts: a datetime or an ISO-8601
        string, e.g. ``"{{ dag_run.start_date }}"`` for a sensor that runs beside a continuous job and confirms
        that this run checkpoints (templated). It compares the Spark driver's clock with this one.
    :param storage_conn_id: ``checkpoint_storage`` connection, if the storage needs credentials.
    :param deferrable: wait in the triggerer instead of a worker slot (default: Airflow's
        ``[operators] default_deferrable``).
    """

    template_fields: Sequence[str] = ("job_name", "checkpoint_root", "newer_than", "at_least", "completed_after")
    ui_color = "#e8eef8"

    def __init__(
        self,
        *,
        job_name: str,
        checkpoint_root: str | None = None,
        newer_than: int | str | None = None,
        at_least: int | str | None = None,
        completed_after: datetime | str | None = None,
        storage_conn_id: str | None = None,
        deferrable: bool = conf.getboolean("operators", "default_deferrable", fallback=False),
        **kwargs: Any,
    ):
        super().__init__(**sensor_durations(kwargs))
        self.job_name = job_name
        self.checkpoint_root = checkpoint_root
        self.newer_than = newer_than
        self.at_least = at_least
        self.completed_after = completed_after
        self.storage_conn_id = storage_conn_id
        self.deferrable = deferrable

    def _newer_than(self) -> int | None:
        newer, least = parse_checkpoint_id(self.newer_than), parse_checkpoint_id(self.at_least, "at_least")
        if newer is not None and least is not None:
            raise AirflowFailException(f"give newer_than ({newer}) or at_least ({least}), not both")
        return least - 1 if least is not None else newer

    def poke(self, context: Context) -> PokeReturnValue:
        found = CheckpointStorageHook(self.storage_conn_id).latest_checkpoint(
            self.checkpoint_root, self.job_name, self._newer_than(), parse_instant_ms(self.completed_after)
        )
        if found is None:
            self.log.info(
                "no completed checkpoint of job %r yet (newer than %s, completed after %s)",
                self.job_name,
                self._newer_than(),
                self.completed_after,
            )
        return PokeReturnValue(is_done=found is not None, xcom_value=found)

    def execute(self, context: Context) -> Any:
        self.checkpoint_root = CheckpointStorageHook(self.storage_conn_id).root(self.checkpoint_root)
        if not self.deferrable:
            found = super().execute(context)
            return push_checkpoint_keys(context, found) if found else found
        first = self.poke(context)  # no need to defer when it is already there
        if first.is_done:
            return push_checkpoint_keys(context, first.xcom_value)
        self.defer(
            trigger=CheckpointTrigger(
                job_name=self.job_name,
                checkpoint_root=self.checkpoint_root,
                newer_than=self._newer_than(),
                completed_after_ms=parse_instant_ms(self.completed_after),
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
        return push_checkpoint_keys(context, event["checkpoint"])
