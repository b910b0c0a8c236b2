"""A real Airflow for the provider tests: a temporary AIRFLOW_HOME with SQLite, migrated once.

The environment is set when this module is imported, before anything imports Airflow (``tests/conftest.py``
registers it first). The database is migrated by the ``airflow_db`` fixture, which the folders of
``dag.test()`` tests use for every test (their ``conftest.py``); tests without it never wait for a migration.
The DAGs folder holds the example DAGs and the tests' own (``dags/`` here).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from tests.support.helpers import REPO, VENV_BIN

AIRFLOW_HOME = Path(tempfile.mkdtemp(prefix="airflow-home-"))
DAGS_FOLDER = AIRFLOW_HOME / "dags"
DAGS_FOLDER.mkdir()
# The example DAGs as a user deploys them, plus the tests' own DAGs (dag.test runs DAGs of the DAGs folder).
for _source in [*(REPO / "dags").glob("*.py"), *(Path(__file__).parent / "dags").glob("*.py")]:
    (DAGS_FOLDER / _source.name).symlink_to(_source)
# Airflow's DAG processor puts the DAGs folder on sys.path (the example DAGs import example_settings).
sys.path.insert(0, str(DAGS_FOLDER))
os.environ.update(
    {
        "AIRFLOW_HOME": str(AIRFLOW_HOME),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS_FOLDER),
        "AIRFLOW__CORE__UNIT_TEST_MODE": "False",
        "AIRFLOW__LOGGING__LOGGING_LEVEL": "INFO",
        "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local[2]"}),
        # Storage options with a planted secret: it must never show up in logs, _metadata or XCom.
        "AIRFLOW_CONN_CHECKPOINT_LOCAL": json.dumps(
            {"conn_type": "checkpoint_storage", "extra": {"planted_secret": "PLANTED-SECRET-7f3a9c"}}
        ),
        "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
    }
)


@pytest.fixture(scope="session")
def airflow_db():
    """``airflow db migrate`` once per test session (SQLite in the temporary AIRFLOW_HOME)."""
    result = subprocess.run(
        [str(VENV_BIN / "airflow"), "db", "migrate"], capture_output=True, text=True, timeout=600, env=os.environ
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return AIRFLOW_HOME


PLANTED_SECRET = "PLANTED-SECRET-7f3a9c"


@pytest.fixture
def rooted(tmp_path: Path):
    """A connection whose Host is the default root, with the key in Login and the secret in Password
    (``checkpoint_rooted``, which the DAG ``root_from_connection`` uses)."""
    connection = {
        "conn_type": "checkpoint_storage",
        "host": str(tmp_path / "root"),
        "login": "AKIA-TEST-KEY",
        "password": "not-a-real-secret",
        "extra": {"client_kwargs": {"region_name": "eu-west-1"}},
    }
    os.environ["AIRFLOW_CONN_CHECKPOINT_ROOTED"] = json.dumps(connection)
    yield tmp_path / "root"
    del os.environ["AIRFLOW_CONN_CHECKPOINT_ROOTED"]


def load_dag(dag_id: str):
    """The DAG with ``dag_id`` from the DAGs folder, parsed the way the DAG processor parses it."""
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(DAGS_FOLDER))
    assert not bag.import_errors, bag.import_errors
    return bag.dags[dag_id]


def task_states(dag_run) -> dict[str, str]:
    return {ti.task_id: str(ti.state) for ti in dag_run.get_task_instances()}


def xcom(dag_run, task_id: str, key: str = "return_value"):
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        row = session.scalars(
            XComModel.get_many(run_id=dag_run.run_id, dag_ids=dag_run.dag_id, task_ids=task_id, key=key)
        ).first()
        return XComModel.deserialize_value(row) if row is not None else None


def timed_on_kill(monkeypatch) -> list[float]:
    """Time every call of the job operator's ``on_kill`` (Airflow 3 SIGKILLs a task about 5 s after SIGTERM):
    the list the seconds of each call go into."""
    from airflow_checkpoint_provider.operators import CheckpointedStreamingJobOperator

    took: list[float] = []
    on_kill = CheckpointedStreamingJobOperator.on_kill

    def timed(self) -> None:
        started = time.monotonic()
        on_kill(self)
        took.append(time.monotonic() - started)

    monkeypatch.setattr(CheckpointedStreamingJobOperator, "on_kill", timed)
    return took


class Later(threading.Thread):
    """Run ``action`` in the background once ``condition`` holds (for kills and late arrivals)."""

    def __init__(self, condition, action, timeout: float = 240):
        super().__init__(daemon=True)
        self.condition, self.action, self.timeout = condition, action, timeout
        self.done = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        deadline = time.monotonic() + self.timeout
        try:
            while time.monotonic() < deadline:
                if self.condition():
                    self.action()
                    return
                time.sleep(0.2)
            raise TimeoutError("condition never held")
        except BaseException as exc:  # reported by the test
            self.error = exc
        finally:
            self.done.set()
