"""The "Checkpoints" tab (a React app plugin) on a DAG's and a task instance's page, with Airflow served under a
path prefix (``[api] base_url`` ending in ``/airflow``): a real API server on loopback, driven in Chromium.

The job folder holds format-valid checkpoints written through the format module; no Spark runs (what the tab
shows of a real job is ``test_checkpoint_pages.py``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spark_checkpoint_runtime.layout import JobFolder
from tests.support.helpers import write_checkpoint
from tests.support.local_airflow import LocalAirflow
from tests.support.ui import Screenshots, headless_chromium, wait_until
from tests.system.test_checkpoint_pages import PASSWORDS, log_in, request, token_for

pytestmark = [pytest.mark.slow]

DAG = """
from datetime import datetime

from airflow.sdk import DAG

from airflow_checkpoint_provider.operators import CheckpointedStreamingJobOperator

with DAG("orders_job", schedule=None, start_date=datetime(2026, 1, 1)):
    CheckpointedStreamingJobOperator(
        task_id="run_job", job_name="orders", checkpoint_root={root!r}, pipeline="examples.pipelines:running_counts"
    )
"""


def _checkpoints_link(browser, href_part: str):
    """The "Checkpoints" link whose href holds ``href_part`` (the navigation entry and each tab are one)."""
    from selenium.webdriver.common.by import By

    for link in browser.find_elements(By.TAG_NAME, "a"):
        if link.text.strip() == "Checkpoints" and href_part in (link.get_attribute("href") or ""):
            return link
    return None


def test_the_tab_works_under_a_path_prefix_on_dag_and_task_instance_pages(tmp_path: Path):
    from selenium.webdriver.common.by import By

    root, home, dags = tmp_path / "root", tmp_path / "airflow-home", tmp_path / "dags"
    dags.mkdir()
    (dags / "orders_job.py").write_text(DAG.format(root=str(root)))
    for checkpoint_id in (1, 2, 3):
        write_checkpoint(JobFolder(str(root), "orders"), checkpoint_id, [])
    home.mkdir()
    (home / "simple_auth_manager_passwords.json.generated").write_text(json.dumps(PASSWORDS))
    airflow = LocalAirflow(
        home,
        dags,
        {
            "AIRFLOW__CHECKPOINT_PROVIDER__ROOTS": str(root),
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "False",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": "admin:admin,viewer:viewer",
        },
        path="/airflow",
    )
    shots = Screenshots(tmp_path / "screenshots")
    browser = None
    try:
        airflow.start(("api-server",))
        reserialized = airflow.airflow("dags", "reserialize")
        assert reserialized.returncode == 0, reserialized.stderr[-2000:]
        # A run, so the task instance has a page (no scheduler runs it: the tab reads the DAG, not the run).
        admin = token_for(airflow, "admin")
        body = json.dumps({"logical_date": None}).encode()
        status, answer = request(
            f"{airflow.url}/api/v2/dags/orders_job/dagRuns",
            token=admin,
            method="POST",
            data=body,
            **{"Content-Type": "application/json"},
        )
        assert status in (200, 201), (status, answer[-1000:])
        run_id = json.loads(answer)["dag_run_id"]

        browser = headless_chromium()
        log_in(browser, airflow, "admin", "/airflow/dags/orders_job")
        tab = "/airflow/dags/orders_job/plugin/dag-checkpoints"
        wait_until(lambda: _checkpoints_link(browser, tab), 60, "the DAG's Checkpoints tab").click()
        row = wait_until(
            lambda: browser.find_element(By.CSS_SELECTOR, "#checkpoints-tab tr[data-job='orders']"), 60, "the job"
        )
        assert "/airflow/dags/orders_job/plugin/dag-checkpoints" in browser.current_url, browser.current_url
        assert "chk-3" in row.text
        shots.take(browser, "checkpoints-tab-under-a-prefix")
        row.find_element(By.TAG_NAME, "a").click()
        wait_until(lambda: browser.find_element(By.ID, "checkpoints"), 60, "the job page")
        assert browser.current_url.endswith("/airflow/plugin/checkpoints/jobs/0/orders"), browser.current_url
        assert "chk-3" in browser.find_element(By.ID, "restore-point").text

        # The task instance's page has the tab too, naming the task's job.
        browser.get(f"{airflow.url}/dags/orders_job/runs/{run_id}/tasks/run_job")
        tab = f"/airflow/dags/orders_job/runs/{run_id}/tasks/run_job/plugin/task-checkpoints"
        wait_until(lambda: _checkpoints_link(browser, tab), 60, "the task instance's Checkpoints tab").click()
        wait_until(
            lambda: browser.find_element(By.CSS_SELECTOR, "#checkpoints-tab tr[data-job='orders']"), 60, "the job"
        )
        assert "task 'run_job' of DAG 'orders_job'" in browser.find_element(By.ID, "scope").text
        shots.take(browser, "checkpoints-task-instance-tab")

        # The navigation entry shows the job list under the prefix too, drawn by Airflow's UI (no frame); its
        # row leads to the job page, whose "All jobs" leads back.
        wait_until(
            lambda: _checkpoints_link(browser, "/airflow/plugin/checkpoints"), 60, "the navigation entry"
        ).click()
        row = wait_until(
            lambda: browser.find_element(By.CSS_SELECTOR, "#checkpoint-jobs tr[data-job='orders']"), 60, "the list"
        )
        assert not browser.find_elements(By.TAG_NAME, "iframe")
        assert "/airflow/plugin/checkpoints" in browser.current_url, browser.current_url
        row.find_element(By.TAG_NAME, "a").click()
        wait_until(lambda: browser.find_element(By.ID, "checkpoints"), 60, "the job page from the list")
        browser.find_element(By.LINK_TEXT, "All jobs").click()
        wait_until(lambda: browser.find_element(By.ID, "checkpoint-jobs"), 60, "the list again")
        assert browser.current_url.rstrip("/").endswith("/airflow/plugin/checkpoints"), browser.current_url
    finally:
        if browser is not None:
            browser.quit()
        airflow.stop()
