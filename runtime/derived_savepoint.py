"""A derived savepoint: a new, self-contained savepoint written from another snapshot whose state was rewritten.

``rescale`` (another partition count) and ``transform`` (state rows changed by a function) both work the same
way: the source snapshot is materialised into a private local folder, exactly as a restore builds Spark's
working folder; the folder's state is rewritten there; the result is captured and stored as a savepoint of
the job. The source is only read. The savepoint's ``_metadata`` is written last, so one killed before that
is a folder no restore takes, and a caller-chosen trigger id makes a retried attempt return the savepoint an
earlier one completed (or redo what a killed one left).
"""

from __future__ import annotations

import argparse
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from spark_checkpoint_runtime.hdfs_rescale import STRICT_DISTRIBUTION
from spark_checkpoint_runtime.layout import (
    CheckpointFormatError,
    CheckpointMetadata,
    JobFolder,
    ValidCheckpoint,
    now_ms,
)
from spark_checkpoint_runtime.restore import RestorePoint
from spark_checkpoint_runtime.snapshot import SHUFFLE_PARTITIONS, Capture, StoredFiles, capture, materialize
from spark_checkpoint_runtime.snapshot_targets import SavepointTarget
from spark_checkpoint_runtime.state_inspection import partition_count, snapshot_for, snapshot_session
from spark_checkpoint_runtime.working_copy import WorkingCopy, private_folder


def add_source_arguments(parser: argparse.ArgumentParser) -> None:
    """The options every command that derives a savepoint takes: the job, its source snapshot and storage."""
    parser.add_argument("--job-name", required=True)
    parser.add_argument("--checkpoint-root", required=True)
    parser.add_argument("--spec", help="JSON/YAML file whose storage_options (credentials) are used")
    parser.add_argument(
        "--from",
        dest="source",
        default="latest",
        help="latest (the newest valid checkpoint, default), chk-N, or a savepoint's folder name or path",
    )


def add_target_arguments(parser: argparse.ArgumentParser) -> None:
    """Where the derived savepoint goes, and the id that names it."""
    parser.add_argument("--target-directory", help="where the savepoint goes (default <root>/<job>/savepoints)")
    parser.add_argument(
        "--trigger-id",
        help="caller-chosen id (the savepoint's folder is savepoint-<id>); asking again with it returns the same "
        "savepoint, and redoes one a killed attempt left without _metadata",
    )


def source_snapshot(storage: JobFolder, source: str) -> ValidCheckpoint:
    """The validated snapshot ``--from`` names: ``latest``, ``chk-N`` or a savepoint."""
    choice = source.strip()
    if choice == "latest":
        return snapshot_for(storage, None, None)
    if choice.startswith("chk-") and choice[4:].isdigit():
        return snapshot_for(storage, int(choice[4:]), None, "--from")
    return snapshot_for(storage, None, choice, "--from")


def keyed_partition_count(
    source: ValidCheckpoint, refused: Callable[[str], Exception], action: str, *, check_distribution: bool = True
) -> int:
    """The partition count of a snapshot whose state a command moves by key (``action``: "rescaled",
    "transformed"). Refused (``refused``) when the snapshot records no count, or when its query was started before
    Spark 3.3: such a query pins strict distribution off, and its state may be partitioned by a subset of its keys,
    so where a key belongs cannot be known (``check_distribution`` False: Spark's own repartition decides)."""
    meta = source.metadata
    current = partition_count(meta)
    if current is None:
        raise refused(f"{source.url} records no partition count ({SHUFFLE_PARTITIONS}): it cannot be {action}")
    strict = (meta.fingerprint.get("pinned_confs") or {}).get(STRICT_DISTRIBUTION)
    if check_distribution and strict is not None and str(strict).lower() != "true":
        raise refused(
            f"{source.url} cannot be {action}: the query pins {STRICT_DISTRIBUTION}=false (it was started before "
            "Spark 3.3): its state may be partitioned by a subset of its keys, so where each key belongs cannot be "
            "known"
        )
    return current


@dataclass(frozen=True)
class Derivation:
    """How a derived savepoint comes from its source.

    ``rewrite`` changes the materialised working folder and returns the batch the savepoint is taken at;
    ``check`` may refuse the capture (raise) before anything is stored; ``describe`` is added to the
    savepoint's ``restored_from``; ``same`` says whether a savepoint found under the trigger id is this
    derivation's (returned as it is) or another's (refused by ``refused``)."""

    name: str
    rewrite: Callable[[WorkingCopy], int]
    describe: dict[str, Any]
    same: Callable[[CheckpointMetadata], bool]
    refused: Callable[[str, CheckpointMetadata], Exception]
    check: Callable[[Capture], None] = lambda captured: None
    label: str = ""  # in the default trigger id, after the name (a rescale's new count)


def derive_savepoint(
    spark: Any,
    storage: JobFolder,
    source: ValidCheckpoint,
    derivation: Derivation,
    target_directory: str | None = None,
    trigger_id: str | None = None,
) -> tuple[str, CheckpointMetadata]:
    """Write the savepoint ``derivation`` makes of ``source``; its location and ``_metadata``."""
    started, trigger_ms = time.monotonic(), now_ms()
    run_id = f"{derivation.name}-{uuid.uuid4().hex[:12]}"
    stamp = f"{datetime.now(timezone.utc):%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:6]}"
    trigger_id = trigger_id or "-".join(part for part in (derivation.name, derivation.label, stamp) if part)
    folder = storage.savepoints.folder_for(trigger_id, target_directory)
    if folder.exists():
        found = folder.validate().metadata
        if derivation.same(found):
            return folder.url, found
        raise derivation.refused(folder.url, found)
    if folder.fs.exists(folder.path):
        folder.discard()  # a killed attempt of this trigger id: never a completed savepoint (no _metadata)
    with snapshot_session(spark, source.metadata), private_folder(f"{derivation.name}-{storage.job_name}") as private:
        working = WorkingCopy(private, storage.job_name, run_id)
        working.create()
        materialize(source, working)
        batch_id = derivation.rewrite(working)
        snapshot_id = _reserve(storage, run_id, folder.url)
        snap = capture(working, snapshot_id, batch_id, StoredFiles(), reuse=False)
        derivation.check(snap)
        captured_ms = int((time.monotonic() - started) * 1000)
        target = SavepointTarget(folder)
        try:
            uploaded = target.upload(snap, working, threading.Event(), lambda action: None)
            total_ms = int((time.monotonic() - started) * 1000)
            meta = CheckpointMetadata(
                id=snapshot_id,
                kind="savepoint",
                job_name=storage.job_name,
                run_id=run_id,
                batch_id=batch_id,
                trigger_timestamp_ms=trigger_ms,
                completion_timestamp_ms=now_ms(),
                checkpointing_mode=source.metadata.checkpointing_mode,
                files=uploaded.entries,
                state_bytes=sum(e.size for e in uploaded.entries if e.target.startswith("state/")),
                bytes_written=uploaded.bytes_written,
                durations_ms={"capture": captured_ms, "upload": total_ms - captured_ms, "total": total_ms},
                source_offsets=snap.source_offsets,
                restored_from={**RestorePoint(source).describe(), **derivation.describe},
                fingerprint={**source.metadata.fingerprint, "pinned_confs": snap.pinned_confs},
                spark_version=spark.version,
                # The source's history: restoring the derived savepoint is restoring the source. Its staged
                # output (a checkpoint whose publish a crash cut short) is published by that restore, as the
                # source's own restore would.
                lineage=source.metadata.history.with_range(snapshot_id, snapshot_id).to_json(),
                staged_output=source.metadata.staged_output,
            )
            target.write_metadata(meta)
        except BaseException:
            target.discard(snapshot_id)
            raise
    return folder.url, meta


def _reserve(storage: JobFolder, run_id: str, location: str) -> int:
    """A fresh id from the job's id record (checkpoints and savepoints share one counter, as in Flink)."""
    for _ in range(20):
        candidate = storage.next_checkpoint_id()
        if storage.ids.reserve(candidate, kind="savepoint", run_id=run_id, target=location):
            return candidate
    raise CheckpointFormatError(f"no id could be reserved in {storage.location}: another writer takes every one")
