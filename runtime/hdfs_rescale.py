"""Rescaling the HDFS-backed state store's state: our own rewrite, since Spark has none for this store.

Spark 4.3's offline repartition covers only RocksDB. For the HDFS-backed store (Spark's default) the rescale
rewrites a materialised checkpoint folder itself, at the snapshot's batch ``B`` (state version ``B + 1``):

1. Each old partition's state is rebuilt from its files (a ``<v>.snapshot`` and the ``<v>.delta`` files after
   it: each a stream of key size, key bytes, value size (-1: removed), value bytes, ended by -1, compressed
   with the job's state store codec through Spark's own ``CompressionCodec``).
2. Each key goes to the partition Spark's shuffle sends it to at the new count (``key_partitioning``): the
   hash of the key's leading columns that the operator partitions by (all of them, but a join's value index
   and a session window's start; the operator metadata says how many).
3. Each new partition's state is written as one ``<B + 1>.snapshot``; key and value bytes are copied
   unchanged, so no value is ever decoded. The old partition folders go; partition 0's schema files stay.
4. The partition count is rewritten where Spark pinned it: the offset log's batch ``B`` and each operator's
   state metadata. Hadoop's checksum files of rewritten files are removed (they would no longer match).

The working folder is a private copy: the source snapshot is only read. Capture then stores the result as a
savepoint, exactly as for RocksDB.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spark_checkpoint_runtime import faults
from spark_checkpoint_runtime.hdfs_state_files import (
    HdfsRescaleError,
    StateFileCodec,
    load_version,
)
from spark_checkpoint_runtime.key_partitioning import partition_of, read_row
from spark_checkpoint_runtime.state_files.schema import StateSchemaError, key_fields, single_partition

CODEC_CONF = "spark.sql.streaming.stateStore.compression.codec"
DEFAULT_CODEC = "lz4"
SHUFFLE_PARTITIONS = "spark.sql.shuffle.partitions"
STRICT_DISTRIBUTION = "spark.sql.streaming.statefulOperator.useStrictDistribution"
ROW_CHECKSUM = "spark.sql.streaming.stateStore.rowChecksum.enabled"  # Spark 4.2+: a CRC32C before each value
JOIN_INDEXED_STORE = "keyWithIndexToValue"  # a join's values per key and index: the index is not partitioned on


@dataclass(frozen=True)
class StateStoreFolder:
    """One state store of one operator: its folder name under a partition ("" for the default store, whose
    files sit in the partition folder itself; ``Path / ""`` is that folder)."""

    operator: str
    store: str
    key_fields: list[dict[str, Any]]
    partition_columns: int
    operator_name: str | None = None  # from the operator metadata (Spark 4.0+): "stateStoreSave", "dedupe", ...


def replace_text(path: Path, text: str) -> None:
    """Write ``path`` as a new file: the working folder hard-links the source snapshot's files, and writing
    one in place would change the source through the link."""
    fresh = path.with_name(f".{path.name}.rescaled")
    fresh.write_text(text, encoding="utf-8")
    os.replace(fresh, path)
    remove_checksum(path)


def remove_checksum(path: Path) -> None:
    """Hadoop's local filesystem keeps ``.<name>.crc`` beside each file it wrote; a rewritten file's is stale."""
    crc = path.with_name(f".{path.name}.crc")
    if crc.exists():
        crc.unlink()


# --- what Spark pinned: the offset log and each operator's state metadata -----------------------------------


def _offset_metadata(path: Path) -> tuple[list[str], dict[str, Any]]:
    """An offset log file's lines and its metadata (the line after the version): Spark's ``OffsetSeq``."""
    lines = path.read_text(encoding="utf-8").split("\n")
    if len(lines) < 2 or not lines[0].startswith("v"):
        raise HdfsRescaleError(f"{path} is not an offset log file Spark wrote")
    return lines, json.loads(lines[1])


def pinned_conf(root: Path, batch_id: int) -> dict[str, Any]:
    """The confs Spark pinned for ``batch_id``; refused (``HdfsRescaleError``) without a partition count."""
    _, metadata = _offset_metadata(root / "offsets" / str(batch_id))
    conf = metadata.get("conf") or {}
    if SHUFFLE_PARTITIONS not in conf:
        raise HdfsRescaleError(f"offsets/{batch_id} pins no {SHUFFLE_PARTITIONS}: the snapshot cannot be rescaled")
    return dict(conf)


def pin_partitions(root: Path, partitions: int) -> None:
    """Every offset log file of the folder pins ``partitions``: Spark takes the count from the last one."""
    for path in sorted((root / "offsets").iterdir()):
        if not path.name.isdigit():
            continue
        lines, metadata = _offset_metadata(path)
        metadata.setdefault("conf", {})[SHUFFLE_PARTITIONS] = str(partitions)
        lines[1] = json.dumps(metadata, separators=(",", ":"))
        replace_text(path, "\n".join(lines))
        faults.reach("rescale")


def key_schema(path: Path) -> list[dict[str, Any]]:
    """The key fields (schema JSON) of a state schema file (``<op>/0/[<store>/]_metadata/schema``, v1 or v2)."""
    try:
        return key_fields(path.read_bytes(), str(path))
    except StateSchemaError as exc:
        raise HdfsRescaleError(str(exc)) from None


def _operator_info(operator: Path) -> dict[str, Any]:
    """The operator's name and store entries from its state metadata (Spark 4.0+; ``written`` False before)."""
    path = operator / "_metadata" / "metadata"
    if not path.exists():
        return {"written": False, "name": None, "stores": []}
    version, _, body = path.read_text(encoding="utf-8").partition("\n")
    if version != "v1":
        raise HdfsRescaleError(f"{path} is operator metadata of version {version!r}, which the rescale cannot rewrite")
    metadata = json.loads(body)
    name = (metadata.get("operatorInfo") or {}).get("operatorName")
    return {"written": True, "name": name, "stores": list(metadata.get("stateStoreInfo") or [])}


def _partition_columns(
    store: str, fields: list[dict[str, Any]], prefix_columns: int | None, single_partition: bool
) -> int:
    """How many leading key columns the operator's shuffle partitions by (0: all its state is in partition 0).

    ``prefix_columns`` is the store's ``numColsPrefixKey`` from the operator metadata (Spark 4.0+), None where
    Spark wrote none (3.5).
    """
    if single_partition:
        return 0  # a global aggregation or a limit: Spark runs it as one partition
    if store.endswith(JOIN_INDEXED_STORE):
        return len(fields) - 1  # the join keys, not the value's index among them
    if prefix_columns is not None:
        return prefix_columns or len(fields)  # a session window's grouping keys, not the session's start
    last = fields[-1]
    if last.get("name") == "sessionStartTime" and last.get("type") == "timestamp" and not last.get("nullable"):
        return len(fields) - 1  # Spark 3.5 writes no operator metadata: a session window's key says it
    return len(fields)


def store_folders(operator: Path) -> list[StateStoreFolder]:
    """The state stores of one operator folder, from its partition 0 (where Spark keeps the schema files)."""
    first = operator / "0"
    if not first.is_dir():
        raise HdfsRescaleError(f"{operator} has no partition 0: the snapshot is incomplete")
    info = _operator_info(operator)
    prefixes = {entry.get("storeName", "default"): int(entry.get("numColsPrefixKey") or 0) for entry in info["stores"]}
    higher = any(p.name.isdigit() and int(p.name) > 0 for p in operator.iterdir())
    operator_name = info["name"] if info["written"] else None
    if (first / "_metadata" / "schema").exists():
        names = [""]
    else:
        names = sorted(p.name for p in first.iterdir() if (p / "_metadata" / "schema").exists())
    if not names:
        raise HdfsRescaleError(f"{first} holds no state schema file (_metadata/schema): its keys cannot be read")
    found = []
    for name in names:
        fields = key_schema(first / name / "_metadata" / "schema")
        prefix = prefixes.get(name or "default", 0) if info["written"] else None
        found.append(
            StateStoreFolder(
                operator.name,
                name,
                fields,
                _partition_columns(name, fields, prefix, single_partition(fields, operator_name, higher)),
                info["name"],
            )
        )
    return found


def _rewrite_operator_metadata(operator: Path, partitions: int) -> None:
    path = operator / "_metadata" / "metadata"
    if not path.exists():
        return
    version, _, body = path.read_text(encoding="utf-8").partition("\n")
    metadata = json.loads(body)
    for entry in metadata.get("stateStoreInfo") or []:
        entry["numPartitions"] = partitions
    replace_text(path, f"{version}\n{json.dumps(metadata, separators=(',', ':'))}")


def rescale_operator(
    codec: StateFileCodec, operator: Path, version: int, old: int, partitions: int, checksummed_rows: bool
) -> int:
    """Move every key of one operator's stores to its partition at ``partitions``; the number of keys moved."""
    stores = store_folders(operator)
    staging = operator / f"_rescale-{partitions}"
    if staging.exists():
        shutil.rmtree(staging)
    keys = 0
    # An operator with no key columns (a global aggregation, a limit) runs as one partition: Spark keeps its
    # state in partition 0 alone and writes no other, at any count.
    one_partition = all(not store.partition_columns for store in stores)
    read_from, write_to = (1, 1) if one_partition else (old, partitions)
    for store in stores:
        columns = store.key_fields[: store.partition_columns]
        types = [field["type"] for field in columns]
        writers = [codec.open(staging / str(p) / store.store / f"{version}.snapshot") for p in range(write_to)]
        for partition in range(read_from):
            folder = operator / str(partition) / store.store
            if not folder.is_dir():
                raise HdfsRescaleError(
                    f"{folder} is missing: the snapshot lacks a partition of operator {operator.name}"
                )
            for key, value in load_version(codec, folder, version, checksummed_rows).items():
                # No key columns (a global aggregation, a limit): Spark keeps that state in partition 0.
                target = (
                    partition_of(read_row(key, store.key_fields)[: len(columns)], types, partitions) if columns else 0
                )
                writers[target].add(key, value)
                keys += 1
            faults.reach("rescale")
        for writer in writers:
            writer.close()
    # Partition 0's schema files describe every partition: they move with it.
    for store in stores:
        shutil.copytree(operator / "0" / store.store / "_metadata", staging / "0" / store.store / "_metadata")
    for entry in list(operator.iterdir()):
        if entry.name.isdigit():
            shutil.rmtree(entry)
    for entry in list(staging.iterdir()):
        entry.rename(operator / entry.name)
    staging.rmdir()
    _rewrite_operator_metadata(operator, partitions)
    return keys


def rescale_working_folder(spark: Any, root: Path, batch_id: int, partitions: int) -> tuple[int, int]:
    """Rescale the HDFS-backed store's state of Spark's checkpoint folder ``root`` at ``batch_id`` in place.

    Returns the old partition count and the number of keys moved. ``root`` must be a private copy.
    """
    conf = pinned_conf(root, batch_id)
    old = int(conf[SHUFFLE_PARTITIONS])
    if str(conf.get(STRICT_DISTRIBUTION, "false")).lower() != "true":
        raise HdfsRescaleError(
            f"the query pins {STRICT_DISTRIBUTION}=false (it was started before Spark 3.3): its state may be "
            "partitioned by a subset of its keys, so where each key belongs cannot be known. Rescale is refused"
        )
    checksummed_rows = str(conf.get(ROW_CHECKSUM, "false")).lower() == "true"
    keys = 0
    state = root / "state"
    # Beside the working folder (the same disk), never inside it: capture would take it for state.
    with tempfile.TemporaryDirectory(prefix="rescale-scratch-", dir=root.parent) as scratch:
        codec = StateFileCodec(spark, str(conf.get(CODEC_CONF) or DEFAULT_CODEC), Path(scratch))
        for operator in sorted((p for p in state.iterdir() if p.name.isdigit()), key=lambda p: int(p.name)):
            keys += rescale_operator(codec, operator, batch_id + 1, old, partitions, checksummed_rows)
    pin_partitions(root, partitions)
    return old, keys
