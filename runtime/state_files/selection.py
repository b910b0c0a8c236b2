"""Which files of Spark's working checkpoint folder a snapshot after batch N needs.

Pure functions over a listing (relative path -> size) and a reader of small files, so the rules are
testable without Spark:

- ``metadata`` (the query id);
- the latest two ``offsets/<n>`` and ``commits/<n>`` with ``n <= N`` (Spark reads N and N-1 on restart);
- ``sources/**`` (source logs: written once and kept for many batches, and a file source's compacted
  log grows with every input file, so they are shared like state data and uploaded once);
- state metadata (``state/<op>/_metadata/**``, ``state/<op>/_stateSchema/**``, ``.../<part>/_metadata/**``);
- per state store folder, the files that rebuild version N+1 (state version = batch id + 1): see ``hdfs``
  (delta/snapshot chains) and ``rocksdb`` (zips, changelogs and the SST files a zip names);
- the checksum sidecar ``<file>.crc`` of every selected file that has one (Spark verifies it on read).

Files of later batches are left out: they would leak state of a batch the snapshot does not cover.
Hidden files (Hadoop's ``.<name>.crc``, ``.*.tmp`` files in flight) are never needed.
"""

from __future__ import annotations

import json
import posixpath
import re
import struct
from collections.abc import Callable
from dataclasses import dataclass

from spark_checkpoint_runtime.state_files import hdfs, rocksdb
from spark_checkpoint_runtime.state_files.errors import CaptureError, UnsupportedStateStore
from spark_checkpoint_runtime.state_files.schema import key_fields, keyless

_NUMBERED = re.compile(r"^(\d+)$")
_VERSIONED_META = re.compile(r"^(\d+)(?:_.*)?$")
_METADATA_FOLDERS = {"_metadata", "_stateSchema"}
SIDECAR = ".crc"


@dataclass(frozen=True)
class SelectedFile:
    """A file of Spark's working folder that the snapshot needs."""

    target: str  # relative to Spark's working checkpoint folder
    size: int
    shared: bool  # immutable data (state, source logs), stored once in shared/ and referenced by many checkpoints


def _no_reader(target: str) -> bytes:
    raise CaptureError(f"reading {target} is needed to select RocksDB state, but no reader was given")


def select_files(
    listing: dict[str, int],
    batch_id: int,
    stored: frozenset[str] | set[str] = frozenset(),
    read: Callable[[str], bytes] = _no_reader,
    partitions: int | None = None,
) -> list[SelectedFile]:
    """Select what Spark needs to resume after ``batch_id``.

    ``stored`` holds targets already uploaded; ``read`` returns the bytes of a working file (RocksDB zips and
    commit log entries are read to know which SST files and which unique ids belong to the batch).
    ``partitions``: how many state partitions the query has (its pinned ``spark.sql.shuffle.partitions``);
    every stateful operator must have each of them, or the selection fails rather than drop one.
    """
    visible = {p: s for p, s in listing.items() if not any(part.startswith(".") for part in p.split("/"))}
    selected: list[SelectedFile] = []
    if "metadata" not in visible:
        raise CaptureError("Spark's working folder has no 'metadata' file; the query never started there")
    selected.append(SelectedFile("metadata", visible["metadata"], shared=False))
    for log_dir in ("offsets", "commits"):
        entries = sorted(
            (int(m.group(1)), p)
            for p in visible
            if posixpath.dirname(p) == log_dir and (m := _NUMBERED.match(posixpath.basename(p)))
        )
        upto = [(n, p) for n, p in entries if n <= batch_id]
        if not upto or upto[-1][0] != batch_id:
            if entries and entries[0][0] > batch_id:
                raise CaptureError(
                    f"batch {batch_id} is no longer in Spark's working folder (Spark keeps "
                    "spark.sql.streaming.minBatchesToRetain batches, and the query ran on while the snapshot "
                    "waited for an upload); ask again, or set that conf higher for a job whose uploads outlast "
                    "that many batches"
                )
            raise CaptureError(f"Spark's working folder has no {log_dir}/{batch_id}; batch {batch_id} is not complete")
        selected.extend(SelectedFile(p, visible[p], shared=False) for _, p in upto[-2:])
    selected.extend(SelectedFile(p, s, shared=True) for p, s in sorted(visible.items()) if p.startswith("sources/"))
    selected.extend(_select_state(visible, batch_id, stored, read, partitions))
    chosen = {f.target for f in selected}
    sidecars = [
        SelectedFile(f.target + SIDECAR, visible[f.target + SIDECAR], f.shared)
        for f in selected
        if f.target + SIDECAR in visible and f.target + SIDECAR not in chosen
    ]
    return selected + sidecars


def state_store_folder(path: str) -> tuple[str, str] | None:
    """Split a state data file's path into (store folder, name in it); None for state metadata."""
    parts = path.split("/")
    if len(parts) < 4 or parts[0] != "state" or _METADATA_FOLDERS & set(parts):
        return None
    if len(parts) >= 5 and parts[-2] in (rocksdb.SST_FOLDER, rocksdb.LOG_FOLDER):
        return "/".join(parts[:-2]), "/".join(parts[-2:])
    return "/".join(parts[:-1]), parts[-1]


def _select_state(
    visible: dict[str, int],
    batch_id: int,
    stored: frozenset[str] | set[str],
    read: Callable[[str], bytes],
    partitions: int | None,
) -> list[SelectedFile]:
    target_version = batch_id + 1
    folders: dict[str, dict[str, int]] = {}
    selected: list[SelectedFile] = []
    for path, size in sorted(visible.items()):
        if not path.startswith("state/") or path.endswith(SIDECAR):
            continue
        split = state_store_folder(path)
        if split is not None:
            folders.setdefault(split[0], {})[split[1]] = size
            continue
        # State metadata: keep it unless it is versioned by a later batch (operator metadata v2, schemas).
        folder, name = posixpath.split(path)
        versioned = _VERSIONED_META.match(name)
        in_metadata = _METADATA_FOLDERS & set(folder.split("/"))
        if versioned and in_metadata and int(versioned.group(1)) > batch_id:
            continue
        selected.append(SelectedFile(path, size, shared=False))
    if partitions is not None:
        operators = {path.split("/")[1] for path in visible if path.startswith("state/") and path.count("/") >= 2}
        check_partitions(operators, folders, partitions, lambda op: _keyless(op, visible, read))
        # Partitions at or above the count are a larger count's, left behind by a rescale down: dead state.
        folders = {f: names for f, names in folders.items() if not _beyond(f.split("/")[2], partitions)}
    commit_ids = _CommitIds(visible, read)
    for folder, names in sorted(folders.items()):
        layout = _layout(folder, names)
        if layout == "hdfs":
            chain = hdfs.select_chain(folder, names, target_version, stored)
        else:
            op, partition = folder.split("/")[1:3]
            chain = rocksdb.select_chain(
                folder, names, target_version, lambda v, o=op, p=partition: commit_ids.for_version(v, o, p), read
            )
        selected.extend(SelectedFile(p, visible[p], shared=True) for p in chain)
    return selected


def _beyond(partition: str, partitions: int) -> bool:
    return partition.isdigit() and int(partition) >= partitions


def check_partitions(
    operators: set[str],
    folders: dict[str, dict[str, int]],
    partitions: int,
    is_keyless: Callable[[str], bool] = lambda op: False,
) -> None:
    """Every stateful operator must have a state folder for each of the query's ``partitions``.

    A partition missing from the working folder is state the checkpoint would silently lose: on a cluster
    it means an executor wrote its state somewhere the driver cannot see (a working folder that is not
    shared), so fail the checkpoint and say so. The exception: an operator whose key has no columns (a global
    aggregation; ``is_keyless``) runs as one partition, so Spark writes its partition 0 alone.
    """
    present: dict[str, set[int]] = {op: set() for op in operators}
    for folder in folders:
        _, op, partition = folder.split("/")[:3]
        if partition.isdigit():
            present.setdefault(op, set()).add(int(partition))
    for op, found in sorted(present.items()):
        missing = sorted(set(range(partitions)) - found)
        # Folders at or above the count are a larger count's, left behind by a rescale down.
        if missing and not ({p for p in found if p < partitions} == {0} and is_keyless(op)):
            shown = ", ".join(str(p) for p in missing[:10]) + (" ..." if len(missing) > 10 else "")
            raise CaptureError(
                f"state operator {op} has {len(found)} of its {partitions} partitions in the working folder "
                f"(missing: {shown}); the checkpoint would lose their state. On a cluster the working folder "
                "(--working-dir) must be one folder every executor and the driver share (NFS, HDFS)"
            )


def _keyless(op: str, visible: dict[str, int], read: Callable[[str], bytes]) -> bool:
    """Whether every store of operator ``op`` has a key of no columns (its partition 0's schema files say)."""
    prefix = f"state/{op}/0/"
    schemas = [p for p in visible if p.startswith(prefix) and p.endswith("/_metadata/schema")]
    try:
        return bool(schemas) and all(keyless(key_fields(read(p), p)) for p in schemas)
    except (CaptureError, struct.error, ValueError):  # StateSchemaError is a ValueError
        return False  # a schema this runtime cannot read: the missing partitions stay an error


def _layout(folder: str, names: dict[str, int]) -> str:
    """``hdfs`` or ``rocksdb``; anything else (or both at once) is a layout this runtime cannot snapshot."""
    kinds = set()
    for name in names:
        if hdfs.DATA_FILE.match(name):
            kinds.add("hdfs")
        elif rocksdb.is_rocksdb_name(name):
            kinds.add("rocksdb")
        else:
            raise UnsupportedStateStore(
                f"unknown state file {folder}/{name}: the runtime snapshots the HDFS-backed state store "
                "(<v>.delta, <v>.snapshot) and the RocksDB state store (<v>.zip, <v>.changelog, SSTs/, logs/), "
                "and cannot tell which files this layout needs"
            )
    if len(kinds) > 1:
        raise UnsupportedStateStore(
            f"state folder {folder} mixes HDFS-backed (.delta/.snapshot) and RocksDB (.zip/.changelog) files"
        )
    return kinds.pop() if kinds else "hdfs"


class _CommitIds:
    """The unique ids (checkpoint format v2) of each committed version, read once per commit log entry."""

    def __init__(self, visible: dict[str, int], read: Callable[[str], bytes]):
        self._visible = visible
        self._read = read
        self._cache: dict[int, dict[str, list[list[str]]] | None] = {}

    def for_version(self, version: int, operator: str, partition: str) -> set[str] | None:
        batch = version - 1  # batch n writes state version n + 1
        if batch not in self._cache:
            path = f"commits/{batch}"
            text = self._read(path).decode("utf-8") if path in self._visible else ""
            self._cache[batch] = rocksdb.committed_state_ids(text) if text else None
        ids = self._cache[batch]
        if ids is None or operator not in ids:
            return None
        partitions = ids[operator]
        index = int(partition)
        if not isinstance(partitions, list) or index >= len(partitions) or not isinstance(partitions[index], list):
            raise CaptureError(f"commits/{batch} has no state ids for operator {operator}, partition {partition}")
        return {str(uid) for uid in partitions[index] if uid is not None}


def read_batch_offsets(text: str) -> tuple[dict, list]:
    """Split an ``offsets/<n>`` file into its metadata (with Spark's pinned confs) and source offsets."""
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines or not lines[0].startswith("v"):
        raise CaptureError("offsets file has no version line")
    meta = json.loads(lines[1]) if len(lines) > 1 else {}
    offsets = []
    for line in lines[2:]:
        try:
            offsets.append(json.loads(line))
        except ValueError:
            offsets.append(line)
    return meta, offsets
