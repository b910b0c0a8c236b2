"""What the checkpoint pages show, from real files: roots, the restore point, damage and its reasons, charts.

The pages themselves, in a browser behind Airflow's auth, are ``tests/system/test_checkpoint_pages.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from airflow_checkpoint_provider.ui import views
from airflow_checkpoint_provider.ui.charts import history_charts, partition_charts
from airflow_checkpoint_provider.ui.job_page import job_page
from airflow_checkpoint_provider.ui.roots import ConfiguredRoot, parse_roots, root_index_of
from spark_checkpoint_runtime.layout import JobFolder, now_ms
from tests.support.helpers import write_checkpoint


def test_roots_parse_with_optional_connections_and_refuse_empty_parts():
    roots = parse_roots(" /data/ck/ , s3://bucket/ck|aws_default,")
    assert roots == [ConfiguredRoot(0, "/data/ck"), ConfiguredRoot(1, "s3://bucket/ck", "aws_default")]
    assert root_index_of("s3://bucket/ck/", roots) == 1 and root_index_of("/elsewhere", roots) is None
    with pytest.raises(ValueError, match="is not 'ROOT' or 'ROOT|CONNECTION_ID'"):
        parse_roots("s3://bucket/ck|")


def test_restore_point_skips_damaged_checkpoints_and_says_why(tmp_path: Path):
    storage = JobFolder(str(tmp_path), "orders")
    for checkpoint_id in (1, 2, 3):
        write_checkpoint(storage, checkpoint_id, [f"state-{checkpoint_id}"])
    (tmp_path / "orders" / "shared" / "r1" / "state-3").unlink()  # chk-3 lost a file
    (tmp_path / "orders" / "chk-4").mkdir()  # in progress: no _metadata yet, never a restore point
    history = views.job_history(ConfiguredRoot(0, str(tmp_path)), "orders")
    assert history["restore_point"]["id"] == 2
    assert history["restore_point"]["damaged"] == [{"id": 3, "reason": "missing shared/r1/state-3"}]
    statuses = {row["id"]: row["status"] for row in history["checkpoints"]}
    assert statuses == {1: "retained", 2: "restore point", 3: "damaged: missing shared/r1/state-3", 4: "in progress"}
    assert history["health"]["state"] == "healthy" and history["live_runs"] == []
    summary = views.job_summary(ConfiguredRoot(0, str(tmp_path)), "orders")
    assert (summary["latest_checkpoint_id"], summary["damaged_checkpoints"], summary["running"]) == (2, 1, False)
    page = job_page(history, can_savepoint=False)
    shown = page["display"]
    assert [row["Id"] for row in shown["checkpoints"]] == ["4", "3", "2", "1"], "newest first"
    assert shown["checkpoints"][1]["Status"] == "damaged: missing shared/r1/state-3"
    assert shown["history_charts"].count("<svg") == 2 and page["can_savepoint"] is False
    assert shown["columns"] == list(shown["checkpoints"][0]), "the tables' headers are the rows' columns"


def test_stalled_and_all_damaged_jobs_are_told_apart(tmp_path: Path):
    old = JobFolder(str(tmp_path), "old")
    write_checkpoint(old, 1, [], completion_ms=now_ms() - 3600_000)
    broken = JobFolder(str(tmp_path), "broken")
    write_checkpoint(broken, 1, ["gone"])
    (tmp_path / "broken" / "shared" / "r1" / "gone").unlink()
    root = ConfiguredRoot(0, str(tmp_path))
    assert views.job_summary(root, "old")["health"]["state"] == "stalled"
    assert views.job_summary(root, "broken")["health"]["state"] == "damaged"


def test_validating_one_checkpoint_lists_only_the_runs_it_references(tmp_path: Path):
    storage = JobFolder(str(tmp_path), "orders")
    meta = write_checkpoint(storage, 1, ["state"])
    unrelated = tmp_path / "orders" / "shared" / "r2"
    unrelated.mkdir(parents=True)
    for n in range(50):
        (unrelated / f"f{n}").write_bytes(b"x")
    assert storage.checkpoints.referenced_shared_files(meta) == {"shared/r1/state": 10}


def test_the_only_markup_a_page_takes_from_the_server_is_its_charts_and_they_escape_what_they_name():
    # The page renders every other value as text (React escapes it); the charts are SVG built here.
    partitions = [{"operator": 0, "store": "<img src=x>", "partition": p, "bytes": 10 * (p + 1)} for p in range(3)]
    svg = partition_charts(partitions)
    assert "<img src=x>" not in svg and "&lt;img src=x&gt;" in svg and 'data-partitions="3"' in svg


def test_charts_draw_duration_and_size_even_for_one_checkpoint():
    one = [{"id": 7, "completion_timestamp_ms": 1, "duration_ms": 1500, "bytes_written": 2048}]
    svg = history_charts(one)
    assert svg.count("<svg") == 2 and "chk-7" in svg and "1.5s" in svg
    assert "no completed checkpoints" in history_charts([])


def test_the_history_link_names_the_job_page_when_its_root_is_configured(tmp_path: Path, monkeypatch):
    from airflow_checkpoint_provider.ui.roots import job_page_url

    monkeypatch.setenv("AIRFLOW__CHECKPOINT_PROVIDER__ROOTS", f"/other, {tmp_path}/")
    monkeypatch.setenv("AIRFLOW__API__BASE_URL", "http://airflow.example:8080/")
    assert job_page_url(str(tmp_path), "orders") == "http://airflow.example:8080/plugin/checkpoints/jobs/1/orders"
    assert job_page_url("/not/configured", "orders") is None


def test_a_malformed_roots_setting_costs_the_link_not_the_job_task(tmp_path: Path, monkeypatch, caplog):
    from airflow_checkpoint_provider.ui.roots import job_page_url

    monkeypatch.setenv("AIRFLOW__CHECKPOINT_PROVIDER__ROOTS", f"{tmp_path}|")
    assert job_page_url(str(tmp_path), "orders") is None
    assert "is not 'ROOT' or 'ROOT|CONNECTION_ID'" in caplog.text


def test_no_credential_reaches_a_page_its_json_or_an_error_line(monkeypatch):
    """Secrets fed through every way a page renders text: the root URL's user info, the connection's Login,
    Password and extra, checkpoint and savepoint paths, damage reasons, a live run, and a root whose listing
    fails with the secrets in its message. None is shown; each error is a short reason."""
    import json

    from airflow_checkpoint_provider.ui import app
    from spark_checkpoint_runtime.layout import ControlChannel

    secrets = ["AKIAUSERINFO", "pw-in-the-url-77", "conn-password-88", "extra-token-99", "pw-second-root-55"]
    url = "memory://AKIAUSERINFO:pw-in-the-url-77@redaction-bucket/ck"
    connection = {
        "conn_type": "checkpoint_storage",
        "password": "conn-password-88",
        "extra": {"token": "extra-token-99", "endpoint_url": "http://127.0.0.1:9"},
    }
    monkeypatch.setenv("AIRFLOW_CONN_SECRET_ROOT", json.dumps(connection))
    roots = [ConfiguredRoot(0, url, "secret_root"), ConfiguredRoot(1, "sftp://ops:pw-second-root-55@host/ck?sig=x")]
    storage = JobFolder(url, "orders")
    write_checkpoint(storage, 1, ["state/0/0/1.delta"])
    write_checkpoint(storage, 2, ["state/0/0/2.delta"])
    storage.fs.pipe_file(storage.job_file("chk-2/_metadata"), b"{damaged")
    storage.fs.pipe_file(storage.savepoints.base + "/savepoint-bad/_metadata", b"{damaged")
    ControlChannel(storage).heartbeat("run-1", "etl.run_job.manual__1.1")
    listing = views.list_jobs

    def list_jobs(root):  # the second root fails the way a storage client does: quoting what it was given
        if root.index == 1:
            raise PermissionError(f"access denied for {root.url} (password pw-second-root-55)\nstack detail")
        return listing(root)

    monkeypatch.setattr(views, "list_jobs", list_jobs)

    history = views.job_history(roots[0], "orders")
    rows, errors = views.overview(roots)
    shown = [  # what the job page's and the job list's API answer, which is all the pages render
        json.dumps(job_page(history, can_savepoint=True)),
        json.dumps({"roots": [r.__dict__ for r in app._shown(roots)], "jobs": rows, "errors": errors}),
    ]
    leaked = [(secret, n) for n, text in enumerate(shown) for secret in secrets if secret in text]
    assert not leaked, leaked
    assert [row["job_name"] for row in rows] == ["orders"] and history["checkpoints"][1]["status"].startswith("damaged")
    assert errors == [
        "root 1 (sftp://host/ck): PermissionError: access denied for sftp://host/ck (password ***) "
        "(the API server's log has the full error)"
    ]


def test_the_job_page_charts_the_restore_points_state_by_partition(tmp_path: Path):
    """Bytes per stateful operator, store and partition, from the restore point's ``_metadata`` (no Spark): a
    skewed partition stands out; a join's stores are charted apart."""
    storage = JobFolder(str(tmp_path), "orders")
    files = ["state/0/0/1.delta", "state/0/1/1.delta", "state/0/1/2.delta", "state/0/2/1.delta"]
    files += ["state/1/0/left-keyToNumValues/1.delta", "state/0/_metadata/v2/0"]  # operator metadata: not state
    write_checkpoint(storage, 1, files)
    history = views.job_history(ConfiguredRoot(0, str(tmp_path)), "orders")
    assert history["partitions"] == [
        {"operator": 0, "store": "default", "partition": 0, "bytes": 10},
        {"operator": 0, "store": "default", "partition": 1, "bytes": 20},
        {"operator": 0, "store": "default", "partition": 2, "bytes": 10},
        {"operator": 1, "store": "left-keyToNumValues", "partition": 0, "bytes": 10},
    ]
    page = job_page(history, can_savepoint=False)["display"]["partition_charts"]
    assert 'data-operator="0" data-store="default" data-partitions="3"' in page
    assert "operator 0 (default): largest 20 B, 2.0x the median" in page
    assert "<title>partition 1: 20 B</title>" in page
    assert 'data-store="left-keyToNumValues" data-partitions="1"' in page
