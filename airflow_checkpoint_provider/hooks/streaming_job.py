"""Submitting the checkpointing runtime with apache-airflow-providers-apache-spark's SparkSubmitHook.

The runtime package ships with every submission (zipped into ``--py-files``), so the Spark side needs
nothing of ours installed. Storage options (credentials) travel in a private spec file, never on the
command line that SparkSubmitHook logs. In cluster deploy mode on YARN or Kubernetes the spec file travels
in a one-file archive (``--archives``), which both unpack into the driver's working directory. On a standalone
master, which spark-submit refuses for Python in cluster deploy mode, the job goes as a launcher jar instead
(``standalone_driver``).
"""

from __future__ import annotations

import os
import socket
import subprocess
import tempfile
import zipfile
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook
from airflow.sdk import BaseHook, Connection
from airflow.sdk.exceptions import AirflowException, AirflowFailException, AirflowNotFoundException

import spark_checkpoint_runtime
from airflow_checkpoint_provider.hooks.kill_watch import process_tree_killer
from airflow_checkpoint_provider.hooks.standalone_driver import (
    PYTHON_RUNNER,
    DriverStateUnknown,
    StandaloneDriver,
    application_args,
    build_launcher,
    is_standalone_cluster,
    kill_driver,
    write_spec,
)
from airflow_checkpoint_provider.hooks.storage_options import write_private_spec

#: The private spec file's name, and in cluster deploy mode on YARN or Kubernetes the folder its archive
#: unpacks into, in the driver's working directory (``--archives FILE#NAME``).
SPEC_FILE = "storage-spec.json"
SPEC_ARCHIVE = "checkpoint-spec"


@dataclass(frozen=True)
class SparkTarget:
    """Where spark-submit sends a job, as the Spark connection says.

    :param master: the master URL as spark-submit gets it (``local[*]``, ``spark://...``, ``yarn``, ``k8s://...``).
    :param deploy_mode: ``cluster``, ``client`` or None (client).
    :param rest_url: a standalone master's REST server (its ``rest-scheme`` and ``rest-port`` extras, default
        ``http`` and 6066, Spark's own port), which answers and kills drivers in cluster deploy mode; None for
        other masters.
    """

    master: str
    deploy_mode: str | None
    rest_url: str | None

    @property
    def driver_on_cluster(self) -> bool:
        """Whether the driver runs on the cluster, not beside the task (cluster deploy mode)."""
        return self.deploy_mode == "cluster"

    @property
    def standalone_cluster(self) -> bool:
        """Whether the driver runs on a standalone worker (the launcher jar, ``standalone_driver``)."""
        return is_standalone_cluster(self.master, self.deploy_mode)


def runtime_entry_point() -> str:
    """The ``job.py`` that spark-submit runs (the installed runtime's own file)."""
    return str(Path(spark_checkpoint_runtime.__file__).parent / "job.py")


def zip_package(folder: Path, destination: Path, *, import_name: str | None = None) -> Path:
    """Zip a Python package folder (without caches) so ``--py-files`` can ship it.

    ``import_name`` is the top-level name inside the zip (default: the folder's name). The runtime's
    source folder is ``runtime/`` in a checkout but imports as ``spark_checkpoint_runtime``.
    """
    top = Path(import_name or folder.name)
    with zipfile.ZipFile(destination, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(folder.rglob("*")):
            if "__pycache__" in path.parts or path.suffix == ".pyc" or not path.is_file():
                continue
            archive.write(path, top / path.relative_to(folder))
    return destination


class StreamingJobHook(BaseHook):
    """Submits ``runtime/job.py`` through SparkSubmitHook on any master (local, standalone, YARN, k8s), in
    client or cluster deploy mode (the Spark connection's ``deploy-mode`` extra).

    :param conn_id: the Spark connection; it must exist (SparkSubmitHook alone would fall back to YARN).
    :param conf: Spark confs for spark-submit.
    :param py_files: extra files for ``--py-files``; a package folder is zipped for you.
    :param env_vars: environment for spark-submit.
    :param name: the Spark application's name (the Spark UI and the cluster's application list show it).
    :param shared_folder: a folder every Spark worker reads (the job's ``working_dir``): in cluster deploy mode
        on a standalone master the launcher jar goes there.
    """

    def __init__(
        self,
        *,
        conn_id: str = "spark_default",
        conf: dict[str, Any] | None = None,
        py_files: list[str] | None = None,
        env_vars: dict[str, str] | None = None,
        name: str = "checkpointed-streaming-job",
        shared_folder: str | None = None,
        **kwargs: Any,
    ):
        super().__init__(**kwargs)
        self.conn_id = conn_id
        self.conf = dict(conf or {})
        self.py_files = list(py_files or [])
        self.env_vars = dict(env_vars or {})
        self.name = name
        self.shared_folder = shared_folder
        self._submit_hook: SparkSubmitHook | None = None
        self.driver: StandaloneDriver | None = None  # in cluster deploy mode on a standalone master
        self.cluster_files: list[Path] = []  # what that submission wrote: the launcher, the private spec

    def check_spark_connection(self) -> Connection:
        """The Spark connection; fail fast, and clearly, when it does not exist."""
        try:
            return self.get_connection(self.conn_id)
        except AirflowNotFoundException:
            raise AirflowFailException(
                f"Spark connection {self.conn_id!r} is not defined. Create it (for local Spark: "
                f'AIRFLOW_CONN_{self.conn_id.upper()}=\'{{"conn_type": "spark", "host": "local[*]"}}\') '
                "or pass conn_id; without it SparkSubmitHook would silently submit to YARN."
            ) from None

    def pin_spark_ui(self) -> str | None:
        """The driver's Spark UI URL, fixing ``spark.ui.port`` to a free port unless the conf sets one.

        None when the UI is disabled or the driver runs on the cluster (``deploy-mode: cluster`` in the Spark
        connection): then it is not on this machine.
        """
        if str(self.conf.get("spark.ui.enabled", "true")).lower() == "false":
            return None
        if self.target.driver_on_cluster:
            return None
        if not self.conf.get("spark.ui.port"):
            with socket.socket() as probe:
                probe.bind(("", 0))
                self.conf["spark.ui.port"] = str(probe.getsockname()[1])
        host = self.conf.get("spark.driver.host") or socket.gethostname()
        return f"http://{host}:{self.conf['spark.ui.port']}"

    def ship_files(self, workdir: Path) -> list[str]:
        """The runtime zip plus the user's py_files (package folders zipped)."""
        package = Path(spark_checkpoint_runtime.__file__).parent
        name = spark_checkpoint_runtime.__name__
        files = [str(zip_package(package, workdir / f"{name}.zip", import_name=name))]
        for entry in self.py_files:
            path = Path(entry)
            if path.is_dir():
                files.append(str(zip_package(path, workdir / f"{path.name}.zip")))
            else:
                files.append(entry)
        return files

    @cached_property
    def target(self) -> SparkTarget:
        """Where the job goes, resolved once per task (each lookup may be a secrets backend's)."""
        extra = self.check_spark_connection().extra_dejson or {}
        resolved = SparkSubmitHook(conn_id=self.conn_id)._connection  # the master as spark-submit gets it
        master, rest_url = resolved["master"], None
        if master.startswith("spark://"):
            host = master.removeprefix("spark://").split(",")[0].rsplit(":", 1)[0]
            rest_url = f"{extra.get('rest-scheme', 'http')}://{host}:{int(extra.get('rest-port', 6066))}"
        return SparkTarget(master, resolved.get("deploy_mode"), rest_url)

    def runs_on_standalone_cluster(self) -> bool:
        """Whether the Spark connection runs the driver on a standalone cluster (cluster deploy mode)."""
        return self.target.standalone_cluster

    def submit(self, runtime_args: list[str], storage_options: dict[str, Any], workdir: Path) -> None:
        """Run the job to its end: spark-submit to completion, or in cluster deploy mode on a standalone master
        the driver on the cluster; raise ``AirflowException`` if it fails."""
        if self.runs_on_standalone_cluster():
            files = self.start_on_standalone_cluster(runtime_args, storage_options, workdir)
            try:
                state = self.driver.wait()
            except DriverStateUnknown as exc:
                # The driver may run on: it is asked to end (the master may answer again) before the task fails.
                self.driver.kill_later(0.0, files)
                raise AirflowException(f"lost track of driver {self.driver.driver_id}: {exc}") from exc
            finally:
                for path in files:
                    path.unlink(missing_ok=True)
            if state != "FINISHED":
                raise AirflowException(
                    f"driver {self.driver.driver_id} ended {state} on the cluster; the worker's driver log has why"
                )
            return
        self._submit_hook = self.spark_submission(runtime_args, storage_options, workdir)
        self._submit_hook.submit(application=runtime_entry_point())

    def spark_submission(
        self, runtime_args: list[str], storage_options: dict[str, Any], workdir: Path
    ) -> SparkSubmitHook:
        """spark-submit of the runtime (``runtime_entry_point``) for a driver beside the task, or on YARN or
        Kubernetes (cluster deploy mode), with the files it needs written into ``workdir``."""
        args, archives = list(runtime_args), None
        if storage_options:
            spec = write_private_spec(workdir / SPEC_FILE, storage_options)
            if self.target.driver_on_cluster:
                # YARN and Kubernetes unpack --archives into the driver's working directory (a path on this
                # machine would mean nothing there); --files would land elsewhere on Kubernetes' driver.
                archive = workdir / f"{SPEC_ARCHIVE}.zip"
                with zipfile.ZipFile(archive, "w") as packed:
                    packed.write(spec, SPEC_FILE)
                archives = f"{archive}#{SPEC_ARCHIVE}"
                args += ["--spec", f"{SPEC_ARCHIVE}/{SPEC_FILE}"]
            else:
                args += ["--spec", str(spec)]
        return SparkSubmitHook(
            conf=self.conf,
            conn_id=self.conn_id,
            py_files=",".join(self.ship_files(workdir)),
            archives=archives,
            env_vars=self.env_vars or None,
            name=self.name,
            application_args=args,
        )

    def kill_submission(self) -> str | None:
        """Kill what this task submitted, wherever the driver runs, and say what was killed (None: nothing ran).

        spark-submit's process tree for a driver beside the task; a driver on YARN or Kubernetes (cluster deploy
        mode) through SparkSubmitHook's own kill (``yarn application -kill``, the driver pod's deletion); a
        driver on a standalone master through its REST server.
        """
        driver = self.cluster_driver()
        if driver is not None:
            return kill_driver(driver)
        spark_submit = process_tree_killer(lambda: self.process.pid if self.process is not None else None)
        submission = self._submit_hook
        if self.target.driver_on_cluster and submission is not None:
            # Before spark-submit dies: SparkSubmitHook kills the application only while spark-submit runs.
            application = submission._yarn_application_id or submission._kubernetes_driver_pod
            if application is None:
                return None  # not known yet: the kill watch asks again at its next look
            submission.on_kill()
            spark_submit()
            return f"application {application} on {self.target.master}"
        return spark_submit()

    def start_on_standalone_cluster(
        self, runtime_args: list[str], storage_options: dict[str, Any], folder: Path
    ) -> list[Path]:
        """Submit the launcher jar with ``PythonRunner`` as its main class (``standalone_driver``); ``driver``
        then follows it through the master's REST server. The files written for it (the launcher, the private
        spec): the caller removes them once the driver has ended (the worker copies the launcher as it starts
        the driver, which moves the spec away)."""
        if self.env_vars:  # SparkSubmitHook refuses them there: said before anything is submitted
            raise AirflowFailException(
                "env_vars cannot reach a driver on a standalone cluster (cluster deploy mode); pass them as Spark "
                "confs (spark.driverEnv.NAME, spark.executorEnv.NAME)"
            )
        master, rest_url = self.target.master, self.target.rest_url
        if not StandaloneDriver(rest_url, "driver-probe").reachable():
            raise AirflowFailException(
                f"the Spark master's REST server does not answer at {rest_url}: cluster deploy mode on a standalone "
                "master needs it to follow and kill the driver. Start the master with spark.master.rest.enabled=true "
                "and give the Spark connection its port (extra rest-port)"
            )
        handle, name = tempfile.mkstemp(prefix="checkpointed-job-", suffix=".jar", dir=self.launcher_folder(folder))
        os.close(handle)
        launcher = build_launcher(Path(name), self.py_files)
        files = self.cluster_files = [launcher]
        try:
            spec = write_spec(launcher, storage_options) if storage_options else None
            files += [spec] if spec else []
            self._submit_hook = SparkSubmitHook(
                conf=self.conf,
                conn_id=self.conn_id,
                java_class=PYTHON_RUNNER,
                name=self.name,
                application_args=application_args(launcher, runtime_args, spec),
            )
            self._submit_hook.submit(application=str(launcher))
            driver_id = self.submitted_driver_id()
            if not driver_id:
                raise AirflowException(f"spark-submit printed no driver id for the submission to {master}")
        except BaseException:
            for path in files:
                path.unlink(missing_ok=True)
            raise
        self.driver = StandaloneDriver(rest_url, driver_id)
        self.log.info("driver %s runs on the cluster %s", driver_id, master)
        return files

    def submitted_driver_id(self) -> str | None:
        """The driver id spark-submit printed so far (it prints it before it exits)."""
        return getattr(self._submit_hook, "_driver_id", None) if self._submit_hook else None

    def cluster_driver(self) -> StandaloneDriver | None:
        """The driver on a standalone cluster once spark-submit has printed its id, even while spark-submit
        still runs (None in client mode, or before the id)."""
        driver_id = self.submitted_driver_id()
        if self.driver is None and driver_id and self.target.standalone_cluster:
            return StandaloneDriver(self.target.rest_url, driver_id)
        return self.driver

    def launcher_folder(self, workdir: Path) -> Path:
        """Where the launcher jar goes: every worker must read it (standalone masters ship nothing to the
        driver), so ``shared_folder`` (the job's ``working_dir``) when it is a local path (on a cluster a folder
        every worker mounts, as Spark's working folder must be), else ``workdir`` (one machine)."""
        shared = self.shared_folder
        if not shared or ("://" in shared and not shared.startswith("file://")):
            return workdir
        folder = Path(shared.removeprefix("file://"))
        folder.mkdir(parents=True, exist_ok=True)
        return folder

    @property
    def process(self) -> subprocess.Popen | None:
        return getattr(self._submit_hook, "_submit_sp", None) if self._submit_hook else None
