"""Transform: a new savepoint whose state rows a Python function changed (Flink's State Processor API use case).

    python -m spark_checkpoint_runtime transform --job-name J --checkpoint-root R
        --from latest|chk-N|<savepoint name or path> --function MODULE:NAME|FILE.py:NAME
        [--operator ID] [--store-name NAME] [--state-var NAME | --timers] [--partitions N] [--target-directory D]
        [--trigger-id T] [--spec F]

The function takes the store's state rows as a DataFrame, exactly as ``state`` reads them (``key``,
``value``, ``partition_id``; a transformWithState variable one row per key, ``state_variables``), and
returns a DataFrame with the same ``key`` and ``value`` columns: filter out poisoned keys, fix values, or
union rows built from a batch DataFrame to bootstrap state (the session is ``rows.sparkSession``). Each
returned row is written to the partition Spark's shuffle sends its key to, so
``partition_id`` is ignored. With ``--partitions N`` the state is rescaled to N partitions first (as
``rescale`` does) and the function's rows are written at N. The result is written as a savepoint of the job,
as a rescale's is (``derived_savepoint``): the source is only read, and the savepoint's ``_metadata`` is
written last. Restore it with ``--restore-from <printed path>``; the restore's compatibility pre-flight
checks it as it checks any snapshot.

The HDFS-backed store (Spark's default) on Spark 4.0+ (the state data source reads the rows): its files are
written here. RocksDB state on Spark 4.3+: Spark's own state rewriter writes it, as the next batch
(``rocksdb_transform``); ``--partitions`` is refused for it (rescale first). A transformWithState operator's
state is transformed one state variable at a time (``--state-var``, ``state_variables``), or its timers
(``--timers``). Refused with a clear
error, before anything is saved: state columns of a type that cannot be written here (intervals, variants), a
result whose columns differ from the input's, a null key, a key returned twice. Row checksums (Spark 4.2+'s
``rowChecksum.enabled``) are written as Spark writes them.

Exit 0 with the savepoint's path as the last line on stdout; exit 2 with a one-line reason for bad input.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import struct
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spark_checkpoint_runtime.derived_savepoint import (
    Derivation,
    add_source_arguments,
    add_target_arguments,
    derive_savepoint,
    keyed_partition_count,
    source_snapshot,
)
from spark_checkpoint_runtime.durations import format_bytes, format_duration
from spark_checkpoint_runtime.errors import EXIT_BAD_INPUT, EXIT_JOB_FAILED, EXIT_OK
from spark_checkpoint_runtime.hdfs_rescale import CODEC_CONF, DEFAULT_CODEC, ROW_CHECKSUM, pinned_conf, store_folders
from spark_checkpoint_runtime.hdfs_state_files import (
    HdfsRescaleError,
    StateFileCodec,
    replace_store_state,
    with_row_checksum,
)
from spark_checkpoint_runtime.key_partitioning import (
    UnsupportedKeyType,
)
from spark_checkpoint_runtime.layout import CheckpointFormatError, CheckpointMetadata, JobFolder, ValidCheckpoint
from spark_checkpoint_runtime.options import CommandParser, OptionsError, load_spec
from spark_checkpoint_runtime.rescale import check_rescalable, rescale_hdfs_state, rocksdb_state
from spark_checkpoint_runtime.rocksdb_transform import (
    DEFAULT_COLUMN_FAMILY,
    STATE_REWRITER_VERSION,
    RocksDBTransformError,
    _StoreRewrite,
    conformed,
    only_default_family,
    partition_key_column,
)
from spark_checkpoint_runtime.rocksdb_transform import rewrite as rewrite_rocksdb
from spark_checkpoint_runtime.snapshot import SHUFFLE_PARTITIONS, Capture
from spark_checkpoint_runtime.spark_versions import (
    ROW_CHECKSUMS,
    UnsupportedSparkFeature,
    parse_version,
    require,
)
from spark_checkpoint_runtime.state_inspection import (
    DEFAULT_STORE,
    STATE_DATA_SOURCE,
    local_session,
    partition_count,
    rows,
    spark_error_line,
)
from spark_checkpoint_runtime.state_variables import (
    TIMERS,
    StateVariable,
    checked_values,
    counted_timers,
    transformed_variable,
    variable_replacement,
)
from spark_checkpoint_runtime.transform_rows import (
    TransformRefused,
    counted_rows,
    encoder,
    normalises_float_keys,
    raw_column,
    stored_records,
)
from spark_checkpoint_runtime.unsafe_rows import type_name
from spark_checkpoint_runtime.working_copy import WorkingCopy

COMMAND = "transform"
WRITABLE_TYPES = {"boolean", "byte", "short", "integer", "long", "float", "double", "string", "binary", "date"}
WRITABLE_TYPES |= {"timestamp", "timestamp_ntz", "null", "void"}  # NullType is "void" in its JSON since Spark 3.5

StateFunction = Callable[[Any], Any]


def parser() -> argparse.ArgumentParser:
    found = CommandParser(prog=f"python -m spark_checkpoint_runtime {COMMAND}", allow_abbrev=False)
    add_source_arguments(found)
    found.add_argument(
        "--function",
        required=True,
        help="MODULE:NAME (importable) or FILE.py:NAME: takes the state rows as a DataFrame, returns the new rows",
    )
    found.add_argument("--operator", type=int, default=0, help="the stateful operator's id (default 0)")
    found.add_argument("--store-name", default=DEFAULT_STORE, help="the operator's store (joins have four)")
    variable = found.add_mutually_exclusive_group()
    variable.add_argument("--state-var", help="transformWithState: the state variable whose rows the function gets")
    variable.add_argument("--timers", action="store_true", help="transformWithState: its registered timers")
    found.add_argument("--partitions", type=int, help="rescale the state to this partition count first")
    add_target_arguments(found)
    return found


def load_function(reference: str) -> StateFunction:
    """The callable ``MODULE:NAME`` or ``FILE.py:NAME`` names; ``TransformRefused`` with the reason otherwise."""
    where, _, name = reference.rpartition(":")
    if not where or not name:
        raise TransformRefused(f"--function {reference!r} must be MODULE:NAME or FILE.py:NAME")
    try:
        if where.endswith(".py"):
            path = Path(where)
            if not path.is_file():
                raise TransformRefused(f"--function {reference!r}: no file {where}")
            spec = importlib.util.spec_from_file_location(f"_state_transform_{path.stem}", path)
            if spec is None or spec.loader is None:
                raise TransformRefused(f"--function {reference!r}: {where} cannot be loaded as Python")
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
        else:
            module = importlib.import_module(where)
    except TransformRefused:
        raise
    except Exception as exc:  # the user's module failing to import is their input's error, said in one line
        raise TransformRefused(f"--function {reference!r} could not be loaded: {type(exc).__name__}: {exc}") from None
    function = getattr(module, name, None)
    if not callable(function):
        raise TransformRefused(f"--function {reference!r}: {where} has no function {name!r}")
    return function


def check_transformable(source: ValidCheckpoint, partitions: int | None = None) -> int:
    """Refuse (``TransformRefused``) what cannot be transformed to ``partitions`` (None: the source's count),
    before Spark starts; the source's partition count."""
    meta = source.metadata
    if not meta.fingerprint.get("operators"):
        raise TransformRefused(f"{source.url} holds no state (its pipeline has no stateful operator)")
    current = keyed_partition_count(source, TransformRefused, "transformed")
    if partitions is not None and partitions != current:
        if rocksdb_state(meta):
            raise TransformRefused(
                f"{source.url} holds RocksDB state: rescale it first (rescale --partitions {partitions}), then "
                "transform the rescaled savepoint"
            )
        check_rescalable(source, partitions)
    return current


def transform(
    spark: Any,
    storage: JobFolder,
    source: ValidCheckpoint,
    function: StateFunction,
    function_name: str,
    operator: int = 0,
    store: str = DEFAULT_STORE,
    target_directory: str | None = None,
    trigger_id: str | None = None,
    partitions: int | None = None,
    state_var: str | None = None,
    timers: bool = False,
) -> tuple[str, CheckpointMetadata]:
    """Write the savepoint of ``source`` whose ``operator``/``store`` state is what ``function`` returns; its
    location and ``_metadata`` (``restored_from`` names the function, the store and the rows written). With
    ``partitions`` (another count than the source's) the state is rescaled to it first. A transformWithState
    operator's state is transformed one variable at a time: ``state_var`` names it (``state_variables``), or
    ``timers`` asks for its registered timers.

    With ``trigger_id`` a completed savepoint of the same source, function and store is returned as it is.
    """
    if state_var is not None and timers:
        raise TransformRefused("--state-var and --timers name different state: transform one at a time")
    current = check_transformable(source, partitions)
    running = parse_version(spark.version)
    require("Transforming state (Spark's state data source)", STATE_DATA_SOURCE, running)
    pinned = source.metadata.fingerprint.get("pinned_confs") or {}
    if str(pinned.get(ROW_CHECKSUM, "false")).lower() == "true":
        require(f"Transforming state whose rows carry checksums ({ROW_CHECKSUM})", ROW_CHECKSUMS, running)
    rocksdb = rocksdb_state(source.metadata)
    if rocksdb:
        require("Transforming RocksDB state (Spark's state rewriter)", STATE_REWRITER_VERSION, running)
    described: dict[str, Any] = {"transformed_with": function_name, "transformed_store": [operator, store]}
    if state_var is not None:
        described["transformed_state_var"] = state_var
    if timers:
        described["transformed_timers"] = True
    if partitions is not None and partitions != current:
        described["rescaled_from_partitions"] = current
    else:
        partitions = current

    def rewrite(working: WorkingCopy) -> int:
        if partitions != current:
            rescale_hdfs_state(spark, source, working, partitions)
        try:
            batch_id, described["transformed_rows"] = _rewrite_store(
                spark, source, working, function, (operator, store), partitions, rocksdb, state_var, timers
            )
        except (HdfsRescaleError, RocksDBTransformError, UnsupportedKeyType, struct.error) as exc:
            raise TransformRefused(f"{source.url} cannot be transformed: {exc}; nothing was saved") from None
        return batch_id

    def same(found: CheckpointMetadata) -> bool:
        origin = found.restored_from or {}
        asked = all(origin.get(k) == v for k, v in described.items()) and partition_count(found) == partitions
        return origin.get("path") == source.url and asked

    def refused(where: str, found: CheckpointMetadata) -> Exception:
        origin = found.restored_from or {}
        return TransformRefused(
            f"{where} already holds a savepoint (of {origin.get('path')}, "
            f"{origin.get('transformed_with') or 'not a transform'}); a savepoint is never overwritten: use "
            "another --trigger-id or --target-directory"
        )

    def check(snap: Capture) -> None:
        if snap.pinned_confs.get(SHUFFLE_PARTITIONS) != str(partitions):
            raise TransformRefused(
                f"the transform of {source.url} left its batch pinned at "
                f"{snap.pinned_confs.get(SHUFFLE_PARTITIONS)} partitions, not {partitions}; nothing was saved"
            )

    derivation = Derivation(COMMAND, rewrite, described, same, refused, check)
    return derive_savepoint(spark, storage, source, derivation, target_directory, trigger_id)


@dataclass(frozen=True)
class _Result:
    """The function's rows for one store, checked against the state's types (a transformWithState variable's
    values, a list or a map, have no fields of their own: ``value_fields`` is None)."""

    frame: Any
    key_fields: list[dict[str, Any]]
    value_fields: list[dict[str, Any]] | None


def _rewrite_store(
    spark: Any,
    source: ValidCheckpoint,
    working: WorkingCopy,
    function: StateFunction,
    which: tuple[int, str],
    partitions: int,
    rocksdb: bool,
    state_var: str | None = None,
    timers: bool = False,
) -> tuple[int, int]:
    """Replace the state of store ``which`` (operator, store) in the working folder by the function's rows; the
    batch written and the number of rows."""
    from pyspark.sql import functions as F

    operator, store = which
    name, variable = transformed_variable(spark, working.schema_location, operator, state_var, timers)
    found = rows(spark, working.schema_location, source, operator, store, state_var, timers, flatten=False)
    frame = _called(function, found)
    value_column = variable.value_column if variable else "value"
    fields = _checked_result(found, frame, value_column)
    # Evaluated once, here: the checks, the count and the rows written are the same rows, even from a function
    # that is not deterministic.
    result = _Result(frame.localCheckpoint(eager=True), *fields)
    if variable is not None and variable.kind == TIMERS:
        counted = counted_timers(result.frame)
    else:
        counted = counted_rows(result.frame.select("key", F.col(value_column).alias("value")))
    if variable is not None:
        checked_values(result.frame, variable)
    if rocksdb:
        return _write_rocksdb(spark, source, working, result, which, partitions, name, variable), counted
    return source.metadata.batch_id, _write_hdfs(spark, source, working, result, which, partitions)


def _write_hdfs(
    spark: Any, source: ValidCheckpoint, working: WorkingCopy, result: _Result, which: tuple[int, str], partitions: int
) -> int:
    """Our own write of the HDFS-backed store's files at the source's batch; the number of rows."""
    root, (operator, store) = Path(working.spark_path), which
    batch_id = source.metadata.batch_id
    folders = {s.store or DEFAULT_STORE: s for s in store_folders(root / "state" / str(operator))}
    folder = folders[store]
    conf = pinned_conf(root, batch_id)
    normalise = normalises_float_keys(folder.operator_name, parse_version(spark.version))
    with tempfile.TemporaryDirectory(prefix="transform-scratch-", dir=root.parent) as scratch:
        codec = StateFileCodec(spark, str(conf.get(CODEC_CONF) or DEFAULT_CODEC), Path(scratch))
        found_records = stored_records(
            result.frame, result.key_fields, result.value_fields, folder.partition_columns, partitions, normalise
        )
        if str(conf.get(ROW_CHECKSUM, "false")).lower() == "true":  # pinned by the query's first batch
            found_records = ((p, key, with_row_checksum(key, value)) for p, key, value in found_records)
        # A store with no key columns (a global aggregation) lives in partition 0 alone: Spark writes no other.
        written_partitions = partitions if folder.partition_columns else 1
        return replace_store_state(
            codec, root / "state" / str(operator), folder.store, batch_id + 1, written_partitions, found_records
        )


def _write_rocksdb(
    spark: Any,
    source: ValidCheckpoint,
    working: WorkingCopy,
    result: _Result,
    which: tuple[int, str],
    partitions: int,
    name: str | None,
    variable: StateVariable | None,
) -> int:
    """Spark's state rewriter writes the rows (every other store, and every other column family of a
    transformWithState variable's store, as it was) as the next batch; that batch."""
    if variable is not None:
        replacement = variable_replacement(result.frame, variable)
    else:
        replacement = _store_replacement(result, which, normalises_float_keys(name, parse_version(spark.version)))
    store_rewrite = _StoreRewrite(spark, which[0], which[1], replacement, partitions)
    return rewrite_rocksdb(spark, Path(working.spark_path), source.metadata.batch_id, store_rewrite)


def _store_replacement(result: _Result, which: tuple[int, str], normalise: bool) -> Callable[[Any], Any]:
    """The store's rows for Spark's rewriter: the function's, in the default column family."""
    from pyspark.sql import functions as F

    frame = result.frame
    key_type, value_type = frame.schema["key"].dataType, frame.schema["value"].dataType
    raw = frame.select(
        raw_column(frame["key"], key_type).alias("raw_key"),
        raw_column(frame["value"], value_type).alias("raw_value"),
        frame["key"].alias("key"),
    )
    encode_key, encode_value = encoder(result.key_fields, normalise), encoder(result.value_fields or [], False)

    def replacement(found: Any) -> Any:
        only_default_family(found, which)
        partition_type = found.schema["partition_key"].dataType
        written = raw.select(
            partition_key_column(F.col("key"), key_type, partition_type, normalise).alias("partition_key"),
            encode_key(F.col("raw_key")).alias("key_bytes"),
            encode_value(F.col("raw_value")).alias("value_bytes"),
            F.lit(DEFAULT_COLUMN_FAMILY).alias("column_family_name"),
        )
        return conformed(written, found.schema)

    return replacement


def _called(function: StateFunction, found: Any) -> Any:
    """The function's result for the store's rows; ``TransformRefused`` when it raises in Python."""
    try:
        return function(found)
    except Exception as exc:
        if spark_error_line(exc) is not None:
            raise  # Spark refusing what the function asked: said as Spark's refusal
        raise TransformRefused(f"the function failed: {type(exc).__name__}: {exc}; nothing was saved") from None


def _checked_result(
    found: Any, result: Any, value_column: str = "value"
) -> tuple[list[dict[str, Any]], list[dict[str, Any]] | None]:
    """The key and value fields (JSON form) the result must have: the input's, whatever their nullability
    (None for a value that is not a struct: a transformWithState list or map)."""
    if not hasattr(result, "schema") or not hasattr(result, "select"):
        raise TransformRefused(f"the function returned {type(result).__name__}, not a DataFrame")
    names = set(result.schema.fieldNames())
    if not {"key", value_column} <= names:
        raise TransformRefused(
            f"the function's DataFrame has columns {sorted(names)}; it needs 'key' and {value_column!r}"
        )
    fields = []
    for column in ("key", value_column):
        expected, got = found.schema[column].dataType, result.schema[column].dataType
        if expected.simpleString() != got.simpleString():
            raise TransformRefused(
                f"the function's {column!r} column is {got.simpleString()}; the state's is "
                f"{expected.simpleString()} (cast it back)"
            )
        described = expected.jsonValue()
        _check_type(described, column, key=column == "key")
        fields.append(described.get("fields") if isinstance(described, dict) else None)
    return fields[0], fields[1]


def _check_writable(fields: list[dict[str, Any]], where: str, key: bool) -> None:
    for field in fields:
        _check_type(field["type"], f"{where}.{field['name']}", key)


def _check_type(data_type: Any, path: str, key: bool) -> None:
    name = type_name(data_type)
    if name == "struct":
        _check_writable(data_type["fields"], path, key)
    elif name == "array":
        _check_type(data_type["elementType"], f"{path}[]", key)
    elif name == "map" and key:
        # Spark 4 groups by a map sorted by its keys (MapSort) and normalised inside: bytes this writer does not
        # reproduce, so such a key would not be found and its state would start from empty.
        raise TransformRefused(f"the state key column {path} is a map, which transform cannot write as Spark keys it")
    elif name == "map":
        _check_type(data_type["keyType"], f"{path}.key", key)
        _check_type(data_type["valueType"], f"{path}.value", key)
    elif name not in WRITABLE_TYPES and not name.startswith("decimal"):
        raise TransformRefused(f"the state column {path} is of type {name}, which transform cannot write yet")


def main(argv: list[str], spark: Any = None) -> int:
    """Run the ``transform`` command; returns the exit status."""
    try:
        args = parser().parse_args(argv)
        options = (load_spec(args.spec).get("storage_options") or {}) if args.spec else {}
        storage = JobFolder(args.checkpoint_root, args.job_name, options)
        source = source_snapshot(storage, args.source)
        check_transformable(source, args.partitions)  # before Spark starts: bad input fails in a second
        function = load_function(args.function)
        spark = spark or local_session("checkpoint-transform")
        location, meta = transform(
            spark,
            storage,
            source,
            function,
            args.function,
            args.operator,
            args.store_name,
            args.target_directory,
            args.trigger_id,
            args.partitions,
            args.state_var,
            args.timers,
        )
    except (OptionsError, CheckpointFormatError, UnsupportedSparkFeature, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except FileNotFoundError as exc:  # checked complete, then gone: a running job's retention deleted it
        print(
            f"error: a file of {args.source!r} went away while the transform read it ({exc}); a running job's "
            "retention deletes old checkpoints. Transform a savepoint (stop the job with one first), or retry",
            file=sys.stderr,
        )
        return EXIT_JOB_FAILED
    except Exception as exc:  # Spark refusing the state or the function's DataFrame (an analysis error)
        first = spark_error_line(exc)
        if first is None:
            raise
        print(f"error: Spark refused the transform of {args.source!r}: {first}", file=sys.stderr)
        return EXIT_BAD_INPUT
    origin = meta.restored_from or {}
    print(
        f"transformed {source.url} (batch {source.metadata.batch_id}) with {args.function}: savepoint {meta.id} "
        f"at batch {meta.batch_id}, "
        f"{origin.get('transformed_rows')} rows in operator {args.operator} store {args.store_name!r}"
        f"{f' at {args.partitions} partitions' if 'rescaled_from_partitions' in origin else ''}, "
        f"{format_bytes(meta.state_bytes)} of state, in {format_duration(meta.durations_ms['total'] / 1000)}",
        file=sys.stderr,
    )
    print(location, flush=True)
    return EXIT_OK
