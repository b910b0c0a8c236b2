"""The provider's public surface follows the habits of Airflow's own providers (no Spark needed).

Every argument is documented with ``:param:``; deferrable defaults come from ``[operators]
default_deferrable``; every duration, ours or a sensor's own, takes seconds, a ``timedelta`` or a unit; the
job operator's dict-valued fields render as JSON in the UI; the zip shipped with ``--py-files`` holds the
runtime under its own import name.
"""

from __future__ import annotations

import inspect
import json
import os
import re
import subprocess
import sys
import zipfile
from datetime import timedelta
from pathlib import Path

from tests.support.helpers import REPO

DEFERRABLE = (
    "airflow_checkpoint_provider.sensors.CheckpointSensor",
    "airflow_checkpoint_provider.sensors.RunningJobHealthSensor",
    "airflow_checkpoint_provider.operators.SavepointOperator",
)


def _public_classes() -> list[type]:
    from airflow_checkpoint_provider import hooks, operators, sensors, triggers
    from airflow_checkpoint_provider.triggers.health import RunningJobHealthTrigger

    found = [getattr(module, name) for module in (operators, sensors, triggers, hooks) for name in module.__all__]
    return [*found, RunningJobHealthTrigger]


def test_every_public_class_documents_every_argument():
    undocumented = {}
    for cls in _public_classes():
        documented = {
            name
            for klass in cls.__mro__
            if klass.__module__.startswith("airflow_checkpoint_provider")
            for name in re.findall(r":param (\w+):", klass.__doc__ or "")
        }
        arguments = [
            p.name
            for p in inspect.signature(cls.__init__).parameters.values()
            if p.name != "self" and p.kind is not p.VAR_KEYWORD
        ]
        missing = [name for name in arguments if name not in documented]
        if missing:
            undocumented[cls.__name__] = missing
    assert not undocumented, f"arguments without a :param: line: {undocumented}"


def test_deferrable_defaults_follow_airflows_default_deferrable():
    build = (
        "import importlib, inspect, json\n"
        "kinds = {}\n"
        f"for path in {DEFERRABLE!r}:\n"
        "    module, _, name = path.rpartition('.')\n"
        "    init = importlib.import_module(module).__dict__[name].__init__\n"
        "    kinds[name] = inspect.signature(init).parameters['deferrable'].default\n"
        "print(json.dumps(kinds))\n"
    )
    for setting in ("True", "False"):
        env = {**os.environ, "AIRFLOW__OPERATORS__DEFAULT_DEFERRABLE": setting, "PYTHONPATH": str(REPO)}
        shown = subprocess.run([sys.executable, "-c", build], env=env, capture_output=True, text=True)
        assert shown.returncode == 0, shown.stderr[-2000:]
        defaults = json.loads(shown.stdout.strip().splitlines()[-1])
        assert defaults == {path.rpartition(".")[2]: setting == "True" for path in DEFERRABLE}, (setting, defaults)


def test_the_task_side_reads_configuration_through_the_task_sdk():
    """Operators, sensors, hooks, triggers and what they share read the Task SDK's configuration (through the
    compat provider's ``sdk.conf``: ``airflow.sdk.configuration`` where Airflow has it); only the API server's
    pages (``ui/app.py``) read the core's."""
    package = REPO / "airflow_checkpoint_provider"
    core = {
        str(path.relative_to(package))
        for path in package.rglob("*.py")
        if re.search(
            r"^\s*from airflow\.configuration import|^\s*import airflow\.configuration", path.read_text(), re.M
        )
    }
    assert core == {"ui/app.py"}, core


def test_every_duration_takes_seconds_a_timedelta_or_a_unit():
    from airflow_checkpoint_provider.operators import SavepointOperator, StopStreamingJobOperator
    from airflow_checkpoint_provider.sensors import CheckpointHealthSensor, CheckpointSensor
    from airflow_checkpoint_provider.triggers import CheckpointCommitTrigger, CheckpointTrigger, SavepointTrigger
    from airflow_checkpoint_provider.triggers.health import RunningJobHealthTrigger

    # The sensors' own durations (Airflow's BaseSensorOperator) take units here too.
    sensor = CheckpointSensor(task_id="s", job_name="j", checkpoint_root="/r", timeout="5min", poke_interval="10s")
    assert (sensor.timeout, sensor.poke_interval) == (300.0, 10.0)
    health = CheckpointHealthSensor(
        task_id="h", job_name="j", checkpoint_root="/r", timeout=timedelta(hours=1), poke_interval=3
    )
    assert (health.timeout, health.poke_interval) == (3600.0, 3.0)
    defaulted = CheckpointSensor(
        task_id="d", job_name="j", checkpoint_root="/r", default_args={"timeout": "1h", "poke_interval": "30s"}
    )
    assert (defaulted.timeout, defaulted.poke_interval) == (3600.0, 30.0)
    # Operators' durations are templated, so they are read when the task runs: a unit, a timedelta or a rendered
    # template alike (tests/integration/provider/test_operators.py runs them from params).
    from airflow_checkpoint_provider.operators import CheckpointedStreamingJobOperator, CheckpointRetentionOperator

    templated = {
        SavepointOperator: {"timeout", "poll_interval"},
        StopStreamingJobOperator: {"stop_timeout", "kill_timeout", "poll_interval"},
        CheckpointRetentionOperator: {"savepoint_max_age", "orphan_grace_period"},
        CheckpointedStreamingJobOperator: {
            "batch_interval",
            "max_duration",
            "checkpoint_interval",
            "stop_timeout",
            "kill_poll_interval",
        },
    }
    for operator, durations in templated.items():
        missing = durations - set(operator.template_fields)
        assert not missing, (operator.__name__, missing)
    # Triggers an author builds (an AssetWatcher's) or that a rebuilt trigger gets back: seconds once built.
    assert CheckpointCommitTrigger(job_name="j", checkpoint_root="/r", poke_interval="1min").poke_interval == 60.0
    assert CheckpointTrigger(job_name="j", checkpoint_root="/r", poke_interval=timedelta(seconds=2)).poke_interval == 2
    waiting = SavepointTrigger(job_name="j", checkpoint_root="/r", trigger_id="t", timeout="2min", poll_interval="1s")
    assert (waiting.timeout, waiting.poll_interval) == (120.0, 1.0)
    watch = RunningJobHealthTrigger(
        job_name="j", checkpoint_root="/r", started_after_ms=0, window_s=30, start_timeout_s=60, poke_interval="5s"
    )
    assert json.loads(json.dumps(watch.serialize()[1]))["poke_interval"] == 5.0
    try:
        CheckpointSensor(task_id="bad", job_name="j", checkpoint_root="/r", timeout="soon")
    except ValueError as exc:
        assert "timeout" in str(exc) and "'soon'" in str(exc), exc
    else:
        raise AssertionError("a timeout of 'soon' was taken")


def test_dict_fields_render_as_json_in_the_ui():
    from airflow_checkpoint_provider.operators import CheckpointedStreamingJobOperator, RestoreFromCheckpointOperator

    for operator in (CheckpointedStreamingJobOperator, RestoreFromCheckpointOperator):
        renderers = operator.template_fields_renderers
        assert {"conf", "env_vars", "runtime_options"} <= set(renderers), renderers
        assert set(renderers) <= set(operator.template_fields), "a renderer for a field that is not templated"
        assert set(renderers.values()) == {"json"}, renderers


def test_the_py_files_zip_holds_the_runtime_under_its_own_name(tmp_path: Path):
    """What spark-submit's executors import: the runtime's modules under ``spark_checkpoint_runtime``, nothing
    under ``runtime``, and the zip alone (without this checkout on the path) imports."""
    import spark_checkpoint_runtime
    from airflow_checkpoint_provider.hooks.streaming_job import zip_package

    name = spark_checkpoint_runtime.__name__
    shipped = zip_package(Path(spark_checkpoint_runtime.__file__).parent, tmp_path / f"{name}.zip", import_name=name)
    names = zipfile.ZipFile(shipped).namelist()
    assert f"{name}/__init__.py" in names and f"{name}/layout/__init__.py" in names, names[:20]
    assert not [n for n in names if n.startswith("runtime/")], "nothing under the colliding name"
    # Without this checkout's editable finder or path: only the zip can provide the runtime.
    probe = (
        "import sys\n"
        "sys.meta_path[:] = [f for f in sys.meta_path if '__editable__' not in getattr(f, '__module__', '')]\n"
        f"sys.path[:] = [p for p in sys.path if p.rstrip('/') not in ('', {str(REPO)!r})]\n"
        f"sys.path.insert(0, {str(shipped)!r})\n"
        f"import {name}.layout as layout\n"
        "print(layout.__file__)\n"
    )
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    loaded = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, cwd=tmp_path)
    assert loaded.returncode == 0, loaded.stderr[-2000:]
    assert loaded.stdout.strip().startswith(str(shipped)), loaded.stdout
