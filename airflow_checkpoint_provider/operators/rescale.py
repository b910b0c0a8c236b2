"""Rescale a job's state to another partition count: a new savepoint written from a checkpoint or savepoint."""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from airflow.sdk import BaseOperator, Context
from airflow.sdk.exceptions import AirflowException, AirflowFailException

from airflow_checkpoint_provider.failures import definitive_arguments
from airflow_checkpoint_provider.hooks.checkpoint_storage import CheckpointStorageHook
from airflow_checkpoint_provider.hooks.streaming_job import StreamingJobHook
from airflow_checkpoint_provider.operators.task_keys import task_instance_name
from spark_checkpoint_runtime.errors import EXIT_BAD_INPUT
from spark_checkpoint_runtime.fingerprint import snapshot_state_store
from spark_checkpoint_runtime.layout import CheckpointFormatError, key_from


class RescaleOperator(BaseOperator):
    """Write a savepoint of the job whose state has ``partitions`` partitions (the runtime's ``rescale``).

    A stateful Spark query's partition count (``spark.sql.shuffle.partitions``) is fixed by its first
    checkpoint. This task reads ``source`` (the latest checkpoint, a ``chk-N`` or a savepoint, typically the
    one ``SavepointOperator(stop=True)`` just took), has Spark move every state row to the partition the new
    count puts it in, and writes the result as a new, self-contained savepoint; the source is only read.
    Restore the job from the returned path (``restore_from``) and it runs at the new count; giving it
    ``spark.sql.shuffle.partitions`` at another count is refused before it starts.

    It runs through spark-submit on ``conn_id``, in Spark local mode on the worker (the snapshot is
    materialised into a private local folder there): the worker needs room for the state, and Spark 4.3 or
    newer for the RocksDB state store (any supported Spark for the HDFS-backed store). What cannot be
    rescaled fails definitively with the reason, before anything is written. A retry of the same task
    instance returns the savepoint an earlier try completed, or redoes one a killed try left unfinished (which
    no restore would take: it has no ``_metadata``). Returns the savepoint's path to XCom and pushes
    ``savepoint_id``, ``batch_id`` and ``state_store_provider`` (the state store class the restored job must
    name in its conf).

    :param job_name: the job (templated).
    :param partitions: the new partition count (templated; a DAG param arrives as text).
    :param source: ``latest`` (default), ``chk-N``, or a savepoint's folder name or path (templated).
    :param checkpoint_root: the job's checkpoint root (templated); default: the Host of the ``storage_conn_id``
        connection.
    :param target_directory: where the savepoint goes; default ``<root>/<job>/savepoints/`` (templated).
    :param conn_id: Spark connection whose spark-submit runs the rescale (default ``spark_default``; templated).
    :param conf: Spark confs for spark-submit, e.g. driver memory for a large state (templated).
    :param env_vars: environment for spark-submit (templated).
    :param storage_conn_id: ``checkpoint_storage`` connection with fsspec storage options, if needed.
    """

    template_fields: Sequence[str] = (
        "job_name",
        "partitions",
        "source",
        "checkpoint_root",
        "target_directory",
        "conn_id",
        "conf",
        "env_vars",
    )
    template_fields_renderers = {"conf": "json", "env_vars": "json"}
    ui_color = "#e8eaf6"

    def __init__(
        self,
        *,
        job_name: str,
        partitions: int | str,
        source: str = "latest",
        checkpoint_root: str | None = None,
        target_directory: str | None = None,
        conn_id: str = "spark_default",
        conf: dict[str, Any] | None = None,
        env_vars: dict[str, str] | None = None,
        storage_conn_id: str | None = None,
        **kwargs: Any,
    ):
        super().__init__(**kwargs)
        self.job_name = job_name
        self.partitions = partitions
        self.source = source
        self.checkpoint_root = checkpoint_root
        self.target_directory = target_directory
        self.conn_id = conn_id
        self.conf = conf or {}
        self.env_vars = env_vars or {}
        self.storage_conn_id = storage_conn_id

    def trigger_id(self, context: Context) -> str:
        """The savepoint's name: one per task instance, the same for every try (so a retry finds it)."""
        return key_from(f"rescale.{task_instance_name(context)}")

    def execute(self, context: Context) -> str:
        storage_hook = CheckpointStorageHook(self.storage_conn_id)
        with definitive_arguments(f"rescale of job {self.job_name!r}"):
            partitions = int(str(self.partitions).strip())
            if partitions < 1:
                raise ValueError(f"partitions must be at least 1, not {partitions}")
            self.checkpoint_root = storage_hook.root(self.checkpoint_root)
            storage = storage_hook.storage(self.checkpoint_root, self.job_name)
        trigger_id = self.trigger_id(context)
        args = ["rescale", "--job-name", self.job_name, "--checkpoint-root", self.checkpoint_root]
        args += ["--from", str(self.source).strip() or "latest", "--partitions", str(partitions)]
        args += ["--trigger-id", trigger_id]
        if self.target_directory:
            args += ["--target-directory", self.target_directory]
        hook = StreamingJobHook(
            conn_id=self.conn_id, conf=self.conf, env_vars=self.env_vars, name=f"rescale:{self.job_name}"
        )
        with tempfile.TemporaryDirectory(prefix="checkpoint-rescale-") as workdir:
            try:
                hook.submit(args, storage_hook.storage_options(), Path(workdir))
            except AirflowException as exc:
                returncode = hook.process.returncode if hook.process is not None else None
                # Bad input (a snapshot that cannot be rescaled as asked): no retry helps. Its reason is the
                # last line of the task log above.
                if returncode == EXIT_BAD_INPUT:
                    raise AirflowFailException(f"rescale of job {self.job_name!r} refused: {exc}") from exc
                raise
        folder = storage.savepoints.folder_for(trigger_id, self.target_directory or None)
        try:
            meta = folder.validate().metadata
        except CheckpointFormatError as exc:
            raise AirflowException(f"rescale of job {self.job_name!r} ended without its savepoint: {exc}") from exc
        self.log.info(
            "job %r rescaled to %d partitions: savepoint %d (batch %d) at %s",
            self.job_name,
            partitions,
            meta.id,
            meta.batch_id,
            folder.url,
        )
        context["ti"].xcom_push(key="savepoint_id", value=meta.id)
        context["ti"].xcom_push(key="batch_id", value=meta.batch_id)
        # The job restored from it must name the same state store (a switch is refused): give it the class.
        provider = snapshot_state_store(meta.fingerprint).get("provider_class")
        context["ti"].xcom_push(key="state_store_provider", value=provider)
        return folder.url
