"""A job's driver on a Spark standalone cluster, in cluster deploy mode: its launcher, its state, its kill.

spark-submit refuses cluster deploy mode for a Python application on a standalone master (the master cannot
ship Python files to the worker that runs the driver). It runs any JVM main class there, though, and
``org.apache.spark.deploy.PythonRunner`` is the class spark-submit itself runs for a Python application (and
YARN's cluster mode runs in its application master): it starts Python beside the driver's JVM and connects
the two. So the job goes as a launcher jar: one zip that the worker copies into the driver's folder, that
Python runs (its ``__main__.py`` starts the runtime) and imports from (the runtime and the DAG's
``py_files`` inside). ``PythonRunner`` is told to run it and to put it on ``PYTHONPATH``. The storage options
go in a private file beside it (``write_spec``), never in the jar, which spark-submit serves to executors.

The master's REST server (``spark.master.rest.enabled``, port ``spark.master.rest.port``, the Spark
connection's ``rest-port`` extra, as apache-airflow-providers-apache-spark reads it) answers the driver's
state (``/v1/submissions/status/<id>``) and kills it (``/v1/submissions/kill/<id>``).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.error
import urllib.request
import zipfile
from pathlib import Path
from typing import Any

import spark_checkpoint_runtime
from airflow_checkpoint_provider.hooks.storage_options import write_private_spec

PYTHON_RUNNER = "org.apache.spark.deploy.PythonRunner"
SPEC_OPTION = "--launcher-spec="
# The master's driver states (DriverState.scala): these four are final; SUBMITTED, RUNNING, RELAUNCHING and
# UNKNOWN (the master recovering) are not.
FINAL_STATES = frozenset({"FINISHED", "FAILED", "KILLED", "ERROR"})
#: How long past the job's stop timeout the master is asked to kill a driver that has not ended its graceful
#: stop (the runtime ends such a run itself at the stop timeout; this is for a driver that no longer answers).
DRIVER_KILL_GRACE_SECONDS = 30.0

# Runs as ``python <launcher>.jar [--launcher-spec=PATH] ARGS``: the jar is sys.path[0]. The storage options
# (credentials) are in neither the jar (spark-submit serves a cluster-mode jar to every executor) nor a command
# line the master shows: they are in a private file beside the jar, which the launcher moves into the driver's
# own temporary folder at once, and removes there at its end.
_LAUNCHER_MAIN = f'''"""A checkpointed job's launcher in cluster deploy mode (by airflow-checkpoint-provider)."""
import os
import shutil
import sys
import tempfile

argv = sys.argv[1:]
spec = None
if argv and argv[0].startswith({SPEC_OPTION!r}):
    shared = argv.pop(0)[len({SPEC_OPTION!r}):]
    handle, spec = tempfile.mkstemp(prefix="checkpointed-spec-", suffix=".json")  # mode 600
    with os.fdopen(handle, "wb") as out, open(shared, "rb") as source:
        shutil.copyfileobj(source, out)
    os.unlink(shared)
    argv += ["--spec", spec]
try:
    from spark_checkpoint_runtime.cli import main

    code = main(argv)
finally:
    if spec is not None:
        os.unlink(spec)
sys.exit(code)
'''


class DriverStateUnknown(RuntimeError):
    """The master's REST server did not answer the driver's state."""


def is_standalone_cluster(master: str, deploy_mode: str | None) -> bool:
    """Whether a submission to ``master`` in ``deploy_mode`` runs the driver on a standalone worker."""
    return master.startswith("spark://") and deploy_mode == "cluster"


def build_launcher(destination: Path, py_files: list[str]) -> Path:
    """Write the launcher jar at ``destination``: ``__main__.py``, the runtime package and each of ``py_files``
    (a package folder under its name, a ``.py`` module at the top, a ``.zip`` or ``.egg`` unpacked at the top).
    No credentials: spark-submit serves a cluster-mode jar to every executor (``write_spec``)."""
    package = Path(spark_checkpoint_runtime.__file__).parent
    with zipfile.ZipFile(destination, "w", zipfile.ZIP_DEFLATED) as jar:
        jar.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\r\n\r\n")
        jar.writestr("__main__.py", _LAUNCHER_MAIN)
        _add_folder(jar, package, spark_checkpoint_runtime.__name__)
        for entry in py_files:
            path = Path(entry)
            if path.is_dir():
                _add_folder(jar, path, path.name)
            elif path.suffix in (".zip", ".egg"):
                with zipfile.ZipFile(path) as shipped:
                    for name in shipped.namelist():
                        if not name.endswith("/"):
                            jar.writestr(name, shipped.read(name))
            else:
                jar.write(path, path.name)
    return destination


def write_spec(launcher: Path, storage_options: dict[str, Any]) -> Path:
    """The storage options in a private file (mode 600) beside the launcher: the launcher moves it into the
    driver's own temporary folder as it starts."""
    return write_private_spec(launcher.with_name(f"{launcher.stem}.spec.json"), storage_options)


def _add_folder(jar: zipfile.ZipFile, folder: Path, top: str) -> None:
    for path in sorted(folder.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
            jar.write(path, f"{top}/{path.relative_to(folder).as_posix()}")


def application_args(launcher: Path, runtime_args: list[str], spec: Path | None = None) -> list[str]:
    """``PythonRunner``'s arguments: the file Python runs and the ``PYTHONPATH`` entries (both the launcher,
    by the name the worker gives its copy in the driver's folder, the driver's working directory), the private
    spec file if any, then the runtime's arguments."""
    return [launcher.name, launcher.name, *([f"{SPEC_OPTION}{spec}"] if spec else []), *runtime_args]


class StandaloneDriver:
    """One submitted driver, through the master's REST server.

    :param rest_url: ``http://HOST:PORT`` of the master's REST server.
    :param driver_id: the submission id spark-submit printed (``driver-...``).
    """

    def __init__(self, rest_url: str, driver_id: str, timeout: float = 10.0):
        self.rest_url = rest_url.rstrip("/")
        self.driver_id = driver_id
        self.timeout = timeout

    def _call(self, method: str, action: str) -> dict[str, Any]:
        request = urllib.request.Request(f"{self.rest_url}/v1/submissions/{action}/{self.driver_id}", method=method)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as answer:
                return json.loads(answer.read())
        except urllib.error.HTTPError as exc:  # an answer all the same (Spark's error responses are JSON)
            try:
                return json.loads(exc.read())
            except ValueError:
                raise DriverStateUnknown(f"the master's REST server at {self.rest_url} answered {exc}") from exc
        except (OSError, ValueError) as exc:
            raise DriverStateUnknown(f"the master's REST server at {self.rest_url} did not answer: {exc}") from exc

    def reachable(self) -> bool:
        """Whether the master's REST server answers at all (for any driver id, known or not)."""
        try:
            self._call("GET", "status")
        except DriverStateUnknown:
            return False
        return True

    def state(self) -> str:
        """The driver's state as the master has it (``RUNNING``, ``FINISHED``, ``FAILED``, ``KILLED``...)."""
        answer = self._call("GET", "status")
        if not answer.get("success", True) and "driverState" not in answer:
            raise DriverStateUnknown(f"the master does not know driver {self.driver_id}: {answer.get('message')}")
        return str(answer.get("driverState") or "UNKNOWN")

    def kill(self) -> bool:
        """Ask the master to kill the driver; whether it accepted."""
        return bool(self._call("POST", "kill").get("success"))

    def wait(self, poll_seconds: float = 2.0, tolerated_misses: int = 10) -> str:
        """Poll until the driver's state is final; that state. A master that does not answer
        ``tolerated_misses`` times in a row ends the wait with ``DriverStateUnknown``."""
        misses = 0
        while True:
            try:
                state = self.state()
                misses = 0
            except DriverStateUnknown:
                misses += 1
                if misses > tolerated_misses:
                    raise
                state = "UNKNOWN"
            if state in FINAL_STATES:
                return state
            time.sleep(poll_seconds)

    def kill_later(self, seconds: float, remove: list[Path] | None = None) -> subprocess.Popen:
        """Kill the driver ``seconds`` from now unless it has ended, from a process of its own that outlives this
        one (Airflow SIGKILLs a task about 5 s after asking it to stop; a graceful stop takes longer); then
        remove the files in ``remove`` (the launcher, which this task may no longer live to remove)."""
        command = [sys.executable, "-m", __name__, self.rest_url, self.driver_id, str(seconds)]
        command += [str(path) for path in remove or []]
        return subprocess.Popen(
            command,
            start_new_session=True,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )


def kill_driver(driver: StandaloneDriver) -> str | None:
    """Ask the master to kill ``driver``: what was killed, or None when the master refused or did not answer
    (a kill watch asks again at its next look)."""
    try:
        return f"driver {driver.driver_id}" if driver.kill() else None
    except DriverStateUnknown:
        return None


def _kill_after(rest_url: str, driver_id: str, seconds: float, remove: list[str]) -> int:
    driver = StandaloneDriver(rest_url, driver_id)
    deadline = time.monotonic() + seconds
    ended = False
    while not ended and time.monotonic() < deadline:
        try:
            ended = driver.state() in FINAL_STATES
        except DriverStateUnknown:
            pass
        if not ended:
            time.sleep(1.0)
    try:
        code = 0 if ended or driver.kill() else 1
    except DriverStateUnknown:
        code = 1
    for path in remove:
        Path(path).unlink(missing_ok=True)
    return code


if __name__ == "__main__":  # the delayed kill of ``kill_later``
    sys.exit(_kill_after(sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4:]))
