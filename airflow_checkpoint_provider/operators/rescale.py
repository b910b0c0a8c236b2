"""Rescale a job's state to another partition count: a new savepoint written from a checkpoint or savepoint."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow_checkpoint_provider.operators.derived_savepoint import DerivedSavepointOperator
from spark_checkpoint_runtime.layout import CheckpointMetadata


def partition_count(value: int | str | None, name: str = "partitions") -> int:
    """A partition count given to an operator (a DAG param arrives as text); ``ValueError`` below 1."""
    count = int(str(value).strip())
    if count < 1:
        raise ValueError(f"{name} must be at least 1, not {count}")
    return count


class RescaleOperator(DerivedSavepointOperator):
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

    command = "rescale"
    template_fields: Sequence[str] = (*DerivedSavepointOperator.shared_template_fields, "partitions")

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
        super().__init__(
            job_name=job_name,
            source=source,
            checkpoint_root=checkpoint_root,
            target_directory=target_directory,
            conn_id=conn_id,
            conf=conf,
            env_vars=env_vars,
            storage_conn_id=storage_conn_id,
            **kwargs,
        )
        self.partitions = partitions

    def command_args(self) -> list[str]:
        return ["--partitions", str(partition_count(self.partitions))]

    def describe(self, meta: CheckpointMetadata) -> str:
        return f"rescaled to {partition_count(self.partitions)} partitions"
