"""Who may take a savepoint from the checkpoint pages: every DAG that may own the running job, from real DAG rows.

What the pages show is ``tests/unit/provider/test_checkpoint_views.py``; the pages themselves, in a browser
behind Airflow's auth, are ``tests/system/test_checkpoint_pages.py``.
"""

from __future__ import annotations

import asyncio
import json


def test_a_savepoint_needs_edit_access_to_every_dag_that_may_own_the_running_job(monkeypatch):
    """Run keys are ``<dag_id>.<task_id>.<run_id>``; DAG and task ids may hold dots, so every DAG whose id is
    a dot-separated prefix may own the run, and the button needs edit access to each. The DAG rows are real
    (SQLite); the per-DAG permissions are a stand-in, as Airflow's simple auth manager has none."""
    from airflow.models.dag import DagModel
    from airflow.models.dagbundle import DagBundleModel
    from airflow.utils.session import create_session

    from airflow_checkpoint_provider.ui import app

    with create_session() as session:
        session.merge(DagBundleModel(name="owning-dags-test"))
        session.flush()
        for dag_id in ("etl", "etl.hourly", "other"):
            session.merge(DagModel(dag_id=dag_id, fileloc=f"/dags/{dag_id}.py", bundle_name="owning-dags-test"))
    key = "etl.hourly.run_job.manual__2026-11-23T10:00:00+00:00.1"
    assert sorted(app.owning_dags(key)) == ["etl", "etl.hourly"]
    assert app.owning_dags("other.run_job.scheduled__x.1") == ["other"]
    assert app.owning_dags("unknown.run_job.x.1") == [] and app.owning_dags(None) == []

    granted: set[str | None] = set()
    monkeypatch.setattr(app, "_allowed", lambda user, method, dag_id: method == "PUT" and dag_id in granted)
    history = {"live_runs": [{"run_key": key}]}
    granted.update({"etl.hourly"})
    assert not app._may_savepoint(object(), history), "edit access to one of two owners is not enough"
    granted.update({"etl"})
    assert app._may_savepoint(object(), history)
    # A run started outside Airflow (no DAG owns it) needs edit access on every DAG (dag_id None).
    assert not app._may_savepoint(object(), {"live_runs": [{"run_key": None}]})
    granted.add(None)
    assert app._may_savepoint(object(), {"live_runs": [{"run_key": None}]})
    assert not app._may_savepoint(object(), {"live_runs": []}), "nothing running: nothing to savepoint"


def test_a_dags_checkpoints_tab_lists_the_jobs_its_tasks_name(tmp_path):
    """The DAG and task-instance tabs read the DAG's serialized form (what the API server has): the example
    ``restore_automation`` names its job through params, rendered with their defaults; a task's tab lists the
    job of that task only; rows match by job name and configured root."""
    from airflow_checkpoint_provider.ui.dag_jobs import NamedJob, named_jobs, rendered, rows_of
    from airflow_checkpoint_provider.ui.roots import ConfiguredRoot

    demo_root = _serialize_restore_automation()
    named = named_jobs("restore_automation")
    assert {(job.job_name, job.checkpoint_root) for job in named} == {("event-counts", demo_root.rstrip("/"))}
    assert {job.task_id for job in named} >= {"run_job", "watch_health", "restore_from_latest"}
    assert named_jobs("restore_automation", "watch_health") == [NamedJob("watch_health", "event-counts", demo_root)]
    assert named_jobs("no_such_dag") == []
    # Templates that need the run's context are unknowable here; plain values pass as they are.
    assert rendered("{{ ds }}-orders", {}) is None and rendered("orders", {}) == "orders"
    assert rendered("{{ params.job }}", {"job": "orders"}) == "orders"

    roots = [ConfiguredRoot(0, str(tmp_path / "other"), None), ConfiguredRoot(1, demo_root.rstrip("/"), None)]
    rows = [
        {"job_name": "event-counts", "root_index": 0, "root": roots[0].url},
        {"job_name": "event-counts", "root_index": 1, "root": roots[1].url},
        {"job_name": "orders", "root_index": 1, "root": roots[1].url},
    ]
    assert rows_of(named, rows, roots) == [rows[1]]
    from_connection = [NamedJob("t", "orders", None)]  # the root comes from the task's connection: any root
    assert rows_of(from_connection, rows, roots) == [rows[2]]
    assert rows_of([NamedJob("t", "orders", "/not/configured")], rows, roots) == []


CACHED_DAG = """
from datetime import datetime

from airflow.sdk import DAG

from airflow_checkpoint_provider.sensors import CheckpointSensor

with DAG(dag_id="tab_cache", schedule=None, start_date=datetime(2026, 1, 1)):
    CheckpointSensor(task_id="watch", job_name="{job}", checkpoint_root="/data/checkpoints")
"""


def test_the_tab_reads_a_dag_once_per_version(tmp_path, monkeypatch):
    """A page lists the jobs of every DAG a user may read: each DAG is deserialized once per version, and a
    new version (the DAG file changed) is read again."""
    from airflow.dag_processing.dagbag import DagBag, sync_bag_to_db
    from airflow.models.dagbundle import DagBundleModel
    from airflow.models.serialized_dag import SerializedDagModel
    from airflow.utils.session import create_session

    from airflow_checkpoint_provider.ui.dag_jobs import named_jobs

    with create_session() as session:
        session.merge(DagBundleModel(name="tab-cache-test"))
    monkeypatch.setenv("AIRFLOW__CORE__MIN_SERIALIZED_DAG_UPDATE_INTERVAL", "0")  # a new version at once

    def serialize(job: str) -> None:
        dag_file = tmp_path / f"tab_cache_{job}.py"  # a new file: a module already imported is not read again
        dag_file.write_text(CACHED_DAG.format(job=job))
        sync_bag_to_db(DagBag(dag_folder=str(dag_file)), "tab-cache-test", None)

    reads = []
    real_get = SerializedDagModel.get.__func__
    monkeypatch.setattr(
        SerializedDagModel, "get", classmethod(lambda cls, *a, **k: reads.append(a) or real_get(cls, *a, **k))
    )
    serialize("orders")
    assert [job.job_name for job in named_jobs("tab_cache")] == ["orders"]
    assert [job.job_name for job in named_jobs("tab_cache", "watch")] == ["orders"]
    assert len(reads) == 1, "the unchanged DAG was deserialized again"
    serialize("payments")
    assert [job.job_name for job in named_jobs("tab_cache")] == ["payments"], "a new version is read"
    assert len(reads) == 2


def _serialize_restore_automation() -> str:
    """Write the example DAG ``restore_automation`` to the database as the DAG processor does; its default root."""
    from airflow.dag_processing.dagbag import DagBag, sync_bag_to_db
    from airflow.models.dagbundle import DagBundleModel
    from airflow.utils.session import create_session

    from tests.support.airflow_env import DAGS_FOLDER

    with create_session() as session:
        session.merge(DagBundleModel(name="dag-jobs-test"))
    bag = DagBag(dag_folder=str(DAGS_FOLDER / "restore_automation.py"))
    sync_bag_to_db(bag, "dag-jobs-test", None)
    return bag.dags["restore_automation"].params["checkpoint_root"]


def test_a_user_who_may_read_some_dags_sees_only_the_jobs_they_name(monkeypatch):
    """Who reads every DAG sees every job; who reads some DAGs sees the jobs those DAGs name, and no other
    job's page or JSON; who reads none is refused. The serialized DAG is real; the per-DAG permissions are a
    stand-in for an auth manager that has them (Airflow's simple auth manager has none)."""
    import pytest
    from fastapi import HTTPException

    from airflow_checkpoint_provider.ui import app
    from airflow_checkpoint_provider.ui.roots import ConfiguredRoot

    roots = [ConfiguredRoot(0, _serialize_restore_automation().rstrip("/"), None)]
    rows = [{"job_name": name, "root_index": 0, "root": roots[0].url} for name in ("event-counts", "orders")]

    from airflow.models.dag import DagModel
    from airflow.models.dagbundle import DagBundleModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:  # a DAG the reader may not read
        session.merge(DagBundleModel(name="readable-dags-test"))
        session.flush()
        session.merge(DagModel(dag_id="someone_elses", fileloc="/dags/x.py", bundle_name="readable-dags-test"))
    with create_session() as session:
        every = set(session.scalars(select(DagModel.dag_id)))
    assert {"restore_automation", "someone_elses"} <= every, every

    class PerDagAuthManager:
        readable = {"admin": every, "reader": {"restore_automation"}, "stranger": set()}

        def get_authorized_dag_ids(self, *, user, method="GET"):
            return self.readable[user]

    import airflow.api_fastapi.app as api_app

    monkeypatch.setattr(api_app, "get_auth_manager", PerDagAuthManager)
    # Without a DAG, GET asks whether the user may list DAGs (FAB: read access to any one is enough).
    monkeypatch.setattr(app, "_allowed", lambda user, method, dag_id: user != "stranger")
    monkeypatch.setattr(app, "configured_roots", lambda: roots)
    assert app._visible(rows, roots, app._require_view("admin")) == rows
    readable = app._require_view("reader")
    assert readable == {"restore_automation"} and app._visible(rows, roots, readable) == [rows[0]]
    app._require_job_view("reader", 0, "event-counts")
    with pytest.raises(HTTPException, match="needs read access to a DAG that runs it"):
        app._require_job_view("reader", 0, "orders")
    with pytest.raises(HTTPException, match="needs read access to DAGs"):
        app._require_view("stranger")

    # A root's read errors (they name any DAG's jobs) show on a DAG's tab only to who reads every DAG.
    async def overview():
        return roots, [], ["job 'orders' cannot be read: PermissionError"]  # no row readable

    monkeypatch.setattr(app, "_overview", overview)
    monkeypatch.setattr(app, "_allowed", lambda user, method, dag_id: user != "stranger")
    tab = lambda user: asyncio.run(app.api_dag_jobs("restore_automation", user)).body.decode()  # noqa: E731
    assert "cannot be read" in tab("admin")
    shown = json.loads(tab("reader"))
    assert (
        shown["none_found"] == "No job named by DAG 'restore_automation' under the configured roots yet (event-counts)."
    )
    assert shown["errors"] == [] and shown["jobs"] == [] and "orders" not in json.dumps(shown)
