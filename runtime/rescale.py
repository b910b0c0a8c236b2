"""Rescale: write a new, self-contained savepoint whose state has N partitions, from a checkpoint or savepoint.

    python -m spark_checkpoint_runtime rescale --job-name J --checkpoint-root R
        --from latest|chk-N|<savepoint name or path> --partitions N [--target-directory D] [--spec F]

A stateful query's partition count (``spark.sql.shuffle.partitions``) is fixed by its first checkpoint: Spark
pins it in the offset log. Rescaling moves every state row to the partition the new count's hash
partitioning looks for it in. The snapshot is materialised into a private local folder, exactly as a restore
builds Spark's working folder, and rewritten there: RocksDB state by Spark 4.3's offline state repartition
(which writes one more batch holding the rescaled state and the new count), the HDFS-backed store's state by
our own rewrite (``hdfs_rescale``, on every supported Spark), at the source's batch. The result is written as
a savepoint of the job. The source snapshot is only read. The new savepoint's ``_metadata`` is written last: a
rescale killed before that leaves a folder no restore takes. ``--restore-from <printed path>`` then runs the
job at N partitions.

Exit 0 with the savepoint's path as the last line on stdout; exit 2 with a one-line reason for bad input
(no such snapshot, the same count, a snapshot without state, a Spark or state store that cannot be
rescaled), before anything is written.
"""

from __future__ import annotations

import argparse
import struct
import sys
from pathlib import Path
from typing import Any

from spark_checkpoint_runtime import faults
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
from spark_checkpoint_runtime.fingerprint import ROCKSDB_PROVIDER, snapshot_state_store
from spark_checkpoint_runtime.hdfs_rescale import rescale_working_folder
from spark_checkpoint_runtime.hdfs_state_files import HdfsRescaleError
from spark_checkpoint_runtime.key_partitioning import UnsupportedKeyType, partition_of
from spark_checkpoint_runtime.layout import CheckpointFormatError, CheckpointMetadata, JobFolder, ValidCheckpoint
from spark_checkpoint_runtime.options import CommandParser, OptionsError, load_spec
from spark_checkpoint_runtime.rocksdb_transform import keep_partition_zero, single_partition_stores
from spark_checkpoint_runtime.snapshot import SHUFFLE_PARTITIONS, Capture
from spark_checkpoint_runtime.spark_versions import OFFLINE_REPARTITION, UnsupportedSparkFeature, parse_version, require
from spark_checkpoint_runtime.state_inspection import local_session, partition_count, spark_error_line
from spark_checkpoint_runtime.working_copy import WorkingCopy

COMMAND = "rescale"


class RescaleRefused(ValueError):
    """The snapshot cannot be rescaled as asked (nothing was written)."""


def parser() -> argparse.ArgumentParser:
    found = CommandParser(prog=f"python -m spark_checkpoint_runtime {COMMAND}", allow_abbrev=False)
    add_source_arguments(found)
    found.add_argument("--partitions", type=int, required=True, help="the state's new partition count")
    add_target_arguments(found)
    return found


def check_rescalable(source: ValidCheckpoint, partitions: int) -> int:
    """Refuse (``RescaleRefused``) what cannot be rescaled before Spark starts; returns the current count. (What
    only the state itself shows, an old query's partitioning or a key type, is refused before anything is saved.)"""
    meta = source.metadata
    if partitions < 1:
        raise RescaleRefused(f"--partitions must be at least 1, not {partitions}")
    current = keyed_partition_count(source, RescaleRefused, "rescaled", check_distribution=not rocksdb_state(meta))
    if current == partitions:
        raise RescaleRefused(f"{source.url} has {current} partitions already: restore it as it is")
    if not meta.fingerprint.get("operators"):
        raise RescaleRefused(
            f"{source.url} holds no state (its pipeline has no stateful operator): nothing to rescale; restore it "
            "and the new run keeps its partition count, which only a stateful query's state depends on"
        )
    return current


def rocksdb_state(meta: CheckpointMetadata) -> bool:
    """Whether the snapshot's state is the RocksDB store's (else the HDFS-backed store's, Spark's default)."""
    return ROCKSDB_PROVIDER in str(snapshot_state_store(meta.fingerprint).get("provider", ""))


def repartition(spark: Any, location: str, partitions: int) -> int:
    """Spark's offline state repartition of the checkpoint folder at ``location``; the batch it wrote."""
    jvm = spark._jvm  # the runner has no Python API: it is called through the session's gateway
    runner = jvm.org.apache.spark.sql.execution.streaming.state.OfflineStateRepartitionRunner
    return int(runner(spark._jsparkSession, location, partitions, False).run())


def rescale(
    spark: Any,
    storage: JobFolder,
    source: ValidCheckpoint,
    partitions: int,
    target_directory: str | None = None,
    trigger_id: str | None = None,
) -> tuple[str, CheckpointMetadata]:
    """Write the rescaled savepoint of ``source``; its location and ``_metadata``.

    With ``trigger_id`` the savepoint's folder is known in advance: one completed already (a retried Airflow
    task) is returned when it rescaled the same source to the same count, and refused otherwise; files a
    killed attempt left without ``_metadata`` are deleted first.
    """
    current = check_rescalable(source, partitions)
    rocksdb = rocksdb_state(source.metadata)
    if rocksdb:
        require(
            "Rescaling RocksDB state (Spark's offline state repartition)",
            OFFLINE_REPARTITION,
            parse_version(spark.version),
        )

    def rewrite(working: WorkingCopy) -> int:
        if rocksdb:
            zero = single_partition_stores(spark, working.schema_location)
            moved_to = partition_of([], [], partitions)  # where Spark's repartition sends an empty key
            if zero and moved_to:
                named = ", ".join(f"operator {op} store {name!r}" for op, names in zero.items() for name in names)
                raise RescaleRefused(
                    f"Spark's offline state repartition would move the state of {named} (a key with no columns, "
                    f"which Spark keeps in partition 0) to partition {moved_to} of {partitions}, where the query "
                    "never looks. Rescale to a count that divides 42 (Spark's hash of an empty key), such as 2, "
                    "3, 6, 7, 14, 21 or 42; nothing was saved"
                )
            written = repartition(spark, working.spark_location, partitions)
            keep_partition_zero(Path(working.spark_path), set(zero))
            return written
        # Spark has no repartition for this store: our own rewrite, at the source's batch.
        rescale_hdfs_state(spark, source, working, partitions)
        return source.metadata.batch_id

    def check(snap: Capture) -> None:
        if snap.pinned_confs.get(SHUFFLE_PARTITIONS) != str(partitions):
            raise RescaleRefused(
                f"the rescale of {source.url} left its batch pinned at "
                f"{snap.pinned_confs.get(SHUFFLE_PARTITIONS)} partitions, not {partitions}; nothing was saved"
            )

    def same(found: CheckpointMetadata) -> bool:
        return (found.restored_from or {}).get("path") == source.url and partition_count(found) == partitions

    def refused(where: str, found: CheckpointMetadata) -> Exception:
        return RescaleRefused(
            f"{where} already holds a savepoint (of {(found.restored_from or {}).get('path')} at "
            f"{partition_count(found)} partitions); a savepoint is never overwritten: use another --trigger-id "
            "or --target-directory"
        )

    derivation = Derivation(
        COMMAND, rewrite, {"rescaled_from_partitions": current}, same, refused, check, label=str(partitions)
    )
    return derive_savepoint(spark, storage, source, derivation, target_directory, trigger_id)


def rescale_hdfs_state(spark: Any, source: ValidCheckpoint, working: WorkingCopy, partitions: int) -> None:
    """Our rewrite of the HDFS-backed store's state in ``working`` to ``partitions``; ``RescaleRefused`` for
    state it cannot rescale (nothing is saved)."""
    try:
        rescale_working_folder(spark, Path(working.spark_path), source.metadata.batch_id, partitions)
    except (HdfsRescaleError, UnsupportedKeyType, struct.error) as exc:
        raise RescaleRefused(f"{source.url} cannot be rescaled: {exc}; nothing was saved") from None
    except Exception as exc:  # the JVM's codec refusing a state file (a damaged or foreign stream)
        first = spark_error_line(exc)
        if first is None:
            raise
        raise RescaleRefused(f"{source.url}: a state file could not be read: {first}; nothing was saved") from None


def main(argv: list[str], spark: Any = None) -> int:
    """Run the ``rescale`` command; returns the exit status."""
    try:
        args = parser().parse_args(argv)
        faults.configure()  # crash tests kill a rescale half-way through its savepoint's files
        options = (load_spec(args.spec).get("storage_options") or {}) if args.spec else {}
        storage = JobFolder(args.checkpoint_root, args.job_name, options)
        source = source_snapshot(storage, args.source)
        check_rescalable(source, args.partitions)  # before Spark starts: bad input fails in a second
        spark = spark or local_session("checkpoint-rescale")
        location, meta = rescale(
            spark, storage, source, args.partitions, args.target_directory, trigger_id=args.trigger_id
        )
    except (OptionsError, CheckpointFormatError, UnsupportedSparkFeature, faults.FaultSpecError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except FileNotFoundError as exc:  # checked complete, then gone: a running job's retention deleted it
        print(
            f"error: a file of {args.source!r} went away while the rescale read it ({exc}); a running job's "
            "retention deletes old checkpoints. Rescale a savepoint (stop the job with one first), or retry",
            file=sys.stderr,
        )
        return EXIT_JOB_FAILED
    except Exception as exc:  # Spark refusing to repartition this state (PySparkException and the JVM's own)
        first = spark_error_line(exc)
        if first is None:
            raise
        print(f"error: Spark's offline state repartition refused {args.source!r}: {first}", file=sys.stderr)
        return EXIT_BAD_INPUT
    print(
        f"rescaled {source.url} (batch {source.metadata.batch_id}) to {args.partitions} partitions: savepoint "
        f"{meta.id} at batch {meta.batch_id}, {format_bytes(meta.state_bytes)} of state, in "
        f"{format_duration(meta.durations_ms['total'] / 1000)}",
        file=sys.stderr,
    )
    print(location, flush=True)
    return EXIT_OK
