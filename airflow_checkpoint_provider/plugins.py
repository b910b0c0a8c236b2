"""The Airflow plugin that puts the checkpoint pages on the API server and in the UI's navigation."""

from __future__ import annotations

from airflow.plugins_manager import AirflowPlugin

from airflow_checkpoint_provider.ui.app import app, base_path


class CheckpointsPlugin(AirflowPlugin):
    """Mounts the pages under ``/checkpoints/`` and adds "Checkpoints" to the UI's navigation (the pages, in a
    frame) and as a tab on each DAG's and task instance's page (a React app rendered by Airflow's UI itself).

    Configure the roots the pages list with ``[checkpoint_provider] roots``.
    """

    name = "checkpoint_provider"
    fastapi_apps = [{"app": app, "url_prefix": "/checkpoints", "name": "Checkpoints"}]
    # The UI uses an external view's href as its frame's src as it is: under a path prefix ([api] base_url) the
    # prefix must be in it.
    external_views = [
        {
            "name": "Checkpoints",
            "href": f"{base_path()}/checkpoints/",
            "destination": "nav",
            "url_route": "checkpoints",
        },
    ]
    # A "Checkpoints" tab on every DAG and task instance page, drawn with Airflow's own React and Chakra UI. The
    # bundle URL is relative: the UI resolves it against its base URL, so a path prefix works. Each tab needs a
    # url_route of its own (the UI finds a plugin page by its route alone); both share the name, which is the tab's
    # label and the global the bundle's component is found under.
    react_apps = [
        {
            "name": "Checkpoints",
            "bundle_url": "checkpoints/static/checkpoints-tab.js",
            "destination": destination,
            "url_route": route,
        }
        for destination, route in (("dag", "dag-checkpoints"), ("task_instance", "task-checkpoints"))
    ]
