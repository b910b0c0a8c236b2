"""The suite's fixtures and hooks, a pytest plugin (``tests/conftest.py`` registers it): one local SparkSession
per test session, landing folders, a loopback S3 server, the JVM class archive, the reliability figures."""

from __future__ import annotations

import logging
import os
import signal
import socket
import sys
from pathlib import Path

import pytest

from tests.support.helpers import REPO, S3_BUCKET, S3_SECRET, SPARK_CONF, subprocess_env
from tests.support.landing import Landing


def _use_jvm_archive() -> None:
    """Every Spark JVM started from here on (in-process, spark-submit, Airflow's) maps a shared class archive."""
    if "SharedArchiveFile" in os.environ.get("SPARK_SUBMIT_OPTS", ""):
        return
    from tests.support.jvm_archive import archive_options

    options = archive_options(subprocess_env())
    if options:
        os.environ["SPARK_SUBMIT_OPTS"] = f"{os.environ.get('SPARK_SUBMIT_OPTS', '')} {options}".strip()


def _only_unit_tests(config) -> bool:
    """Every path given is in the unit tier (``tests/unit``), which never starts a JVM."""
    unit = Path(__file__).resolve().parents[1] / "unit"
    paths = [Path(config.invocation_params.dir, arg.split("::")[0]).resolve() for arg in config.args]
    return bool(paths) and all(path.is_relative_to(unit) for path in paths)


def pytest_configure(config) -> None:
    """In the controlling process: forget old figures; under xdist, build the JVM archive before workers start."""
    if hasattr(config, "workerinput"):
        return
    from tests.support.figures import clear_parts

    clear_parts()
    if (
        getattr(config.option, "numprocesses", None)
        and "not spark" not in (config.option.markexpr or "")
        and not _only_unit_tests(config)
    ):
        _use_jvm_archive()  # workers inherit SPARK_SUBMIT_OPTS


@pytest.fixture(scope="session", autouse=True)
def _fast_jvm_start(request):
    """Without xdist: build or reuse the JVM archive once the session is known to run Spark tests."""
    if any(item.get_closest_marker("spark") for item in request.session.items):
        _use_jvm_archive()


@pytest.fixture(scope="session")
def spark():
    """One local SparkSession for every in-process test (starting one takes ~15 s)."""
    from pyspark.sql import SparkSession

    # Python workers (UDFs, applyInPandasWithState, transformWithStateInPandas) import the example pipelines
    # and need this venv's pandas: the JVM hands them its environment.
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.master("local[2]").appName("airflow-checkpoint-provider-tests")
    for key, value in {**SPARK_CONF, "spark.sql.streaming.stopTimeout": "30000"}.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(autouse=True)
def _keep_sigterm():
    """In-process jobs install a SIGTERM handler; give pytest its own back afterwards."""
    previous = signal.getsignal(signal.SIGTERM)
    yield
    signal.signal(signal.SIGTERM, previous)


@pytest.fixture
def landing(tmp_path: Path) -> Landing:
    return Landing(tmp_path / "landing")


@pytest.fixture
def caplog_info(caplog):
    caplog.set_level(logging.INFO)
    return caplog


_VERSION_MATRIX = None


def pytest_runtest_logreport(report) -> None:
    """The controlling process collects the Spark version matrix's outcomes (workers' reports arrive here too)."""
    global _VERSION_MATRIX
    if any(key == "spark_matrix" for key, _ in report.user_properties):
        from tests.support.version_matrix import Recorder

        _VERSION_MATRIX = _VERSION_MATRIX or Recorder()
        _VERSION_MATRIX.add(report)


def pytest_sessionfinish(session) -> None:
    """Each pytest process saves its reliability counts; the summary adds them up. The controlling process
    saves the version matrix's outcomes (``tests/support/version_matrix.py``)."""
    from tests.support.figures import save_part

    worker = getattr(session.config, "workerinput", {}).get("workerid", "main")
    save_part(worker)
    if _VERSION_MATRIX is not None and not hasattr(session.config, "workerinput"):
        _VERSION_MATRIX.save(session.config.invocation_params.args)


def pytest_terminal_summary(terminalreporter) -> None:
    """Print the reliability figures (kills survived, faults injected, rows checked/lost/duplicated)."""
    from tests.support.figures import OUTPUT, report

    lines = report()
    if lines:
        terminalreporter.section("reliability figures")
        for line in lines:
            terminalreporter.write_line(line)
        terminalreporter.write_line(f"(written to {OUTPUT})")


@pytest.fixture(scope="module")
def s3():
    """Storage options for a moto S3 server on a free loopback port, with one bucket."""
    from moto.server import ThreadedMotoServer

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    options = {
        "key": "test-key",
        "secret": S3_SECRET,
        "client_kwargs": {"endpoint_url": f"http://127.0.0.1:{port}", "region_name": "us-east-1"},
    }
    import boto3

    client = boto3.client(
        "s3",
        endpoint_url=options["client_kwargs"]["endpoint_url"],
        aws_access_key_id=options["key"],
        aws_secret_access_key=S3_SECRET,
        region_name="us-east-1",
    )
    client.create_bucket(Bucket=S3_BUCKET)
    yield options
    server.stop()
