"""The launcher jar of cluster deploy mode on a standalone master: what it holds, and that Python runs it as the
runtime with the storage options in a private spec file (the system test in ``tests/system/test_cluster.py``
runs it on a real cluster)."""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from airflow_checkpoint_provider.hooks.standalone_driver import (
    DriverStateUnknown,
    StandaloneDriver,
    application_args,
    build_launcher,
    is_standalone_cluster,
    write_spec,
)

REPO = Path(__file__).resolve().parents[3]


def test_the_launcher_holds_the_runtime_and_the_dags_files_and_no_credentials(tmp_path: Path):
    module = tmp_path / "helpers.py"
    module.write_text("VALUE = 1\n")
    with zipfile.ZipFile(tmp_path / "shipped.zip", "w") as shipped:
        shipped.writestr("zipped_pkg/__init__.py", "")
    jar = build_launcher(tmp_path / "job.jar", [str(REPO / "examples"), str(module), str(tmp_path / "shipped.zip")])
    names = set(zipfile.ZipFile(jar).namelist())
    assert {"__main__.py", "META-INF/MANIFEST.MF", "spark_checkpoint_runtime/cli.py"} <= names
    assert {"examples/pipelines.py", "helpers.py", "zipped_pkg/__init__.py"} <= names
    assert not [n for n in names if "__pycache__" in n or n.endswith(".json")]
    # spark-submit serves a cluster-mode jar to every executor: the credentials go beside it, private.
    spec = write_spec(jar, {"key": "s3cr3t"})
    assert stat.S_IMODE(spec.stat().st_mode) == 0o600 and spec.parent == jar.parent
    assert b"s3cr3t" not in jar.read_bytes()
    assert json.loads(spec.read_text()) == {"storage_options": {"key": "s3cr3t"}}
    assert application_args(jar, ["--job-name", "j"], spec) == [
        "job.jar",
        "job.jar",
        f"--launcher-spec={spec}",
        "--job-name",
        "j",
    ]


def test_python_runs_the_launcher_as_the_runtime_and_moves_the_spec_out_of_the_shared_folder(tmp_path: Path):
    jar = build_launcher(tmp_path / "job.jar", [])
    spec = write_spec(jar, {"auto_mkdir": True})
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    command = [sys.executable, str(jar), f"--launcher-spec={spec}", "list", "--job-name", "orders"]
    ran = subprocess.run(
        [*command, "--checkpoint-root", str(tmp_path / "root")],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "TMPDIR": str(scratch)},
        timeout=120,
    )
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert "job 'orders': 0 checkpoint(s)" in ran.stdout, ran.stdout
    assert not spec.exists(), "moved out of the folder the workers share as the driver starts"
    assert not list(scratch.iterdir()), "and its private copy is gone after the run"


def test_only_a_spark_master_in_cluster_mode_runs_the_driver_on_a_worker():
    assert is_standalone_cluster("spark://127.0.0.1:7077", "cluster")
    assert not is_standalone_cluster("spark://127.0.0.1:7077", "client")
    assert not is_standalone_cluster("yarn", "cluster")  # spark-submit ships Python there itself
    assert not is_standalone_cluster("local[2]", None)


def test_a_master_that_does_not_answer_is_said_as_such():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # nothing listens once the probe closes
    driver = StandaloneDriver(f"http://127.0.0.1:{port}", "driver-1", timeout=2)
    with pytest.raises(DriverStateUnknown, match=f"REST server at http://127.0.0.1:{port} did not answer"):
        driver.state()
    with pytest.raises(DriverStateUnknown):
        driver.wait(poll_seconds=0.01, tolerated_misses=2)


def test_the_delayed_kill_removes_the_launcher_even_when_the_master_does_not_answer(tmp_path: Path):
    """``kill_later``'s process outlives the task (Airflow SIGKILLs it about 5 s after SIGTERM): it removes the
    launcher whatever the master says, and says when its kill did not get through."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    launcher, spec = tmp_path / "job.jar", tmp_path / "job.spec.json"
    launcher.write_bytes(b"jar")
    spec.write_text("{}")
    driver = StandaloneDriver(f"http://127.0.0.1:{port}", "driver-1", timeout=2)
    killer = driver.kill_later(0.0, [launcher, spec])
    assert killer.wait(timeout=60) == 1, "no master answered: the kill did not get through"
    assert not launcher.exists() and not spec.exists()
