"""Per-DAG permissions on the checkpoint pages, under real auth managers that have them (the FAB provider's, and
Airflow's own simple one in multi-team mode).

A real Airflow API server on loopback runs ``FabAuthManager``; its users and roles are made with the FAB
provider's own CLI (``roles create``, ``roles add-perms``, ``users create``), with permissions on single DAGs.
Two DAGs each name one job under a configured root. Each user's requests, signed with the token Airflow
issues for their password:

- the admin sees both jobs;
- a user who may read one DAG sees that DAG's job only (list, JSON, job page, the DAG's tab) and is refused
  the other's, and may not take a savepoint of it;
- a user who may edit that DAG takes a savepoint of its running job, and Airflow's audit log names them;
- a user who may read no DAG is refused the pages;
- in Airflow's multi-team mode (its simple auth manager), a team's member sees and savepoints only the jobs
  its team's DAGs name.

The job folders hold format-valid checkpoints written through the format module; no Spark runs (what a page
shows of a real job is ``test_checkpoint_pages.py``). The running job is a fresh heartbeat with the run key an
Airflow task gives it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spark_checkpoint_runtime.layout import ControlChannel, JobFolder
from tests.support.helpers import write_checkpoint
from tests.support.local_airflow import LocalAirflow
from tests.system.test_checkpoint_pages import request

pytestmark = [pytest.mark.slow]

FAB = "airflow.providers.fab.auth_manager.fab_auth_manager.FabAuthManager"
DAG = """
from datetime import datetime

from airflow.sdk import DAG

from airflow_checkpoint_provider.operators import CheckpointedStreamingJobOperator

with DAG({dag_id!r}, schedule=None, start_date=datetime(2026, 1, 1)):
    CheckpointedStreamingJobOperator(
        task_id="run_job",
        job_name={job!r},
        checkpoint_root={root!r},
        pipeline="examples.pipelines:running_counts",
    )
"""
JOBS = {"orders_job": "orders", "events_job": "events"}
# user -> (role, [(action, resource)]); the admin is FAB's own Admin role.
USERS = {
    "admin": ("Admin", []),
    "reader": ("OrdersReader", [("can_read", "DAG:orders_job")]),
    "editor": ("OrdersEditor", [("can_read", "DAG:orders_job"), ("can_edit", "DAG:orders_job")]),
    "stranger": ("NoDags", []),
}


def _cli(airflow: LocalAirflow, *args: str) -> str:
    done = airflow.airflow(*args)
    assert done.returncode == 0, f"airflow {' '.join(args)}:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    return done.stdout


def _token(airflow: LocalAirflow, user: str) -> str:
    body = json.dumps({"username": user, "password": f"{user}-pw"}).encode()
    status, answer = request(
        f"{airflow.url}/auth/token", method="POST", data=body, **{"Content-Type": "application/json"}
    )
    assert status in (200, 201), (status, answer[-1000:])
    return json.loads(answer)["access_token"]


def _jobs(airflow: LocalAirflow, token: str) -> tuple[int, list[str]]:
    status, answer = request(f"{airflow.url}/checkpoints/api/jobs", token=token)
    return status, sorted(job["job_name"] for job in json.loads(answer).get("jobs", [])) if status == 200 else []


def _savepoint(airflow: LocalAirflow, token: str, job: str) -> int:
    # The live run an Airflow task started: its run key is <dag_id>.<task_id>.<run_id>.<try>.
    ControlChannel(JobFolder(airflow.env["AIRFLOW__CHECKPOINT_PROVIDER__ROOTS"], job)).heartbeat(
        "run-1", f"{next(d for d, j in JOBS.items() if j == job)}.run_job.manual__2026-11-27T00:00:00+00:00.1"
    )
    status, _ = request(
        f"{airflow.url}/checkpoints/api/jobs/0/{job}/savepoint",
        token=token,
        method="POST",
        data=json.dumps({"stop": False}).encode(),
        **{"Content-Type": "application/json"},
    )
    return status


def test_the_pages_follow_fab_per_dag_permissions(tmp_path: Path):
    root, home, dags = tmp_path / "root", tmp_path / "airflow-home", tmp_path / "dags"
    dags.mkdir()
    for dag_id, job in JOBS.items():
        (dags / f"{dag_id}.py").write_text(DAG.format(dag_id=dag_id, job=job, root=str(root)))
        for checkpoint_id in (1, 2):
            write_checkpoint(JobFolder(str(root), job), checkpoint_id, [])
    airflow = LocalAirflow(
        home, dags, {"AIRFLOW__CORE__AUTH_MANAGER": FAB, "AIRFLOW__CHECKPOINT_PROVIDER__ROOTS": str(root)}
    )
    try:
        airflow.start(("api-server",))
        _cli(airflow, "dags", "reserialize")
        _cli(airflow, "sync-perm", "--include-dags")  # FAB's DAG:<id> resources, which roles are given
        for user, (role, permissions) in USERS.items():
            if role != "Admin":
                _cli(airflow, "roles", "create", role)
            for action, resource in permissions:
                _cli(airflow, "roles", "add-perms", role, "-a", action, "-r", resource)
            _cli(
                airflow, "users", "create", "--username", user, "--password", f"{user}-pw", "--role", role,
                "--email", f"{user}@example.com", "--firstname", user, "--lastname", "tester",
            )  # fmt: skip
        tokens = {user: _token(airflow, user) for user in USERS}

        assert _jobs(airflow, tokens["admin"]) == (200, ["events", "orders"])

        # Who may read one DAG sees its job, and nothing of the other's.
        reader = tokens["reader"]
        assert _jobs(airflow, reader) == (200, ["orders"])
        assert request(f"{airflow.url}/checkpoints/api/jobs/0/orders", token=reader)[0] == 200
        status, answer = request(f"{airflow.url}/checkpoints/api/jobs/0/events", token=reader)
        assert status == 403 and "needs read access to a DAG that runs it" in answer, (status, answer)
        status, answer = request(f"{airflow.url}/checkpoints/api/dags/orders_job", token=reader)
        assert status == 200 and [j["job_name"] for j in json.loads(answer)["jobs"]] == ["orders"], (status, answer)
        assert request(f"{airflow.url}/checkpoints/api/dags/events_job", token=reader)[0] == 403
        # Reading a DAG is not editing it: no savepoint.
        assert _savepoint(airflow, reader, "orders") == 403
        assert not list((root / "orders" / "_control").glob("requests/*.json"))

        # Who may edit the DAG takes a savepoint of its running job; the audit log names them.
        assert _savepoint(airflow, tokens["editor"], "orders") == 202
        requests = list((root / "orders" / "_control").glob("requests/*.json"))
        assert len(requests) == 1 and "ui-editor-" in requests[0].name, requests
        assert _savepoint(airflow, tokens["editor"], "events") == 403, "edit on orders_job is not edit on events_job"
        status, answer = request(f"{airflow.url}/api/v2/eventLogs?event=checkpoint_savepoint", token=tokens["admin"])
        audit = json.loads(answer)["event_logs"]
        assert status == 200 and [(e["event"], e["owner"]) for e in audit] == [("checkpoint_savepoint", "editor")]

        # Who may read no DAG is refused the pages.
        status, answer = request(f"{airflow.url}/checkpoints/api/jobs", token=tokens["stranger"])
        assert status == 403 and "needs read access to DAGs" in answer, (status, answer)
    finally:
        airflow.stop()


def test_the_pages_follow_airflows_multi_team_setup(tmp_path: Path):
    """Airflow's multi-team mode under its own simple auth manager: each DAG bundle belongs to a team (its
    ``team_name`` in ``dag_bundle_config_list``), each user to a team. A team's member sees the jobs its team's
    DAGs name and nothing of the other team's (list, JSON, the DAG's tab), and takes savepoints of its own
    team's running job only."""
    root, home = tmp_path / "root", tmp_path / "airflow-home"
    home.mkdir()
    teams = {"team_a": "orders_job", "team_b": "events_job"}
    users = {"alice": "team_a", "bob": "team_b"}
    bundles = []
    for team, dag_id in teams.items():
        folder = tmp_path / f"dags-{team}"
        folder.mkdir()
        (folder / f"{dag_id}.py").write_text(DAG.format(dag_id=dag_id, job=JOBS[dag_id], root=str(root)))
        write_checkpoint(JobFolder(str(root), JOBS[dag_id]), 1, [])
        bundles.append(
            {
                "name": f"bundle_{team}",
                "classpath": "airflow.dag_processing.bundles.local.LocalDagBundle",
                "kwargs": {"path": str(folder)},
                "team_name": team,
            }
        )
    (home / "simple_auth_manager_passwords.json.generated").write_text(json.dumps({u: f"{u}-pw" for u in users}))
    env = {
        "AIRFLOW__CORE__MULTI_TEAM": "True",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "False",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": ",".join(f"{user}:user:{team}" for user, team in users.items()),
        "AIRFLOW__DAG_PROCESSOR__DAG_BUNDLE_CONFIG_LIST": json.dumps(bundles),
        "AIRFLOW__CHECKPOINT_PROVIDER__ROOTS": str(root),
    }
    airflow = LocalAirflow(home, tmp_path / "dags-team_a", env)
    try:
        # The teams exist before the API server starts (its auth manager checks its users' teams against them).
        _cli(airflow, "db", "migrate")
        for team in teams:
            _cli(airflow, "teams", "create", team)
        _cli(airflow, "dags", "reserialize")  # the bundles, with their teams, and their DAGs
        airflow.start(("api-server",))
        alice, bob = _token(airflow, "alice"), _token(airflow, "bob")

        assert _jobs(airflow, alice) == (200, ["orders"])
        assert _jobs(airflow, bob) == (200, ["events"])
        status, answer = request(f"{airflow.url}/checkpoints/api/jobs/0/events", token=alice)
        assert status == 403 and "needs read access to a DAG that runs it" in answer, (status, answer)
        assert request(f"{airflow.url}/checkpoints/api/dags/events_job", token=alice)[0] == 403
        status, answer = request(f"{airflow.url}/checkpoints/api/dags/orders_job", token=alice)
        assert status == 200 and [j["job_name"] for j in json.loads(answer)["jobs"]] == ["orders"], (status, answer)

        assert _savepoint(airflow, bob, "orders") == 403, "another team's job"
        assert not list((root / "orders" / "_control").glob("requests/*.json"))
        assert _savepoint(airflow, alice, "orders") == 202
        assert len(list((root / "orders" / "_control").glob("requests/*.json"))) == 1
    finally:
        airflow.stop()
