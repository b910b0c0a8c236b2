"""The Airflow UI path, as a user meets it: a real Airflow on a loopback port, driven in headless Chromium.

The API server, scheduler, DAG processor and triggerer run as their own processes over the example DAGs
(``examples/local_airflow.py``). Each example DAG's Trigger dialog must validate with its defaults (a DAG
with the old empty-string param shows that the check can fail), ``scheduled_streaming`` triggered from the
form must run to success with its deferrable sensor in the triggerer and make a checkpoint, and the task's
log page must show the runtime's checkpoint lines.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

from examples.local_airflow import LocalAirflow
from tests.conftest import REPO, Landing

pytestmark = [pytest.mark.spark, pytest.mark.slow]

EXAMPLE_DAGS = ("scheduled_streaming", "restore_automation", "upgrade_with_savepoint")
# The shape of the bug the UI review found: a required string param whose default is empty.
EMPTY_DEFAULT_DAG = """
from datetime import datetime

from airflow.providers.standard.operators.empty import EmptyOperator
from airflow.sdk import DAG, Param

params = {"max_age": Param("", type="string")}
with DAG(dag_id="empty_default", schedule=None, start_date=datetime(2026, 1, 1), params=params):
    EmptyOperator(task_id="nothing")
"""


def headless_chromium():
    """Debian's chromium and chromedriver (``.ci/run`` installs them), through selenium."""
    from selenium import webdriver

    chromium, driver = shutil.which("chromium"), shutil.which("chromedriver")
    assert chromium and driver, "the UI tests need chromium and chromedriver: apt-get install chromium chromium-driver"
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1400,1000"):
        options.add_argument(argument)
    return webdriver.Chrome(service=webdriver.ChromeService(driver), options=options)


def wait_until(condition, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            value = condition()
        except Exception:  # noqa: BLE001 - the page is still rendering
            value = None
        if value:
            return value
        time.sleep(0.3)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def open_trigger_dialog(browser, url: str, dag_id: str):
    """Open the DAG's page and its Trigger dialog; return the dialog's own Trigger button."""
    from selenium.webdriver.common.by import By

    browser.get(f"{url}/dags/{dag_id}")
    wait_until(
        lambda: browser.find_element(By.CSS_SELECTOR, "button[aria-label='Trigger Dag']"), 60, "the page"
    ).click()

    def dialog_trigger():
        dialogs = browser.find_elements(By.CSS_SELECTOR, "[role='dialog']")
        buttons = [b for d in dialogs for b in d.find_elements(By.TAG_NAME, "button") if b.text == "Trigger"]
        return buttons[0] if buttons else None

    wait_until(dialog_trigger, 30, f"the trigger dialog of {dag_id}")
    time.sleep(1)  # the form validates its fields once rendered
    return dialog_trigger()


def test_example_dags_trigger_from_their_forms_and_run_under_the_scheduler(tmp_path: Path):
    dags, demo = tmp_path / "dags", tmp_path / "demo"
    dags.mkdir()
    for source in (REPO / "dags").glob("*.py"):
        (dags / source.name).symlink_to(source)
    (dags / "empty_default.py").write_text(EMPTY_DEFAULT_DAG)
    landing = Landing(demo / "landing")
    landing.add_files(3)
    airflow = LocalAirflow(tmp_path / "airflow-home", dags, {"CHECKPOINT_DEMO_HOME": str(demo)})
    browser = None
    try:
        airflow.start()
        parsed = "SELECT count(*) FROM dag WHERE dag_id IN ('empty_default', {})".format(
            ", ".join(f"'{d}'" for d in EXAMPLE_DAGS)
        )
        airflow.wait_for(lambda: airflow.query(parsed)[0][0] == 4, 180, "the DAGs to be parsed")
        browser = headless_chromium()

        # Every example DAG's dialog validates with its defaults; the empty-default DAG's does not.
        assert not open_trigger_dialog(browser, airflow.url, "empty_default").is_enabled(), "the check can fail"
        for dag_id in EXAMPLE_DAGS:
            assert open_trigger_dialog(browser, airflow.url, dag_id).is_enabled(), f"{dag_id}'s form does not validate"

        # scheduled_streaming from its form, with the defaults: it runs to success under the scheduler.
        before = {run for run, _ in airflow.dag_runs("scheduled_streaming")}
        open_trigger_dialog(browser, airflow.url, "scheduled_streaming").click()

        def manual_run():
            runs = [
                (r, s) for r, s in airflow.dag_runs("scheduled_streaming") if r not in before and r.startswith("manual")
            ]
            return runs[0] if runs else None

        run_id, _ = airflow.wait_for(manual_run, 30, "the run the form triggered")
        states = "SELECT state FROM dag_run WHERE dag_id = 'scheduled_streaming' AND run_id = ?"
        state = airflow.wait_for(
            lambda: (s := airflow.query(states, run_id)[0][0]) in ("success", "failed") and s, 420, f"run {run_id}"
        )
        tasks = dict(airflow.query("SELECT task_id, state FROM task_instance WHERE run_id = ?", run_id))
        assert state == "success", (tasks, airflow.log_tail("scheduler"))
        checkpoints = sorted((demo / "checkpoints" / "event-counts").glob("chk-*/_metadata"))
        assert checkpoints, "the form-triggered run made a checkpoint"
        # The deferrable sensor finds the run's checkpoint at its first poke, so it never needs the triggerer here.
        assert tasks == {"run_job": "success", "confirm_checkpoint": "success", "retention": "success"}, tasks

        # The task's log in the UI shows the runtime's one-line checkpoint messages.
        browser.get(f"{airflow.url}/dags/scheduled_streaming/runs/{run_id}/tasks/run_job")
        wait_until(lambda: "Completed checkpoint" in browser.page_source, 60, "the task log in the UI")
    finally:
        if browser is not None:
            browser.quit()
        airflow.stop()
