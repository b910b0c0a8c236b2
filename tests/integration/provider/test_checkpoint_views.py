"""Who may take a savepoint from the checkpoint pages: every DAG that may own the running job, from real DAG rows.

What the pages show is ``tests/unit/provider/test_checkpoint_views.py``; the pages themselves, in a browser
behind Airflow's auth, are ``tests/system/test_checkpoint_pages.py``.
"""

from __future__ import annotations


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
