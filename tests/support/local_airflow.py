"""A real local Airflow on a loopback port: API server, scheduler, DAG processor and triggerer, each its own process.

SQLite and the LocalExecutor in ``AIRFLOW_HOME``, as ``airflow standalone`` runs them. The execution API URL
matches the port (on another port than 8080 tasks otherwise fail before they start, with nothing in their
log), every user is an admin (the simple auth manager's all-admins mode: no login), new DAGs are unpaused, and
new DAG files are parsed within seconds. ``scripts/demo.sh --ui`` and the UI tests use it; tests drive it
through its CLI and read its SQLite database directly.
"""

from __future__ import annotations

import atexit
import functools
import json
import os
import secrets
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil

REPO = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent
PROCESSES = ("api-server", "scheduler", "dag-processor", "triggerer")
# What ``airflow db migrate`` makes of an empty SQLite depends on these settings only (the auth manager adds its
# own tables; the log template and the default pool are rows it writes): one migrated database per combination
# is copied into each new home of this process.
SCHEMA_SETTINGS = (
    "AIRFLOW__CORE__AUTH_MANAGER",
    "AIRFLOW__CORE__MULTI_TEAM",
    "AIRFLOW__LOGGING__LOG_FILENAME_TEMPLATE",
    "AIRFLOW__CORE__DEFAULT_POOL_TASK_SLOT_COUNT",
)
_migrated_templates: dict[tuple[str, ...], Path] = {}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@functools.cache
def _templates_folder() -> Path:
    """Where this process keeps its migrated databases; removed when it exits."""
    folder = Path(tempfile.mkdtemp(prefix="local-airflow-db-"))
    atexit.register(shutil.rmtree, folder, True)
    return folder


class LocalAirflow:
    """Start with ``start()``, stop with ``stop()`` (also on failure: everything it started, nothing else).

    ``base_env`` is the environment the processes start from (this process's by default); ``extra_env`` goes
    on top of the settings above.
    """

    def __init__(
        self,
        home: Path,
        dags_folder: Path,
        extra_env: dict[str, str] | None = None,
        base_env: dict[str, str] | None = None,
        port: int | None = None,
        path: str = "",
    ):
        self.home = home
        self.dags_folder = dags_folder
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}{path}"  # path: Airflow served under a prefix ([api] base_url)
        self.processes: dict[str, subprocess.Popen] = {}
        self.env = {
            **(base_env if base_env is not None else os.environ),
            "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}",
            "PYSPARK_PYTHON": sys.executable,
            "PYSPARK_DRIVER_PYTHON": sys.executable,
            "PYTHONPATH": os.pathsep.join([str(REPO), str(dags_folder)]),
            "AIRFLOW_HOME": str(home),
            "AIRFLOW__CORE__DAGS_FOLDER": str(dags_folder),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
            "AIRFLOW__CORE__PARALLELISM": "4",
            "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False",
            "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{self.url}/execution/",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "True",
            "AIRFLOW__API__HOST": "127.0.0.1",
            "AIRFLOW__API__PORT": str(self.port),
            "AIRFLOW__API__BASE_URL": self.url,
            "AIRFLOW__API_AUTH__JWT_SECRET": "test-secret-for-a-loopback-airflow",
            "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "3",
            # New files are found every 3 s; a file already parsed is parsed again only after 5 min: the DAG
            # files here never change once Airflow runs, and every parse is a process importing the provider,
            # CPU the Spark jobs under test need on two cores.
            "AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL": "300",
            "AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC": "1",
            "AIRFLOW__LOGGING__LOGGING_LEVEL": "INFO",
            "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local[2]"}),
            **(extra_env or {}),
        }

    def airflow(self, *args: str, timeout: float = 180) -> subprocess.CompletedProcess:
        """Run an ``airflow`` CLI command against this instance."""
        return subprocess.run(
            [str(VENV_BIN / "airflow"), *args], env=self.env, capture_output=True, text=True, timeout=timeout
        )

    def start(self, processes: tuple[str, ...] = PROCESSES) -> None:
        self.home.mkdir(parents=True, exist_ok=True)
        self.migrate()
        for name in processes:
            self.start_process(name)
        self.wait_for(self._healthy, 120, "the API server to answer")

    def migrate(self) -> None:
        """Give this home a migrated database. A new home gets a copy of the database this process migrated
        first with the same schema settings, not a migration of its own (a process importing Airflow and
        creating every table, on the cores the Spark jobs under test need); a home that has a database, or
        keeps it elsewhere, is migrated by Airflow."""
        database = self.home / "airflow.db"
        if "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN" in self.env or database.exists():
            self._airflow_migrate()
            return
        key = tuple(self.env.get(name, "") for name in SCHEMA_SETTINGS)
        if key in _migrated_templates:
            shutil.copyfile(_migrated_templates[key], database)
            self._write_keys()
            return
        self._airflow_migrate()
        if not Path(f"{database}-wal").exists():  # the whole database is in the one file
            kept = _templates_folder() / f"{len(_migrated_templates)}.db"
            shutil.copyfile(database, kept)
            _migrated_templates[key] = kept

    def _write_keys(self) -> None:
        """The ``airflow.cfg`` of a home whose database was copied: the keys its components must share. Airflow's
        CLI writes the file, with keys of its own, the first time it runs in a home; the components started at
        once would each write one with different keys (the triggerer could not read what the API server
        encrypted for it). Everything else is Airflow's default for this home, as in the file it writes."""
        from cryptography.fernet import Fernet

        fernet, secret = Fernet.generate_key().decode(), secrets.token_urlsafe(16)
        (self.home / "airflow.cfg").write_text(f"[core]\nfernet_key = {fernet}\n\n[api]\nsecret_key = {secret}\n")

    def _airflow_migrate(self) -> None:
        migrated = self.airflow("db", "migrate", timeout=300)
        assert migrated.returncode == 0, migrated.stderr[-3000:]

    def start_process(self, name: str) -> None:
        """Start one Airflow component (``scheduler``, ``triggerer``, ...) in a process group of its own."""
        with open(self.home / f"{name}.log", "ab") as log:  # the child keeps its own copy of the descriptor
            command = [str(VENV_BIN / "airflow"), name]
            if name == "api-server":
                command += ["--host", "127.0.0.1", "--port", str(self.port)]
            self.processes[name] = subprocess.Popen(
                command, env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )

    def stop_process(self, name: str, timeout: float = 60) -> int:
        """Stop one component as a deployment does (SIGTERM to its group, SIGKILL past ``timeout``); its exit
        code."""
        process = self.processes.pop(name)
        os.killpg(process.pid, signal.SIGTERM)
        try:
            return process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            return process.wait(timeout=30)

    def _healthy(self) -> bool:
        self.check_alive()
        try:
            with urllib.request.urlopen(f"{self.url}/api/v2/monitor/health", timeout=2) as answer:
                return answer.status == 200
        except OSError:
            return False

    def check_alive(self) -> None:
        for name, process in self.processes.items():
            assert process.poll() is None, f"airflow {name} exited ({process.returncode}):\n{self.log_tail(name)}"

    def log_tail(self, name: str, size: int = 3000) -> str:
        path = self.home / f"{name}.log"
        return path.read_text(errors="replace")[-size:] if path.exists() else ""

    def wait_for(self, condition: Callable[[], Any], timeout: float, what: str) -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = condition()
            if value:
                return value
            time.sleep(0.5)
        logs = "\n".join(f"--- {name}\n{self.log_tail(name, 1500)}" for name in self.processes)
        raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}\n{logs}")

    def query(self, sql: str, *params: Any) -> list[tuple]:
        """Read the instance's SQLite database."""
        with sqlite3.connect(self.home / "airflow.db", timeout=30) as db:
            return db.execute(sql, params).fetchall()

    def dag_runs(self, dag_id: str) -> list[tuple[str, str]]:
        """(run id, state) of every run of ``dag_id``, oldest first."""
        return self.query("SELECT run_id, state FROM dag_run WHERE dag_id = ? ORDER BY id", dag_id)

    def task_states(self, dag_id: str, run_id: str) -> dict[str, str]:
        """Task id -> state of one DAG run."""
        sql = "SELECT task_id, state FROM task_instance WHERE dag_id = ? AND run_id = ?"
        return dict(self.query(sql, dag_id, run_id))

    def xcom(self, dag_id: str, run_id: str, task_id: str, key: str = "return_value") -> Any:
        """A task's XCom value in this run, decoded from the database's JSON."""
        sql = "SELECT value FROM xcom WHERE dag_id = ? AND run_id = ? AND task_id = ? AND key = ?"
        return json.loads(self.query(sql, dag_id, run_id, task_id, key)[0][0])

    def finished_run(self, dag_id: str, run_id: str, timeout: float) -> tuple[str, dict[str, str]]:
        """Wait for a DAG run to end; its state and its tasks' states."""
        sql = "SELECT state FROM dag_run WHERE dag_id = ? AND run_id = ?"
        state = self.wait_for(
            lambda: (s := self.query(sql, dag_id, run_id)[0][0]) in ("success", "failed") and s,
            timeout,
            f"run {run_id}",
        )
        return state, self.task_states(dag_id, run_id)

    def stop(self, grace: float = 130) -> None:
        """Stop every process this started and everything under them, Spark jobs of running tasks included.

        Each process's group gets SIGTERM, then SIGKILL after 30 s. Airflow runs each task in a process group
        of its own, so a task (and the spark-submit under it) is not in the group of the process that started
        it: whatever of the processes' descendants outlives their groups gets SIGTERM too (a job stops
        gracefully on it: finishes its batch, checkpoints, commits), then SIGKILL after ``grace`` seconds.
        """
        family: list[psutil.Process] = []
        for process in self.processes.values():
            try:
                family += psutil.Process(process.pid).children(recursive=True)
            except psutil.NoSuchProcess:
                pass
        for process in self.processes.values():
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        deadline = time.monotonic() + 30
        for process in self.processes.values():
            try:
                process.wait(timeout=max(1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=30)
        self.processes.clear()
        survivors = [p for p in family if _alive(p)]
        for process in survivors:
            _signal(process, signal.SIGTERM)
        deadline = time.monotonic() + grace  # past the job operator's default stop timeout (2 min)
        while any(_alive(p) for p in survivors) and time.monotonic() < deadline:
            time.sleep(0.5)
        for process in survivors:
            if _alive(process):
                _signal(process, signal.SIGKILL)


def _alive(process: psutil.Process) -> bool:
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _signal(process: psutil.Process, number: int) -> None:
    try:
        process.send_signal(number)
    except psutil.NoSuchProcess:
        pass
