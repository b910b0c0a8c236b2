"""``bash scripts/demo.sh --ui`` as a user runs it: its Airflow answers at the URL it prints, events keep
landing, a DAG triggered there runs its Spark job, and Ctrl-C stops everything it started, that job too.

``demo.sh --ui`` runs ``scripts/setup.sh`` (done by the test command already), then ``scripts/ui_demo.py``
with the demo's environment; this test starts ``ui_demo.py`` with the same environment.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import psutil
import pytest

from spark_checkpoint_runtime.layout import JobFolder, LeaseFiles
from tests.support.helpers import REPO, VENV_BIN

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def until(condition, timeout: float, what: str, demo: subprocess.Popen):
    """``condition()``'s first true value; fails if the demo exits or ``timeout`` seconds pass first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        assert demo.poll() is None, f"the demo exited with {demo.returncode} while waiting for {what}"
        time.sleep(0.5)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def test_the_ui_demo_prints_its_url_lands_events_and_stops_everything_on_ctrl_c(tmp_path: Path):
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")},
        "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        "CHECKPOINT_DEMO_HOME": str(tmp_path),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
    }
    demo = subprocess.Popen(
        [sys.executable, str(REPO / "scripts" / "ui_demo.py")],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # Ctrl-C reaches the terminal's foreground group: here, the demo alone
        # A background pytest may inherit SIGINT ignored; a terminal's demo has Python's Ctrl-C handler.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(demo.stdout), daemon=True)
    reader.start()
    home, family = tmp_path / "ui", []
    try:
        url_line = until(
            lambda: next((line for line in lines if line.startswith("Airflow UI: ")), None), 300, "the URL", demo
        )
        url = url_line.split()[2]
        assert url.startswith("http://127.0.0.1:"), url_line
        with urllib.request.urlopen(f"{url}/api/v2/monitor/health", timeout=10) as answer:
            assert json.load(answer)["metadatabase"]["status"] == "healthy"
        assert "no login" in url_line and any("Ctrl-C" in line for line in lines), lines

        # The DAGs start paused, as a user finds them; unpause and trigger one as the UI would.
        cli = {**env, "AIRFLOW_HOME": str(home / "airflow-home")}
        database = home / "airflow-home" / "airflow.db"

        def parsed() -> bool:
            with sqlite3.connect(database) as db:
                return bool(db.execute("SELECT 1 FROM dag WHERE dag_id = 'restore_automation'").fetchall())

        until(parsed, 180, "the example DAGs to be parsed", demo)
        for command in (("dags", "unpause", "restore_automation"), ("dags", "trigger", "restore_automation")):
            done = subprocess.run([str(VENV_BIN / "airflow"), *command], env=cli, capture_output=True, text=True)
            assert done.returncode == 0, done.stderr[-2000:]
        lease = LeaseFiles(JobFolder(str(home / "checkpoints"), "event-counts"))
        grant = until(lambda: lease.unreleased_grant(), 300, "the triggered run's Spark job", demo)
        driver = psutil.Process(grant["pid"])
        landing = home / "landing"
        first = len(list(landing.glob("events-*.json")))
        until(lambda: len(list(landing.glob("events-*.json"))) > first, 30, "events to keep landing", demo)

        family = psutil.Process(demo.pid).children(recursive=True) + [driver, *driver.parents()[:1]]
        demo.send_signal(signal.SIGINT)  # what Ctrl-C sends
        assert demo.wait(timeout=200) == 0
    finally:
        if not family and demo.poll() is None:  # failed before Ctrl-C: everything under the demo must go too
            family = psutil.Process(demo.pid).children(recursive=True)
        if demo.poll() is None:
            os.killpg(demo.pid, signal.SIGKILL)
        left = []
        for process in family:
            try:
                if process.is_running() and process.status() != psutil.STATUS_ZOMBIE:
                    left.append(" ".join(process.cmdline())[:200])
                    process.kill()  # not to leak it into the rest of the suite
            except psutil.NoSuchProcess:
                pass
    reader.join(timeout=10)
    assert any("stopping Airflow" in line for line in lines), lines[-20:]
    assert not left, f"still running after Ctrl-C: {left}"
