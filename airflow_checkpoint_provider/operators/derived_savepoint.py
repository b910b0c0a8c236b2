"""The shared task of ``RescaleOperator`` and ``TransformStateOperator``: a runtime command that writes a new
savepoint from a checkpoint or savepoint, run through spark-submit, its savepoint checked and returned."""

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
from spark_checkpoint_runtime.layout import CheckpointFormatError, CheckpointMetadata, key_from


class DerivedSavepointOperator(BaseOperator):
    """Run the runtime's ``command`` on ``source`` and return the savepoint it wrote (see the subclasses).

    It runs through spark-submit on ``conn_id``, in Spark local mode on the worker (the snapshot is
    materialised into a private local folder there): the worker needs room for the state. What the command
    refuses fails definitively with the reason, before anything is written. A retry of the same task
    instance returns the savepoint an earlier try completed, or redoes one a killed try left unfinished (which
    no restore would take: it has no ``_metadata``). Returns the savepoint's path to XCom and pushes
    ``savepoint_id``, ``batch_id`` and ``state_store_provider`` (the state store class the restored job must
    name in its conf).
    """

    command = ""  # the runtime command: rescale or transform
    shared_template_fields: Sequence[str] = (
        "job_name",
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
        self.source = source
        self.checkpoint_root = checkpoint_root
        self.target_directory = target_directory
        self.conn_id = conn_id
        self.conf = conf or {}
        self.env_vars = env_vars or {}
        self.storage_conn_id = storage_conn_id

    def trigger_id(self, context: Context) -> str:
        """The savepoint's name: one per task instance, the same for every try (so a retry finds it)."""
        return key_from(f"{self.command}.{task_instance_name(context)}")

    def command_args(self) -> list[str]:
        """The command's own arguments (checked: a ``ValueError`` here fails the task definitively)."""
        raise NotImplementedError

    def describe(self, meta: CheckpointMetadata) -> str:
        """What the savepoint holds, for the task log."""
        raise NotImplementedError

    def shipped_files(self) -> list[str]:
        """Python files or package folders spark-submit ships to the command (none unless a subclass says)."""
        return []

    def execute(self, context: Context) -> str:
        storage_hook = CheckpointStorageHook(self.storage_conn_id)
        with definitive_arguments(f"{self.command} of job {self.job_name!r}"):
            own = self.command_args()
            self.checkpoint_root = storage_hook.root(self.checkpoint_root)
            storage = storage_hook.storage(self.checkpoint_root, self.job_name)
        trigger_id = self.trigger_id(context)
        args = [self.command, "--job-name", self.job_name, "--checkpoint-root", self.checkpoint_root]
        args += ["--from", str(self.source).strip() or "latest", *own, "--trigger-id", trigger_id]
        if self.target_directory:
            args += ["--target-directory", self.target_directory]
        hook = StreamingJobHook(
            conn_id=self.conn_id,
            conf=self.conf,
            py_files=self.shipped_files(),
            env_vars=self.env_vars,
            name=f"{self.command}:{self.job_name}",
        )
        with tempfile.TemporaryDirectory(prefix=f"checkpoint-{self.command}-") as workdir:
            try:
                hook.submit(args, storage_hook.storage_options(), Path(workdir))
            except AirflowException as exc:
                returncode = hook.process.returncode if hook.process is not None else None
                # Bad input (a snapshot or function the command refuses): no retry helps. Its reason is the
                # last line of the task log above.
                if returncode == EXIT_BAD_INPUT:
                    raise AirflowFailException(f"{self.command} of job {self.job_name!r} refused: {exc}") from exc
                raise
        folder = storage.savepoints.folder_for(trigger_id, self.target_directory or None)
        try:
            meta = folder.validate().metadata
        except CheckpointFormatError as exc:
            raise AirflowException(
                f"{self.command} of job {self.job_name!r} ended without its savepoint: {exc}"
            ) from exc
        self.log.info(
            "job %r: %s: savepoint %d (batch %d) at %s",
            self.job_name,
            self.describe(meta),
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
