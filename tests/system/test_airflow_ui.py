"""The Airflow UI path, as a user meets it: a real Airflow on a loopback port, driven in headless Chromium.

The API server, scheduler, DAG processor and triggerer run as their own processes over the example DAGs
(``tests/support/local_airflow.py``). Each example DAG's Trigger dialog must validate with its defaults (a DAG
with the old empty-string param shows that the check can fail). Then, each triggered from its form with its
defaults: ``scheduled_streaming`` runs to success and makes a checkpoint, and its task log page shows the
runtime's checkpoint lines; ``restore_automation`` starts its continuous job, whose first checkpoint a
deferrable sensor awaits in the triggerer; ``upgrade_with_savepoint``, triggered while that job runs,
stops it with a savepoint, runs the new version from it and confirms its first checkpoint;
``rescale_with_savepoint``, with another job's name and a new partition count typed into its form while that
job runs on RocksDB, stops it with a savepoint, rescales it, runs it at the new count and confirms its first
checkpoint. Screenshots of each form and of the succeeded grids go to ``$UI_SCREENSHOTS``
(``docs/screenshots`` for the docs).
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from spark_checkpoint_runtime.layout import ControlChannel, JobFolder
from tests.support.helpers import (
    REPO,
    Landing,
    completed_checkpoints,
    continuous_counts_args,
    final_counts,
    kill_group,
    start_module,
    wait_for,
)
from tests.support.local_airflow import LocalAirflow
from tests.support.state_matrix import STORES
from tests.support.ui import Screenshots, fill_form, headless_chromium, open_trigger_dialog, wait_until

pytestmark = [pytest.mark.spark, pytest.mark.slow]

EXAMPLE_DAGS = (
    "scheduled_streaming",
    "restore_automation",
    "upgrade_with_savepoint",
    "rescale_with_savepoint",
    "transform_state_with_savepoint",
)
# The shape of the bug the UI review found: a required string param whose default is empty.
EMPTY_DEFAULT_DAG = """
from datetime import datetime

from airflow.providers.standard.operators.empty import EmptyOperator
from airflow.sdk import DAG, Param

params = {"max_age": Param("", type="string")}
with DAG(dag_id="empty_default", schedule=None, start_date=datetime(2026, 1, 1), params=params):
    EmptyOperator(task_id="nothing")
"""
FINISHED = ("success", "failed")


def trigger_from_form(browser, airflow: LocalAirflow, dag_id: str, typed: dict[str, str] | None = None) -> str:
    """Type ``typed`` (param name to text) into the Trigger dialog's form, the defaults elsewhere, and click its
    button; return the run id it created."""
    before = {run for run, _ in airflow.dag_runs(dag_id)}
    button = open_trigger_dialog(browser, airflow.url, dag_id)
    fill_form(browser, typed or {})
    button.click()

    def manual_run():
        return next((r for r, _ in airflow.dag_runs(dag_id) if r not in before and r.startswith("manual")), None)

    return airflow.wait_for(manual_run, 30, f"the run of {dag_id} the form triggered")


def show_grid(browser, airflow: LocalAirflow, dag_id: str, shots: Screenshots) -> None:
    """The DAG's page with its grid of runs, as a screenshot."""
    from selenium.webdriver.common.by import By

    browser.get(f"{airflow.url}/dags/{dag_id}")
    wait_until(lambda: browser.find_element(By.CSS_SELECTOR, "button[aria-label='Trigger Dag']"), 60, "the page")
    time.sleep(3)  # the grid fills in after the page
    shots.take(browser, f"grid-{dag_id}")


def test_example_dags_trigger_from_their_forms_and_run_under_the_scheduler(tmp_path: Path):
    dags, demo = tmp_path / "dags", tmp_path / "demo"
    dags.mkdir()
    for source in (REPO / "dags").glob("*.py"):
        (dags / source.name).symlink_to(source)
    (dags / "empty_default.py").write_text(EMPTY_DEFAULT_DAG)
    landing = Landing(demo / "landing")
    landing.add_files(3)
    job = demo / "checkpoints" / "event-counts"  # the job all three example DAGs default to
    airflow = LocalAirflow(tmp_path / "airflow-home", dags, {"CHECKPOINT_DEMO_HOME": str(demo)})
    shots = Screenshots(tmp_path / "screenshots")
    browser = None
    try:
        airflow.start()
        parsed = "SELECT count(*) FROM dag WHERE dag_id IN ('empty_default', {})".format(
            ", ".join(f"'{d}'" for d in EXAMPLE_DAGS)
        )
        airflow.wait_for(lambda: airflow.query(parsed)[0][0] == len(EXAMPLE_DAGS) + 1, 180, "the DAGs to be parsed")
        browser = headless_chromium()

        # Every example DAG's dialog validates with its defaults; the empty-default DAG's does not.
        assert not open_trigger_dialog(browser, airflow.url, "empty_default").is_enabled(), "the check can fail"
        for dag_id in EXAMPLE_DAGS:
            assert open_trigger_dialog(browser, airflow.url, dag_id).is_enabled(), f"{dag_id}'s form does not validate"
            shots.take(browser, f"trigger-form-{dag_id}")

        # scheduled_streaming from its form: it runs to success under the scheduler and checkpoints.
        run_id = trigger_from_form(browser, airflow, "scheduled_streaming")
        state, tasks = airflow.finished_run("scheduled_streaming", run_id, 420)
        assert state == "success", (tasks, airflow.log_tail("scheduler"))
        assert tasks == {"run_job": "success", "confirm_checkpoint": "success", "retention": "success"}, tasks
        assert sorted(job.glob("chk-*/_metadata")), "the form-triggered run made a checkpoint"
        show_grid(browser, airflow, "scheduled_streaming", shots)

        # The task's log in the UI shows the runtime's one-line checkpoint messages.
        browser.get(f"{airflow.url}/dags/scheduled_streaming/runs/{run_id}/tasks/run_job")
        wait_until(lambda: "Completed checkpoint" in browser.page_source, 60, "the task log in the UI")

        # restore_automation from its form: the continuous job starts (from scheduled_streaming's checkpoint), and
        # first_checkpoint waits in the triggerer, holding no worker slot, until this run's first checkpoint.
        landing.add_files(3)
        restore_run = trigger_from_form(browser, airflow, "restore_automation")
        seen: set[str] = set()
        triggers = (
            "SELECT t.classpath FROM task_instance ti JOIN trigger t ON t.id = ti.trigger_id "
            "WHERE ti.dag_id = 'restore_automation' AND ti.run_id = ? AND ti.task_id = 'first_checkpoint'"
        )

        def first_checkpoint_state():
            state = airflow.task_states("restore_automation", restore_run).get("first_checkpoint")
            seen.add(state)
            seen.update(classpath for (classpath,) in airflow.query(triggers, restore_run))
            return state in FINISHED and state

        assert airflow.wait_for(first_checkpoint_state, 300, "first_checkpoint") == "success", seen
        # It waited as a deferred task, in the triggerer, with our trigger.
        assert {"deferred", "airflow_checkpoint_provider.triggers.checkpoint.CheckpointTrigger"} <= seen, seen
        assert airflow.task_states("restore_automation", restore_run)["run_job"] == "running"

        # upgrade_with_savepoint from its form while that job runs: savepoint (stopping it), new version, confirm.
        landing.add_files(2)
        upgrade_run = trigger_from_form(browser, airflow, "upgrade_with_savepoint")
        state, tasks = airflow.finished_run("upgrade_with_savepoint", upgrade_run, 420)
        assert state == "success", (tasks, airflow.log_tail("scheduler"))
        state, restore_tasks = airflow.finished_run("restore_automation", restore_run, 120)
        assert restore_tasks == {
            "run_job": "success",  # stopped by the savepoint: exit 0, output committed
            "first_checkpoint": "success",
            "watch_health": "success",  # it watched the job until the savepoint stopped it
            "stop_stalled_job": "skipped",
            "restore_from_latest": "skipped",
        }, restore_tasks
        savepoint = airflow.xcom("upgrade_with_savepoint", upgrade_run, "take_savepoint")
        assert "/event-counts/savepoints/savepoint-" in savepoint, savepoint
        newest = max(job.glob("chk-*/_metadata"), key=lambda p: int(p.parent.name.split("-")[1]))
        restored_from = json.loads(newest.read_text())["restored_from"]
        assert restored_from["kind"] == "savepoint" and restored_from["path"] == savepoint, restored_from
        # Three DAGs, four runs of one job, one savepoint between two versions: every event counted once.
        assert final_counts(demo / "output") == landing.counts_by_key()
        show_grid(browser, airflow, "restore_automation", shots)
        show_grid(browser, airflow, "upgrade_with_savepoint", shots)

        # rescale_with_savepoint from its form, another job and partition count typed in: the job runs on RocksDB
        # (the store Spark rescales) at 4 partitions; the DAG stops it with a savepoint, rescales its state to 6,
        # runs it from the rescaled savepoint at 6 and confirms its first checkpoint.
        root, rocks_output = demo / "checkpoints", demo / "rescaled-output"
        args = continuous_counts_args("rocks-counts", root, tmp_path / "rocks-work", landing, rocks_output)
        conf = {**STORES["rocksdb"], "spark.sql.shuffle.partitions": "4"}  # what the DAG's run_rescaled sets
        with open(tmp_path / "rocks-counts.log", "w") as log:  # a file: nobody reads a pipe while the DAG runs
            rocks = start_module(args, conf, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            control = ControlChannel(JobFolder(str(root), "rocks-counts"))
            running = lambda: completed_checkpoints(root, "rocks-counts") and control.live_runs()  # noqa: E731
            wait_for(running, 240, "the RocksDB job", rocks)
            typed = {"job_name": "rocks-counts", "output": str(rocks_output), "partitions": "6"}
            rescale_run = trigger_from_form(browser, airflow, "rescale_with_savepoint", typed)
            state, tasks = airflow.finished_run("rescale_with_savepoint", rescale_run, 600)
            assert state == "success", (tasks, airflow.log_tail("scheduler"))
            assert rocks.wait(timeout=120) == 0, "stopped by the savepoint: exit 0"
        finally:
            kill_group(rocks)  # only if a step above failed: it has exited otherwise
        (run_conf,) = airflow.query("SELECT conf FROM dag_run WHERE run_id = ?", rescale_run)[0]
        assert json.loads(run_conf)["partitions"] == 6, run_conf  # the form sent the typed count, as an integer
        rescaled = airflow.xcom("rescale_with_savepoint", rescale_run, "rescale")
        storage = JobFolder(str(root), "rocks-counts")
        newest = storage.checkpoints.read(max(completed_checkpoints(root, "rocks-counts")))
        assert newest.restored_from["path"] == rescaled, newest.restored_from
        assert newest.fingerprint["pinned_confs"]["spark.sql.shuffle.partitions"] == "6"
        assert storage.resolve_snapshot(rescaled).metadata.restored_from["rescaled_from_partitions"] == 4
        assert final_counts(rocks_output) == landing.counts_by_key(), "the counts continued exactly across the rescale"
        show_grid(browser, airflow, "rescale_with_savepoint", shots)
    finally:
        if browser is not None:
            browser.quit()
        airflow.stop()
