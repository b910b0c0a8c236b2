"""The built wheel: installs the Spark side as ``spark_checkpoint_runtime``, never as a top-level ``runtime``.

A top-level ``runtime`` would collide with other distributions and with folders in users' DAG repositories
(Airflow puts the DAGs folder on ``sys.path``). The wheel goes into a clean venv whose only other packages
are the project venv's (by a ``.pth`` line, so nothing is downloaded twice); Airflow must list the provider.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from tests.support.helpers import REPO

# Builds a wheel, installs it into a fresh venv, runs Airflow's CLI. One worker runs the module, so the wheel
# (a module fixture) is built once.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("packaging")]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The wheel, built from a copy of the checkout: an in-tree build writes ``build/`` and ``*.egg-info`` into
    the checkout, and two pytest workers building at once (each runs this module fixture) would mix their
    files into one broken wheel."""
    out = tmp_path_factory.mktemp("wheel")
    source = tmp_path_factory.mktemp("source") / "checkout"
    ignored = (
        ".git",
        ".venv",
        ".venv-docs",  # the docs site's tools (scripts/docs.sh), and the site it builds: not in the wheel
        "site",
        ".cache",
        ".ruff_cache",
        ".pytest_cache",
        "build",
        "*.egg-info",
        "__pycache__",
        "spark-warehouse",
        "metastore_db",
        "demo-output",
    )
    shutil.copytree(REPO, source, ignore=shutil.ignore_patterns(*ignored), symlinks=True)
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out), str(source)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stderr[-3000:]
    (found,) = out.glob("airflow_checkpoint_provider-*.whl")
    return found


def test_the_wheel_has_no_top_level_runtime_package(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    top = {name.split("/")[0] for name in names if not name.split("/")[0].endswith((".dist-info", ".data"))}
    assert top == {"spark_checkpoint_runtime", "airflow_checkpoint_provider"}
    assert "spark_checkpoint_runtime/job.py" in names
    assert "spark_checkpoint_runtime/layout/job_folder.py" in names  # subpackages are listed in pyproject
    assert "spark_checkpoint_runtime/state_files/rocksdb.py" in names
    assert "airflow_checkpoint_provider/ui/app.py" in names and "airflow_checkpoint_provider/plugins.py" in names
    assert {"spark_checkpoint_runtime/py.typed", "airflow_checkpoint_provider/py.typed"} <= set(names), "PEP 561"
    from airflow_checkpoint_provider.ui.app import BUNDLE

    bundle = {f"airflow_checkpoint_provider/ui/static/{name}" for name in BUNDLE}
    assert bundle <= set(names), ("the Checkpoints React app", bundle - set(names))


def test_a_clean_venv_imports_the_runtime_by_its_own_name_and_airflow_lists_the_provider(wheel, tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    site = Path(
        subprocess.check_output(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], text=True
        ).strip()
    )
    # Dependencies come from the project venv; its editable-install hook is not loaded (not a site dir).
    (site / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps", str(wheel)],
        check=True,
        capture_output=True,
        timeout=300,
        # Without the PYTHONPATH other tests set (the checkout): pip would find the checkout's editable-install
        # metadata there, take the provider as installed already, and install nothing.
        env={key: value for key, value in os.environ.items() if key != "PYTHONPATH"},
    )
    assert not [p.name for p in site.iterdir() if p.name.split(".")[0] == "runtime"]
    env = {
        **os.environ,
        "AIRFLOW_HOME": str(tmp_path / "airflow-home"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "PYTHONPATH": "",
    }
    probe = (
        "import importlib.util, spark_checkpoint_runtime, airflow_checkpoint_provider;"
        "print(spark_checkpoint_runtime.__file__);"
        "print(importlib.util.find_spec('runtime'))"
    )
    probed = subprocess.run(
        [str(python), "-c", probe], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    out = probed.stdout.split()
    assert probed.returncode == 0 and out, f"exit {probed.returncode}: {probed.stderr[-3000:]}"
    assert out[0].startswith(str(site)), out
    assert out[1] == "None"
    listed = subprocess.run(
        [str(python), "-m", "airflow", "providers", "list"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert "airflow-checkpoint-provider" in listed.stdout, listed.stdout + listed.stderr
    # The checkpoint pages' plugin is found through the wheel's airflow.plugins entry point.
    plugins = subprocess.run(
        [str(python), "-m", "airflow", "plugins", "--output", "json"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert "checkpoint_provider" in plugins.stdout and "/checkpoints" in plugins.stdout, plugins.stdout + plugins.stderr
    # The console script runs the installed package (an empty root lists no checkpoints).
    script = subprocess.run(
        [
            str(venv / "bin" / "checkpointed-spark-job"),
            "list",
            "--job-name",
            "j",
            "--checkpoint-root",
            str(tmp_path / "none"),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert script.returncode == 0 and "Traceback" not in script.stderr, script.stdout + script.stderr


def test_the_provider_info_matches_airflows_schema_and_every_class_it_names_imports(wheel):
    import importlib
    import json

    import airflow
    import jsonschema

    from airflow_checkpoint_provider.get_provider_info import get_provider_info

    info = get_provider_info()
    schema = json.loads((Path(airflow.__file__).parent / "provider_info.schema.json").read_text())
    jsonschema.validate(info, schema)
    modules = [
        m for kind in ("hooks", "operators", "sensors", "triggers") for i in info[kind] for m in i["python-modules"]
    ]
    classes = [c["hook-class-name"] for c in info["connection-types"]] + info["extra-links"]
    classes += [p["plugin-class"] for p in info["plugins"]]
    assert info["config"]["checkpoint_provider"]["options"]["roots"]["default"] == ""
    for module in modules:
        importlib.import_module(module)
    for dotted in classes:
        module, _, name = dotted.rpartition(".")
        assert hasattr(importlib.import_module(module), name), dotted
    # One version, written once (spark_checkpoint_runtime.__version__): the wheel and Airflow see the same.
    version = wheel.name.split("-")[1]
    assert info["versions"] == [version]
