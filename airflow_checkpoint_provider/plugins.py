"""The Airflow plugin that puts the checkpoint pages on the API server and in the UI's navigation."""

from __future__ import annotations

from airflow.plugins_manager import AirflowPlugin

from airflow_checkpoint_provider.ui.app import app


class CheckpointsPlugin(AirflowPlugin):
    """Mounts the pages' JSON API under ``/checkpoints/`` and adds "Checkpoints" to the UI's navigation (the job
    list and job pages) and as a tab on each DAG's and task instance's page: a React app Airflow's UI draws.

    Configure the roots the pages list with ``[checkpoint_provider] roots``.
    """

    name = "checkpoint_provider"
    fastapi_apps = [{"app": app, "url_prefix": "/checkpoints", "name": "Checkpoints"}]
    # The navigation entry (the job list and each job's page) and a tab on every DAG and task instance page: one
    # React app, drawn by Airflow's UI with its own React and Chakra UI (its look, light and dark; no frame). The
    # bundle URL is relative: the UI resolves it against its base URL, so a path prefix works. Each needs a
    # url_route of its own (the UI finds a plugin page by its route alone); all share the name, which is the
    # label and the global the bundle's component is found under: the component draws the tab when the page
    # gives it a DAG, else the job pages.
    react_apps = [
        {
            "name": "Checkpoints",
            "bundle_url": "checkpoints/static/checkpoints.js",
            "destination": destination,
            "url_route": route,
        }
        for destination, route in (
            ("nav", "checkpoints"),
            ("dag", "dag-checkpoints"),
            ("task_instance", "task-checkpoints"),
        )
    ]
