"""Transform a job's state with a Python function: a new savepoint written from a checkpoint or savepoint."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow_checkpoint_provider.operators.derived_savepoint import DerivedSavepointOperator
from airflow_checkpoint_provider.operators.rescale import partition_count
from spark_checkpoint_runtime.layout import CheckpointMetadata


class TransformStateOperator(DerivedSavepointOperator):
    """Write a savepoint of the job whose state rows ``function`` changed (the runtime's ``transform``).

    The State Processor API's use case: drop poisoned keys, fix values, or bootstrap state from a batch
    DataFrame. ``function`` (``MODULE:NAME`` importable by spark-submit's Python, or ``FILE.py:NAME`` on the
    worker) takes one store's state rows as a DataFrame (``key``, ``value``, ``partition_id``, as the
    ``state`` command reads them) and returns a DataFrame with the same ``key`` and ``value`` columns; each
    row is written to the partition Spark's shuffle looks for its key in. With ``partitions`` the state is
    rescaled to that count first. A transformWithState operator's state is transformed one state variable
    at a time (``state_var``): the function gets ``key`` and ``value``, ``list_value`` (an array, in order) or
    ``map_value`` per key, and the variable's TTL indexes and counts are rebuilt from its result; ``timers``
    transforms its registered timers instead (``key``, ``expiration_timestamp_ms``, a row per timer). The
    HDFS-backed state store (Spark's default) on Spark 4.0+; RocksDB state on Spark 4.3+ (written by Spark's
    state rewriter as the next batch; rescale it first with ``RescaleOperator``, since ``partitions`` is
    refused for it).

    Restore the job from the returned path (``restore_from``): the restore's compatibility pre-flight checks
    it as any snapshot. What cannot be transformed (a result whose columns differ from the
    state's, a key returned twice, a function that fails) fails definitively with the reason, before anything
    is written. A retry of the same task instance returns the savepoint an earlier try completed. Returns the
    savepoint's path to XCom and pushes ``savepoint_id``, ``batch_id`` and ``state_store_provider``.

    :param job_name: the job (templated).
    :param function: ``MODULE:NAME`` or ``FILE.py:NAME`` (templated).
    :param operator_id: the stateful operator's id (default 0; templated).
    :param store_name: the operator's store (``default``; a join has four; templated).
    :param state_var: transformWithState: the state variable whose rows the function gets (templated).
    :param timers: transformWithState: the function gets the operator's registered timers instead.
    :param partitions: rescale to this partition count first (templated; default: keep the count).
    :param source: ``latest`` (default), ``chk-N``, or a savepoint's folder name or path (templated).
    :param checkpoint_root: the job's checkpoint root (templated); default: the Host of the ``storage_conn_id``
        connection.
    :param target_directory: where the savepoint goes; default ``<root>/<job>/savepoints/`` (templated).
    :param conn_id: Spark connection whose spark-submit runs the transform (default ``spark_default``).
    :param conf: Spark confs for spark-submit (templated).
    :param py_files: Python files, zips or package folders shipped with spark-submit: the function's module
        (a folder is zipped, as for the job operator).
    :param env_vars: environment for spark-submit (templated).
    :param storage_conn_id: ``checkpoint_storage`` connection with fsspec storage options, if needed.
    """

    command = "transform"
    template_fields: Sequence[str] = (
        *DerivedSavepointOperator.shared_template_fields,
        "function",
        "operator_id",
        "store_name",
        "state_var",
        "partitions",
    )

    def __init__(
        self,
        *,
        job_name: str,
        function: str,
        operator_id: int | str = 0,
        store_name: str = "default",
        state_var: str | None = None,
        timers: bool = False,
        partitions: int | str | None = None,
        py_files: list[str] | None = None,
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
        self.function = function
        self.operator_id = operator_id
        self.store_name = store_name
        self.state_var = state_var
        self.timers = timers
        self.partitions = partitions
        self.py_files = list(py_files or [])

    def shipped_files(self) -> list[str]:
        return self.py_files

    def command_args(self) -> list[str]:
        function = str(self.function).strip()
        if ":" not in function:
            raise ValueError(f"function must be MODULE:NAME or FILE.py:NAME, not {function!r}")
        args = ["--function", function, "--operator", str(int(str(self.operator_id).strip()))]
        args += ["--store-name", str(self.store_name).strip() or "default"]
        if self._state_var():
            if self.timers:  # checked here, once the template is rendered
                raise ValueError("state_var and timers name different state: a transform takes one of them")
            args += ["--state-var", self._state_var()]
        if self.timers:
            args.append("--timers")
        if self.partitions not in (None, ""):
            args += ["--partitions", str(partition_count(self.partitions))]
        return args

    def _state_var(self) -> str:
        """The rendered state variable, trimmed; empty for none."""
        return str(self.state_var or "").strip()

    def describe(self, meta: CheckpointMetadata) -> str:
        rows = (meta.restored_from or {}).get("transformed_rows")
        where = f"operator {self.operator_id} store {self.store_name!r}"
        if self._state_var():
            where += f" state variable {self._state_var()!r}"
        if self.timers:
            where += " timers"
        return f"state of {where} transformed with {self.function}: {rows} rows"
