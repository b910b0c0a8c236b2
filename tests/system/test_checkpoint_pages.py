"""The checkpoint pages (``/checkpoints/``) on a real Airflow API server, with auth on, in headless Chromium.

A real job runs continuously and checkpoints under a configured root. The test logs in through Airflow's
login page, checks the job list, takes a savepoint from the job page (and sees it written), stops the job,
damages its newest checkpoint and checks the history table against ``_metadata`` on disk, the damaged
checkpoint shown as damaged and the restore point moved to the one before. Anonymous requests are refused,
and a viewer may look but not take a savepoint. Screenshots of both pages go to ``$UI_SCREENSHOTS``.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import SimpleNamespace

import pytest

from airflow_checkpoint_provider.hooks.storage_options import storage_options_from
from spark_checkpoint_runtime.durations import format_bytes, format_duration
from spark_checkpoint_runtime.layout import JobFolder
from tests.support.helpers import REPO, Landing, completed_checkpoints, continuous_counts_args, start_module, wait_for
from tests.support.local_airflow import LocalAirflow
from tests.support.ui import Screenshots, headless_chromium, wait_until

pytestmark = [pytest.mark.spark, pytest.mark.slow]

PASSWORDS = {"admin": "admin-pw-for-tests", "viewer": "viewer-pw-for-tests"}
# A DAG whose task names the test's job through a param: its "Checkpoints" tab lists that job.
ORDERS_DAG = """
from datetime import datetime

from airflow.sdk import DAG, Param

from airflow_checkpoint_provider.operators import CheckpointedStreamingJobOperator

PARAMS = {{"job": Param("orders", type="string")}}
with DAG("orders_job", schedule=None, start_date=datetime(2026, 1, 1), params=PARAMS):
    CheckpointedStreamingJobOperator(
        task_id="run_job",
        job_name="{{{{ params.job }}}}",
        checkpoint_root={root!r},
        pipeline="examples.pipelines:running_counts",
    )
"""


def request(url: str, *, token: str | None = None, method: str = "GET", data: bytes | None = None, **headers):
    """(status, body) of one HTTP request, without following redirects."""

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args, **kwargs):
            return None

    if token:
        headers["Authorization"] = f"Bearer {token}"
    opener = urllib.request.build_opener(NoRedirect)
    try:
        with opener.open(urllib.request.Request(url, data=data, method=method, headers=headers), timeout=60) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode(errors="replace")


def token_for(airflow: LocalAirflow, user: str) -> str:
    body = json.dumps({"username": user, "password": PASSWORDS[user]}).encode()
    status, answer = request(
        f"{airflow.url}/auth/token", method="POST", data=body, **{"Content-Type": "application/json"}
    )
    assert status in (200, 201), answer
    return json.loads(answer)["access_token"]


def log_in(browser, airflow: LocalAirflow, user: str, next_path: str) -> None:
    """Airflow's own login page, as a person uses it."""
    from selenium.webdriver.common.by import By

    browser.get(f"{airflow.url}/auth/login?next={next_path}")
    wait_until(lambda: browser.find_element(By.CSS_SELECTOR, "input[name='username']"), 60, "the login page")
    browser.find_element(By.CSS_SELECTOR, "input[name='username']").send_keys(user)
    browser.find_element(By.CSS_SELECTOR, "input[name='password']").send_keys(PASSWORDS[user])
    browser.find_element(By.CSS_SELECTOR, "button[type='submit']").click()
    wait_until(lambda: next_path in browser.current_url and "login" not in browser.current_url, 60, "the login")


def add_connection_from_the_form(browser, airflow: LocalAirflow, shots: Screenshots) -> None:
    """Admin > Connections > Add Connection: a checkpoint_storage connection ``ck_form``, filled in and saved."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    def button(scope, text: str):
        return next((b for b in scope.find_elements(By.TAG_NAME, "button") if b.text == text), None)

    browser.get(f"{airflow.url}/connections")
    wait_until(lambda: button(browser, "Add Connection"), 60, "the Add Connection button").click()
    dialog = wait_until(lambda: browser.find_element(By.CSS_SELECTOR, "[role='dialog']"), 30, "the dialog")
    kind = dialog.find_element(By.CSS_SELECTOR, "input[role='combobox']")
    kind.send_keys("Checkpoint Storage")
    time.sleep(1)  # the list filters as it is typed
    kind.send_keys(Keys.ENTER)
    wait_until(lambda: dialog.find_element(By.NAME, "host"), 30, "the connection type's fields")
    shown = dialog.text
    for label in (
        "Checkpoint Storage (fsspec)",
        "Default checkpoint root (path or fsspec URL)",
        "Access key id (fsspec key)",
        "Secret access key (fsspec secret)",
    ):
        assert label in shown, (label, shown)
    assert "Port" not in shown.splitlines() and "Schema" not in shown.splitlines(), shown
    assert dialog.find_element(By.NAME, "host").get_attribute("placeholder") == "s3://bucket/checkpoints"
    assert dialog.find_element(By.NAME, "password").get_attribute("type") == "password"
    dialog.find_element(By.NAME, "connection_id").send_keys("ck_form")
    dialog.find_element(By.NAME, "host").send_keys("s3://bucket/ck")
    dialog.find_element(By.NAME, "login").send_keys("AKIAFORM")
    dialog.find_element(By.NAME, "password").send_keys("form-secret-1")
    button(dialog, "Extra Fields").click()
    endpoint = wait_until(lambda: dialog.find_element(By.NAME, "element_endpoint_url"), 30, "the Endpoint URL field")
    # The extra fields render one after another: wait for the last one's label too.
    wait_until(lambda: "Endpoint URL" in dialog.text and "Region" in dialog.text, 30, "the extra fields' labels")
    endpoint.send_keys("http://minio:9000")
    shots.take(browser, "checkpoint-storage-connection-form")
    button(dialog, "Save").click()
    saved = "SELECT conn_type FROM connection WHERE conn_id = 'ck_form'"
    airflow.wait_for(lambda: airflow.query(saved) == [("checkpoint_storage",)], 30, "the saved connection")


def table_rows(browser, table_id: str) -> dict[int, dict[str, str]]:
    """The rows of a history table by checkpoint id: column header to cell text."""
    from selenium.webdriver.common.by import By

    table = browser.find_element(By.ID, table_id)
    headers = [th.text for th in table.find_elements(By.TAG_NAME, "th")]
    rows = {}
    for tr in table.find_elements(By.CSS_SELECTOR, "tr[data-id]"):
        cells = [td.text for td in tr.find_elements(By.TAG_NAME, "td")]
        if cells and cells[0]:
            rows[int(cells[0])] = dict(zip(headers, cells, strict=True))
    return rows


def _brightness(css_color: str) -> float:
    """A computed CSS color's lightness from 0 to 1: ``oklch(L C H)`` (Chakra UI's tokens) or ``rgb(r, g, b)``."""
    inner = css_color[css_color.index("(") + 1 : css_color.index(")")]
    if css_color.startswith("oklch"):
        first = inner.split()[0]
        return float(first[:-1]) / 100 if first.endswith("%") else float(first)
    red, green, blue = (float(part) for part in inner.replace(",", " ").split()[:3])
    return (red + green + blue) / 3 / 255


def test_checkpoint_pages_show_history_savepoints_and_damage_behind_airflows_auth(tmp_path: Path, landing: Landing):
    root, work = tmp_path / "root", tmp_path / "work"
    job_folder = root / "orders"
    landing.add_files(6)
    args = continuous_counts_args("orders", root, work, landing, tmp_path / "out", batch_interval="300ms")
    job = start_module(
        args,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    home, dags = tmp_path / "airflow-home", tmp_path / "dags"
    home.mkdir()
    (home / "simple_auth_manager_passwords.json.generated").write_text(json.dumps(PASSWORDS))
    dags.mkdir()
    for example in (REPO / "dags").glob("*.py"):
        (dags / example.name).symlink_to(example)
    (dags / "orders_job.py").write_text(ORDERS_DAG.format(root=str(root)))
    airflow = LocalAirflow(
        home,
        dags,
        {
            "AIRFLOW__CHECKPOINT_PROVIDER__ROOTS": f"{root}",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "False",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": "admin:admin,viewer:viewer",
        },
    )
    shots = Screenshots(tmp_path / "screenshots")
    browser = None
    try:
        airflow.start(("api-server",))
        wait_for(lambda: len(completed_checkpoints(root, "orders")) >= 3, 240, "three checkpoints", job)

        # Auth is on: anonymous requests are refused; a browser without a login is sent to the login page.
        status, _ = request(f"{airflow.url}/checkpoints/api/jobs")
        assert status == 401, status
        # The pages of an older release's links are Airflow's own pages now.
        status, _ = request(f"{airflow.url}/checkpoints/jobs/0/orders")
        assert status == 307, status
        # The plugin is registered: its navigation entry and both tabs are one React app.
        admin = token_for(airflow, "admin")
        status, plugins = request(f"{airflow.url}/api/v2/plugins", token=admin)
        apps = [a for p in json.loads(plugins)["plugins"] for a in p["react_apps"]]
        assert {(a["destination"], a["url_route"]) for a in apps} >= {
            ("nav", "checkpoints"),
            ("dag", "dag-checkpoints"),
            ("task_instance", "task-checkpoints"),
        }, apps
        assert not [v for p in json.loads(plugins)["plugins"] for v in p["external_views"]], "no framed pages"

        # The job list, logged in through Airflow's login page: drawn by Airflow's UI, not in a frame.
        browser = headless_chromium()
        log_in(browser, airflow, "admin", "/plugin/checkpoints")
        from selenium.webdriver.common.by import By

        row = wait_until(lambda: browser.find_element(By.CSS_SELECTOR, "tr[data-job='orders']"), 60, "the job row")
        assert not browser.find_elements(By.TAG_NAME, "iframe"), "Airflow's own page, not a frame"
        assert row.find_element(By.CSS_SELECTOR, "[data-health]").text == "healthy"
        assert "holds the lease" in row.text
        shots.take(browser, "checkpoints-jobs")

        # The job page: take a savepoint; the job writes it.
        row.find_element(By.TAG_NAME, "a").click()
        wait_until(lambda: browser.find_element(By.ID, "take-savepoint"), 60, "the savepoint button").click()
        message = wait_until(lambda: browser.find_element(By.ID, "message").text, 60, "the request's message")
        assert "Savepoint requested" in message
        assert browser.current_url.endswith("/plugin/checkpoints/jobs/0/orders"), browser.current_url
        wait_for(lambda: list(job_folder.glob("savepoints/savepoint-ui-admin-*/_metadata")), 120, "savepoint", job)
        browser.refresh()
        savepoints = wait_until(lambda: table_rows(browser, "savepoints"), 30, "the savepoints table")
        saved = json.loads(next(job_folder.glob("savepoints/*/_metadata")).read_text())
        assert savepoints[saved["id"]]["Batch"] == str(saved["batch_id"])
        # The request is in Airflow's audit log with the user, read back through Airflow's own API.
        status, answer = request(f"{airflow.url}/api/v2/eventLogs?event=checkpoint_savepoint", token=admin)
        audit = json.loads(answer)["event_logs"]
        assert status == 200 and [(e["event"], e["owner"]) for e in audit] == [("checkpoint_savepoint", "admin")], audit
        assert json.loads(audit[0]["extra"])["job_name"] == "orders"

        # The DAG's own "Checkpoints" tab lists the job its task names (through a param), in Airflow's frame.
        reserialized = airflow.airflow("dags", "reserialize")
        assert reserialized.returncode == 0, reserialized.stderr[-2000:]
        browser.get(f"{airflow.url}/dags/orders_job")

        def tab():
            return next(
                (
                    a
                    for a in browser.find_elements(By.TAG_NAME, "a")
                    if a.text.strip() == "Checkpoints" and "/dags/orders_job/plugin/" in (a.get_attribute("href") or "")
                ),
                None,
            )

        wait_until(tab, 60, "the DAG's Checkpoints tab").click()
        # Drawn by Airflow's own UI (a React app plugin with its React and Chakra UI), not in a frame.
        row = wait_until(
            lambda: browser.find_element(By.CSS_SELECTOR, "#checkpoints-tab tr[data-job='orders']"), 60, "the DAG's job"
        )
        assert not browser.find_elements(By.TAG_NAME, "iframe"), "the tab is Airflow's own page, not a frame"
        assert "DAG 'orders_job' runs: orders" in browser.find_element(By.ID, "scope").text
        assert len(browser.find_elements(By.CSS_SELECTOR, "tr[data-job]")) == 1, "only the jobs the DAG names"
        assert row.find_element(By.CSS_SELECTOR, "[data-health]").text == "healthy"
        assert "yes (holds the lease)" in row.text
        shots.take(browser, "checkpoints-dag-tab")
        cell_color = "return getComputedStyle(document.querySelector('#checkpoints-tab td')).color"
        light = browser.execute_script(cell_color)
        # Airflow in dark mode (its stored choice, as its own toggle sets it): the tab follows Airflow's theme.
        browser.execute_script("localStorage.setItem('theme', 'dark')")
        browser.refresh()
        wait_until(lambda: "dark" in browser.find_element(By.TAG_NAME, "html").get_attribute("class"), 30, "dark mode")
        row = wait_until(
            lambda: browser.find_element(By.CSS_SELECTOR, "#checkpoints-tab tr[data-job='orders']"), 60, "the DAG's job"
        )
        dark = browser.execute_script(cell_color)
        assert light != dark and _brightness(dark) > _brightness(light), (light, dark)
        shots.take(browser, "checkpoints-dag-tab-dark")
        browser.execute_script("localStorage.setItem('theme', 'light')")
        row.find_element(By.TAG_NAME, "a").click()  # the job page, relative to Airflow's base URL
        wait_until(lambda: browser.find_element(By.ID, "checkpoints"), 60, "the job page from the tab")
        assert browser.current_url.endswith("/plugin/checkpoints/jobs/0/orders"), browser.current_url
        # The task instance's tab names the task's job; a DAG that names none says so.
        status, answer = request(f"{airflow.url}/checkpoints/api/dags/orders_job/tasks/run_job", token=admin)
        found = json.loads(answer)
        assert status == 200 and [j["job_name"] for j in found["jobs"]] == ["orders"], (status, answer)
        assert found["scope"] == "Jobs task 'run_job' of DAG 'orders_job' runs: orders", found
        status, answer = request(f"{airflow.url}/checkpoints/api/dags/upgrade_with_savepoint", token=admin)
        assert status == 200 and not json.loads(answer)["jobs"], (status, answer)
        # The bundle is served as JavaScript; nothing else is served from its folder.
        status, bundle = request(f"{airflow.url}/checkpoints/static/checkpoints.js")
        assert status == 200 and "globalThis.AirflowPlugin" in bundle, status
        assert request(f"{airflow.url}/checkpoints/static/..%2Fapp.py")[0] == 404

        # A viewer may look, not take a savepoint.
        viewer = token_for(airflow, "viewer")
        assert request(f"{airflow.url}/checkpoints/api/jobs/0/orders", token=viewer)[0] == 200
        savepoint = f"{airflow.url}/checkpoints/api/jobs/0/orders/savepoint"
        as_json = {"data": b'{"stop": false}', "Content-Type": "application/json"}
        status, answer = request(savepoint, token=viewer, method="POST", **as_json)
        assert status == 403 and "edit access" in answer, (status, answer)
        # Another site's page cannot make a logged-in browser take one (the login cookie would go along).
        status, answer = request(savepoint, token=admin, method="POST", Origin="https://evil.test", **as_json)
        assert status == 403 and "cross-origin" in answer, (status, answer)

        # Stop the job; a second run restores from the first one's latest checkpoint and makes two more.
        job.send_signal(signal.SIGTERM)
        assert job.wait(timeout=120) == 0, job.stderr.read()[-3000:]
        first_run = completed_checkpoints(root, "orders")
        landing.add_files(4)
        job = start_module(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
        # Retention keeps three: count the second run's checkpoints by id.
        wait_for(
            lambda: len([i for i in completed_checkpoints(root, "orders") if i > first_run[-1]]) >= 2,
            240,
            "the second run",
            job,
        )
        job.send_signal(signal.SIGTERM)
        assert job.wait(timeout=120) == 0, job.stderr.read()[-3000:]
        # Then damage the newest checkpoint.
        ids = completed_checkpoints(root, "orders")
        newest = ids[-1]
        (job_folder / f"chk-{newest}" / "_metadata").write_text('{"format_version": 2, "id": ')  # cut short
        browser.get(f"{airflow.url}/plugin/checkpoints/jobs/0/orders")
        shown = wait_until(lambda: table_rows(browser, "checkpoints"), 30, "the checkpoints table")
        assert shown[newest]["Status"].startswith("damaged"), shown[newest]
        assert f"chk-{ids[-2]}" in browser.find_element(By.ID, "restore-point").text
        assert f"chk-{newest}" in browser.find_element(By.ID, "damaged").text
        # Every other row is what its _metadata on disk says.
        on_disk = {i: json.loads((job_folder / f"chk-{i}" / "_metadata").read_text()) for i in ids[:-1]}
        assert set(shown) == set(ids), (sorted(shown), ids)
        storage = JobFolder(str(root), "orders")
        for checkpoint_id, meta in on_disk.items():
            parsed = storage.checkpoints.read(checkpoint_id)
            restored = meta["restored_from"]
            assert shown[checkpoint_id] | {"Completed": "", "Status": "", "Path": ""} == {
                "Id": str(checkpoint_id),
                "Batch": str(meta["batch_id"]),
                "Completed": "",
                "Duration": format_duration(meta["durations_ms"]["total"] / 1000),
                "Written": format_bytes(meta["bytes_written"]),
                "Total": format_bytes(parsed.summary()["total_bytes"]),
                "Restored from": f"{restored['kind']} {restored['id']}" if restored else "",
                "Status": "",
                "Path": "",
            }, (checkpoint_id, shown[checkpoint_id], meta)
            assert not shown[checkpoint_id]["Status"].startswith("damaged"), shown[checkpoint_id]
        second_run = [i for i in ids[:-1] if i > first_run[-1]]
        assert second_run and all(shown[i]["Restored from"] == f"checkpoint {first_run[-1]}" for i in second_run), (
            "the second run's checkpoints name the checkpoint it restored from"
        )
        api = json.loads(request(f"{airflow.url}/checkpoints/api/jobs/0/orders", token=admin)[1])
        by_id = {c["id"]: c for c in api["checkpoints"]}
        for checkpoint_id, meta in on_disk.items():
            assert by_id[checkpoint_id]["bytes_written"] == meta["bytes_written"]
            assert by_id[checkpoint_id]["completion_timestamp_ms"] == meta["completion_timestamp_ms"]
        assert api["restore_point"]["id"] == ids[-2] and api["restore_point"]["damaged"][0]["id"] == newest
        assert "<svg" in browser.page_source, "the duration and size charts"
        charted = browser.find_elements(By.CSS_SELECTOR, "svg.partitions")
        partitions = {int(chart.get_attribute("data-partitions")) for chart in charted}
        assert partitions == {2}, "the restore point's state by partition (the job runs 2 shuffle partitions)"
        shots.take(browser, "checkpoints-job")
        # In Airflow's dark mode the job page is dark too: Airflow's UI draws it.
        cell_color = "return getComputedStyle(document.querySelector('#checkpoints td')).color"
        light = browser.execute_script(cell_color)
        browser.execute_script("localStorage.setItem('theme', 'dark')")
        browser.refresh()
        wait_until(lambda: table_rows(browser, "checkpoints"), 30, "the checkpoints table, dark")
        dark = browser.execute_script(cell_color)
        assert light != dark and _brightness(dark) > _brightness(light), (light, dark)
        shots.take(browser, "checkpoints-job-dark")
        browser.execute_script("localStorage.setItem('theme', 'light')")

        # The checkpoint_storage connection form, as Airflow 3.3 shows it from the provider info: labels,
        # placeholders and the Endpoint URL field; what is saved becomes the storage options.
        add_connection_from_the_form(browser, airflow, shots)
        saved = airflow.airflow("connections", "get", "ck_form", "-o", "json")
        assert saved.returncode == 0, saved.stderr[-2000:]
        connection = json.loads(saved.stdout)[0]
        fields = ("conn_id", "conn_type", "login", "password", "extra_dejson")
        options = storage_options_from(SimpleNamespace(**{k: connection[k] for k in fields}))
        assert options == {
            "client_kwargs": {"endpoint_url": "http://minio:9000"},
            "key": "AKIAFORM",
            "secret": "form-secret-1",
        }
    finally:
        if job.poll() is None:
            job.kill()
        if browser is not None:
            browser.quit()
        airflow.stop()
