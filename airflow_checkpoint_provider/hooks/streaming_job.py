"""Submitting the checkpointing runtime with apache-airflow-providers-apache-spark's SparkSubmitHook.

The runtime package ships with every submission (zipped into ``--py-files``), so the Spark side needs
nothing of ours installed. Storage options (credentials) travel in a private spec file, never on the
command line that SparkSubmitHook logs.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import zipfile
from pathlib import Path
from typing import Any

from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook
from airflow.sdk import BaseHook
from airflow.sdk.exceptions import AirflowFailException, AirflowNotFoundException

import spark_checkpoint_runtime


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
    """Submits ``runtime/job.py`` through SparkSubmitHook on any master (local, standalone, YARN, k8s).

    :param conn_id: the Spark connection; it must exist (SparkSubmitHook alone would fall back to YARN).
    :param conf: Spark confs for spark-submit.
    :param py_files: extra files for ``--py-files``; a package folder is zipped for you.
    :param env_vars: environment for spark-submit.
    :param name: the Spark application's name (the Spark UI and the cluster's application list show it).
    """

    def __init__(
        self,
        *,
        conn_id: str = "spark_default",
        conf: dict[str, Any] | None = None,
        py_files: list[str] | None = None,
        env_vars: dict[str, str] | None = None,
        name: str = "checkpointed-streaming-job",
        **kwargs: Any,
    ):
        super().__init__(**kwargs)
        self.conn_id = conn_id
        self.conf = dict(conf or {})
        self.py_files = list(py_files or [])
        self.env_vars = dict(env_vars or {})
        self.name = name
        self._submit_hook: SparkSubmitHook | None = None

    def check_spark_connection(self) -> None:
        """Fail fast, and clearly, when the Spark connection does not exist."""
        try:
            self.get_connection(self.conn_id)
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
        self.check_spark_connection()
        extra = self.get_connection(self.conn_id).extra_dejson or {}
        if extra.get("deploy-mode") == "cluster":
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

    def submit(self, runtime_args: list[str], storage_options: dict[str, Any], workdir: Path) -> None:
        """Run spark-submit to completion; raise ``AirflowException`` if it exits non-zero."""
        self.check_spark_connection()
        args = list(runtime_args)
        if storage_options:
            spec = workdir / "storage-spec.json"
            descriptor = os.open(spec, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(descriptor, "w") as handle:
                json.dump({"storage_options": storage_options}, handle)
            args += ["--spec", str(spec)]
        self._submit_hook = SparkSubmitHook(
            conf=self.conf,
            conn_id=self.conn_id,
            py_files=",".join(self.ship_files(workdir)),
            env_vars=self.env_vars or None,
            name=self.name,
            application_args=args,
        )
        self._submit_hook.submit(application=runtime_entry_point())

    @property
    def process(self) -> subprocess.Popen | None:
        return getattr(self._submit_hook, "_submit_sp", None) if self._submit_hook else None
