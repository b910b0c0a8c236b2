"""The Airflow plugin that puts the checkpoint pages on the API server and in the UI's navigation."""

from __future__ import annotations

from airflow.plugins_manager import AirflowPlugin

from airflow_checkpoint_provider.ui.app import app


class CheckpointsPlugin(AirflowPlugin):
    """Mounts the pages under ``/checkpoints/`` and adds "Checkpoints" to the UI's navigation and as a tab on each
    DAG's and task instance's page (shown in a frame).

    Configure the roots the pages list with ``[checkpoint_provider] roots``.
    """

    name = "checkpoint_provider"
    fastapi_apps = [{"app": app, "url_prefix": "/checkpoints", "name": "Checkpoints"}]
    # The UI fills in {DAG_ID} and {TASK_ID}: a "Checkpoints" tab on every DAG and task instance page. Each view
    # needs a url_route of its own: the UI finds a plugin page by its route alone.
    external_views = [
        {"name": "Checkpoints", "href": "/checkpoints/", "destination": "nav", "url_route": "checkpoints"},
        {
            "name": "Checkpoints",
            "href": "/checkpoints/dags/{DAG_ID}",
            "destination": "dag",
            "url_route": "dag-checkpoints",
        },
        {
            "name": "Checkpoints",
            "href": "/checkpoints/dags/{DAG_ID}/tasks/{TASK_ID}",
            "destination": "task_instance",
            "url_route": "task-checkpoints",
        },
    ]
