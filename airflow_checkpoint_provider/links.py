"""Extra links on the job operator's tasks (buttons in the task's view of the Airflow UI)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperatorLink

if TYPE_CHECKING:
    from airflow.sdk.types import TaskInstanceKey


class _PersistedLink(BaseOperatorLink):
    """A link whose URL the task stores in XCom (key ``_link_<class>``) as soon as it starts."""

    def get_link(self, operator: Any, *, ti_key: TaskInstanceKey) -> str:
        from airflow.sdk.execution_time.xcom import XCom

        return XCom.get_value(ti_key=ti_key, key=self.xcom_key) or ""

    def persist(self, context: Any, url: str) -> None:
        """Record the link for this task try."""
        context["ti"].xcom_push(key=self.xcom_key, value=url)


class CheckpointHistoryLink(_PersistedLink):
    """The job's checkpoint history: its page under ``/checkpoints/`` when ``[checkpoint_provider] roots``
    lists its root, else the job folder's URL in its storage.

    The task stores the URL in XCom (key ``_link_CheckpointHistoryLink``) as soon as it starts, so the button
    works while the job is still running.
    """

    name = "Checkpoint history"


class SparkUILink(_PersistedLink):
    """The running driver's Spark UI, where the driver runs beside the task (local master, client deploy mode).

    The operator pins ``spark.ui.port`` to a free port (unless the conf sets one) so the URL is exact. The
    Spark UI lives as long as the driver: after the run, the link answers nothing (Spark's history server is
    the place then). Empty when the UI is disabled or the driver runs elsewhere (cluster deploy mode).
    """

    name = "Spark UI"
