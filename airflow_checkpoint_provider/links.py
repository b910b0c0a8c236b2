"""Extra links on the job operator's tasks (buttons in the task's view of the Airflow UI)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperatorLink

if TYPE_CHECKING:
    from airflow.sdk.types import TaskInstanceKey


class CheckpointHistoryLink(BaseOperatorLink):
    """The job's checkpoint folder (its checkpoint history and savepoints), as a URL of its storage.

    The task stores the URL in XCom (key ``_link_CheckpointHistoryLink``) as soon as it starts, so the button
    works while the job is still running.
    """

    name = "Checkpoint history"

    def get_link(self, operator: Any, *, ti_key: TaskInstanceKey) -> str:
        from airflow.sdk.execution_time.xcom import XCom

        return XCom.get_value(ti_key=ti_key, key=self.xcom_key) or ""

    def persist(self, context: Any, url: str) -> None:
        """Record the link for this task try."""
        context["ti"].xcom_push(key=self.xcom_key, value=url)
