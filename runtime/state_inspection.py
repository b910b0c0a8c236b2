"""Read the state a checkpoint or savepoint holds, with Spark's own state data source.

    python -m spark_checkpoint_runtime state --job-name J --checkpoint-root R
        [--checkpoint-id N | --savepoint NAME_OR_PATH] [--operator ID] [--store-name NAME] [--limit K] [--json]
        [--state-var NAME | --timers]
    python -m spark_checkpoint_runtime state --job-name J --checkpoint-root R [...] --summary [--json]

Spark's ``statestore`` and ``state-metadata`` sources (Spark 4.0+) read a raw Spark checkpoint folder; our
snapshots are not one (their files are shared between checkpoints, packed into segments, on any storage).
So the snapshot is first materialised into a private local folder, exactly as a restore builds Spark's
working folder, and Spark reads that: the session must be local (the folder is on this machine), as the
command's own is. Nothing is written to the job's storage.

Without ``--summary``: the state rows (``key``, ``value``, ``partition_id``) of one operator and store, the
newest checkpoint by default. A transformWithState operator is read one state variable at a time
(``--state-var NAME``: its columns as Spark gives them, a list or map flattened to one row per element) or
its registered timers (``--timers``). With ``--summary``: rows and bytes per operator, store and partition, for
every stateful operator: a skewed partition shows here. Exit 2 with a one-line reason for bad input (no
such checkpoint, operator or store; a Spark without the state data source, or state it cannot read, such
as transformWithState's without ``--state-var`` or ``--timers``).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from typing import Any

from spark_checkpoint_runtime.errors import EXIT_BAD_INPUT, EXIT_OK
from spark_checkpoint_runtime.fingerprint import FORMAT_VERSION_CONF, snapshot_state_store
from spark_checkpoint_runtime.layout import CheckpointFormatError, CheckpointMetadata, JobFolder, ValidCheckpoint
from spark_checkpoint_runtime.options import CommandParser, OptionsError, load_spec
from spark_checkpoint_runtime.snapshot import SHUFFLE_PARTITIONS, materialize
from spark_checkpoint_runtime.spark_versions import UnsupportedSparkFeature, parse_version, require
from spark_checkpoint_runtime.state_files.selection import state_store_folder
from spark_checkpoint_runtime.state_variables import variable_names
from spark_checkpoint_runtime.working_copy import WorkingCopy, private_folder

COMMAND = "state"
STATE_DATA_SOURCE = (4, 0)  # Spark's statestore and state-metadata sources
DEFAULT_STORE = "default"
PYTHON_TRACEBACK = "Traceback (most recent call last):"


def parser() -> argparse.ArgumentParser:
    found = CommandParser(prog=f"python -m spark_checkpoint_runtime {COMMAND}", allow_abbrev=False)
    found.add_argument("--job-name", required=True)
    found.add_argument("--checkpoint-root", required=True)
    found.add_argument("--spec", help="JSON/YAML file whose storage_options (credentials) are used")
    which = found.add_mutually_exclusive_group()
    which.add_argument("--checkpoint-id", type=int, help="this checkpoint (default: the newest valid one)")
    which.add_argument("--savepoint", help="a savepoint: its folder name under savepoints/, or its path")
    found.add_argument("--operator", type=int, default=0, help="the stateful operator's id (default 0)")
    found.add_argument("--store-name", default=DEFAULT_STORE, help="the operator's store (joins have four)")
    found.add_argument("--limit", type=int, default=20, help="rows to print (default 20)")
    variable = found.add_mutually_exclusive_group()
    variable.add_argument("--state-var", help="transformWithState: the state variable to read")
    variable.add_argument("--timers", action="store_true", help="transformWithState: its registered timers")
    found.add_argument("--summary", action="store_true", help="rows and bytes per operator, store and partition")
    found.add_argument("--json", action="store_true", help="JSON lines instead of a table")
    return found


@dataclass(frozen=True)
class PartitionSummary:
    """One partition of one store of one stateful operator: its rows and the bytes its files take."""

    operator: int
    operator_name: str
    store: str
    partition: int
    rows: int
    bytes: int


def snapshot_for(
    storage: JobFolder, checkpoint_id: int | None, savepoint: str | None, option: str | None = None
) -> ValidCheckpoint:
    """The validated snapshot the options name (the newest valid checkpoint by default); ``option`` names the
    command's option in an error (default: ``--savepoint`` or ``--checkpoint-id``, whichever was given)."""
    option = option or ("--savepoint" if savepoint is not None else "--checkpoint-id")
    if savepoint is not None:
        name_only = "/" not in savepoint and ":" not in savepoint
        location = storage.url_of(storage.savepoints.path(savepoint)) if name_only else savepoint
        return storage.resolve_snapshot(location, option)
    if checkpoint_id is not None:
        ids = storage.checkpoints.ids()
        if checkpoint_id not in ids:
            kept = f"chk-{ids[0]} to chk-{ids[-1]}" if ids else "none"
            raise CheckpointFormatError(
                f"{storage.location} has no chk-{checkpoint_id} (retention may have deleted it); it has: {kept}"
            )
        return storage.resolve_snapshot(storage.url_of(storage.checkpoints.path(checkpoint_id)), option)
    found = storage.checkpoints.latest_valid()
    if found is None:
        raise CheckpointFormatError(f"{storage.location} has no checkpoint: there is no state to read")
    return found


def file_bytes(snapshot: ValidCheckpoint) -> dict[tuple[int, str, int], int]:
    """Bytes of the snapshot's state data files by (operator, store, partition), from its ``_metadata``
    (operator metadata and schema files left out)."""
    return state_bytes(snapshot.metadata)


def state_bytes(meta: CheckpointMetadata) -> dict[tuple[int, str, int], int]:
    """``file_bytes`` from a checkpoint's ``_metadata`` alone (no Spark, no state read): what the UI charts."""
    found: dict[tuple[int, str, int], int] = {}
    for entry in meta.files:
        split = state_store_folder(entry.target)
        if split is None:
            continue
        # The store folder is state/<op>/<partition>, or state/<op>/<partition>/<store> (a join's four stores).
        parts = split[0].split("/")
        if not (parts[1].isdigit() and parts[2].isdigit()):
            continue
        key = (int(parts[1]), parts[3] if len(parts) > 3 else DEFAULT_STORE, int(parts[2]))
        found[key] = found.get(key, 0) + entry.size
    return found


def partition_count(meta: CheckpointMetadata) -> int | None:
    """The partition count the snapshot's query runs at (Spark pins it in the offset log; ``_metadata`` records
    it). After a rescale it is the truth: Spark rewrites only the newer operator metadata's count."""
    value = (meta.fingerprint.get("pinned_confs") or {}).get(SHUFFLE_PARTITIONS)
    return int(value) if value is not None and str(value).isdigit() else None


def summary(spark: Any, location: str, snapshot: ValidCheckpoint) -> list[PartitionSummary]:
    """Rows and bytes per operator, store and partition of the Spark checkpoint folder at ``location``."""
    sizes = file_bytes(snapshot)
    pinned = partition_count(snapshot.metadata)
    stores = spark.read.format("state-metadata").load(location).collect()
    found = []
    for store in sorted(stores, key=lambda row: (row["operatorId"], row["stateStoreName"])):
        operator, name = int(store["operatorId"]), str(store["stateStoreName"])
        counts: dict[int, int] = {}
        # Spark's state source reads a transformWithState store one variable at a time: its rows are the sum
        # over its variables (a list's elements and a map's entries each count); its timers are left out.
        for variable in variable_names(store.asDict().get("operatorProperties")) or [None]:
            reader = _reader(spark, location, snapshot, operator, name, variable)
            for row in reader.groupBy("partition_id").count().collect():
                counts[int(row["partition_id"])] = counts.get(int(row["partition_id"]), 0) + int(row["count"])
        for partition in range(pinned or int(store["numPartitions"])):
            found.append(
                PartitionSummary(
                    operator,
                    str(store["operatorName"]),
                    name,
                    partition,
                    counts.get(partition, 0),
                    sizes.get((operator, name, partition), 0),
                )
            )
    return found


def _reader(
    spark: Any,
    location: str,
    snapshot: ValidCheckpoint,
    operator: int,
    store: str,
    state_var: str | None = None,
    timers: bool = False,
    flatten: bool = True,
) -> Any:
    # Spark 4.1 and 4.2's state stores report to the state store coordinator even when a batch query reads them,
    # and it is only started with the session's streaming query manager: a fresh session (the commands' own)
    # failed with "Cannot find endpoint: StateStoreCoordinator". Starting the manager starts the coordinator.
    spark.streams  # noqa: B018 - for its side effect
    reader = (
        spark.read.format("statestore")
        .option("batchId", snapshot.metadata.batch_id)
        .option("operatorId", operator)
        .option("storeName", store)
    )
    if state_var is not None:
        reader = reader.option("stateVarName", state_var)
        if not flatten:
            reader = reader.option("flattenCollectionTypes", "false")
    if timers:
        reader = reader.option("readRegisteredTimers", "true")
    return reader.load(location)


def rows(
    spark: Any,
    location: str,
    snapshot: ValidCheckpoint,
    operator: int,
    store: str,
    state_var: str | None = None,
    timers: bool = False,
    flatten: bool = True,
) -> Any:
    """The state rows of one operator's store, as a DataFrame: ``key``, ``value``, ``partition_id``; for one
    transformWithState variable (``state_var``) or its timers, every column Spark's state source gives (a list
    or map variable one row per element, or with ``flatten`` False one row per key: ``list_value``, an array in
    the list's order, or ``map_value``)."""
    known = {
        (int(row["operatorId"]), str(row["stateStoreName"]))
        for row in spark.read.format("state-metadata").load(location).collect()
    }
    if (operator, store) not in known:
        names = ", ".join(f"operator {op} store {name!r}" for op, name in sorted(known)) or "none"
        raise CheckpointFormatError(
            f"{snapshot.fs.unstrip_protocol(snapshot.path)} has no state for operator {operator} store {store!r}; "
            f"it has: {names}"
        )
    found = _reader(spark, location, snapshot, operator, store, state_var, timers, flatten)
    return found if state_var is not None or timers else found.select("key", "value", "partition_id")


def main(argv: list[str], spark: Any = None) -> int:
    """Run the ``state`` command; returns the exit status."""
    try:
        args = parser().parse_args(argv)
        options = (load_spec(args.spec).get("storage_options") or {}) if args.spec else {}
        storage = JobFolder(args.checkpoint_root, args.job_name, options)
        snapshot = snapshot_for(storage, args.checkpoint_id, args.savepoint)
        spark = spark or local_session()
        require("Reading state (Spark's state data source)", STATE_DATA_SOURCE, parse_version(spark.version))
        with snapshot_session(spark, snapshot.metadata), private_folder(f"state-{args.job_name}") as folder:
            working = WorkingCopy(folder, args.job_name, "inspection")
            working.create()
            materialize(snapshot, working)
            if args.summary:
                _print_summary(summary(spark, working.schema_location, snapshot), args.json)
            else:
                found = rows(
                    spark,
                    working.schema_location,
                    snapshot,
                    args.operator,
                    args.store_name,
                    args.state_var,
                    args.timers,
                )
                _print_rows(found, args.limit, args.json)
        return EXIT_OK
    except (OptionsError, CheckpointFormatError, UnsupportedSparkFeature, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except Exception as exc:  # Spark refusing to read this state (PySparkException and the JVM's own)
        first = spark_error_line(exc)
        if first is None:
            raise
        print(f"error: Spark's state data source cannot read this state: {first}", file=sys.stderr)
        return EXIT_BAD_INPUT


@contextmanager
def snapshot_session(spark: Any, meta: CheckpointMetadata) -> Iterator[None]:
    """The session set, while it reads or rewrites the snapshot, to the state checkpoint format the snapshot was
    written with: Spark reads a format version 2 store's files only under that session conf (else "failed to
    read streaming state file"), and its state rewriter compares the two. The session's own value comes back."""
    version = (meta.fingerprint.get("pinned_confs") or {}).get(FORMAT_VERSION_CONF)
    version = version or snapshot_state_store(meta.fingerprint).get("checkpoint_format_version") or 1
    before = spark.conf.get(FORMAT_VERSION_CONF, None)
    spark.conf.set(FORMAT_VERSION_CONF, str(version))
    try:
        yield
    finally:
        if before is None:
            spark.conf.unset(FORMAT_VERSION_CONF)
        else:
            spark.conf.set(FORMAT_VERSION_CONF, before)


def spark_error_line(exc: BaseException) -> str | None:
    """The line that says what went wrong in an error Spark raised (PySparkException, or the JVM's through
    py4j): its first line, but for an error a Python worker raised (a UDF's), whose first lines only say where it
    surfaced, the last line of the worker's traceback (``ValueError: ...``). None for any other error, which is
    a bug of ours and must not pass for Spark refusing the snapshot."""
    if type(exc).__module__.split(".")[0] not in ("pyspark", "py4j"):
        return None
    text = str(exc)
    if PYTHON_TRACEBACK in text:
        raised = []
        for line in text.split(PYTHON_TRACEBACK, 1)[1].splitlines():
            if line.startswith("\tat ") or line.lstrip().startswith("at org.apache."):
                break  # the JVM's stack trace begins after the worker's traceback
            if line.strip() and not line[0].isspace():  # the traceback's own lines are indented; its error is not
                raised.append(line.strip())
        if raised:
            return raised[-1]
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[0] if lines else type(exc).__name__


def local_session(app_name: str = "checkpoint-state") -> Any:
    """A local Spark session for a command that reads a snapshot materialised on this machine."""
    from pyspark.sql import SparkSession

    return SparkSession.builder.master("local[*]").appName(app_name).config("spark.ui.enabled", "false").getOrCreate()


def _print_rows(found: Any, limit: int, as_json: bool) -> None:
    if as_json:
        for row in found.limit(limit).collect():
            print(json.dumps(row.asDict(recursive=True), sort_keys=True, default=str))
    else:
        found.show(n=limit, truncate=False)


def _print_summary(found: list[PartitionSummary], as_json: bool) -> None:
    if as_json:
        for partition in found:
            print(json.dumps(asdict(partition), sort_keys=True))
        return
    print(f"{'operator':<24} {'store':<24} {'partition':>9} {'rows':>12} {'bytes':>14}")
    for p in found:
        print(f"{p.operator} {p.operator_name:<22} {p.store:<24} {p.partition:>9} {p.rows:>12,} {p.bytes:>14,}")
    total_rows, total_bytes = sum(p.rows for p in found), sum(p.bytes for p in found)
    print(f"{'total':<24} {'':<24} {len(found):>9} {total_rows:>12,} {total_bytes:>14,}")
