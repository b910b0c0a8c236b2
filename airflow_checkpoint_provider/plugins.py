"""The Airflow plugin that puts the checkpoint pages on the API server and in the UI's navigation."""

from __future__ import annotations

from airflow.plugins_manager import AirflowPlugin

from airflow_checkpoint_provider.ui.app import app


class CheckpointsPlugin(AirflowPlugin):
    """Mounts the pages under ``/checkpoints/`` and adds "Checkpoints" to the UI's navigation (shown in a frame).

    Configure the roots the pages list with ``[checkpoint_provider] roots``.
    """

    name = "checkpoint_provider"
    fastapi_apps = [{"app": app, "url_prefix": "/checkpoints", "name": "Checkpoints"}]
    external_views = [
        {"name": "Checkpoints", "href": "/checkpoints/", "destination": "nav", "url_route": "checkpoints"},
    ]
