"""The RocksDB state store's files, per store folder ``state/<op>/<part>[/<store>]``.

- ``<v>.zip`` describes version ``v`` completely: RocksDB's small files and a ``metadata`` file naming the
  immutable SST files (``SSTs/<n>-<uuid>.sst``) and archived logs (``logs/<n>-<uuid>.log``) it needs. SSTs are
  shared by many versions: they are stored once and referenced by every checkpoint that needs them.
- With changelog checkpointing every version writes ``<v>.changelog`` and a zip only every few versions, so
  version ``v`` is the newest zip at or below it plus every changelog after that zip (or every changelog from
  version 1 when no zip exists yet).
- Checkpoint format v2 names files ``<v>_<id>.zip`` / ``<v>_<id>.changelog``, and only the ids of the committed
  batches belong to the state (a retried attempt leaves files with other ids). The commit log entry of the batch
  that wrote version ``v`` (``commits/<v-1>``) names the target's id; the target changelog's header names the id
  of every older version it builds on (``lineage``), as Spark itself rebuilds it, since the commit log keeps only
  ``minBatchesToRetain`` entries.

A zip is read each time it is selected: a retried batch can replace it, and only SSTs a committed zip names
belong to the state. An SST that a selected zip names but that is gone means Spark's maintenance ran in
between: ``CaptureRaced``, and the capture is taken again.
"""

from __future__ import annotations

import io
import json
import re
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from spark_checkpoint_runtime.state_files.errors import CaptureError, CaptureRaced
from spark_checkpoint_runtime.state_files.lineage import READABLE_CODECS, read_lineage

DATA_FILE = re.compile(r"^(\d+)(?:_([0-9A-Za-z-]+))?\.(zip|changelog)$")
SST_FOLDER = "SSTs"
LOG_FOLDER = "logs"
_PLAIN_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


_Files = dict[int, dict[str, list[tuple[str | None, str]]]]  # version -> kind -> (unique id, file name)


@dataclass(frozen=True)
class ZipContents:
    """What a ``<v>.zip`` needs outside itself: file name -> size, under ``SSTs/`` and ``logs/``."""

    sst_files: dict[str, int]
    log_files: dict[str, int]
    keys: int


def read_zip_contents(data: bytes, where: str) -> ZipContents:
    """Parse the ``metadata`` member of a RocksDB checkpoint zip (a ``v1`` line, then JSON)."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            text = archive.read("metadata").decode("utf-8")
        version, _, body = text.partition("\n")
        if version.strip() != "v1":
            raise ValueError(f"metadata version {version.strip()!r}, expected 'v1'")
        meta = json.loads(body)
        ssts = _named_files(meta.get("sstFiles"), "dfsSstFileName")
        logs = _named_files(meta.get("logFiles"), "dfsLogFileName")
        keys = int(meta.get("numKeys") or 0)
    except (zipfile.BadZipFile, KeyError, ValueError, TypeError, UnicodeDecodeError) as exc:
        raise CaptureError(f"RocksDB checkpoint {where} is unreadable: {exc}") from exc
    return ZipContents(ssts, logs, keys)


def _named_files(entries: object, name_field: str) -> dict[str, int]:
    if entries is None:
        return {}
    if not isinstance(entries, list):
        raise ValueError(f"{name_field} entries are not a list")
    files = {}
    for entry in entries:
        name = entry.get(name_field) if isinstance(entry, dict) else None
        size = entry.get("sizeBytes") if isinstance(entry, dict) else None
        if not isinstance(name, str) or not _PLAIN_NAME.match(name) or not isinstance(size, int):
            raise ValueError(f"bad {name_field} entry {entry!r}")
        files[name] = size
    return files


def is_rocksdb_name(name: str) -> bool:
    """Is ``name`` (relative to a store folder) one of RocksDB's data files?"""
    folder, _, base = name.rpartition("/")
    if folder in (SST_FOLDER, LOG_FOLDER):
        return True
    return not folder and DATA_FILE.match(base) is not None


def select_chain(
    folder: str,
    names: dict[str, int],
    target: int,
    committed_ids: Callable[[int], set[str] | None],
    read: Callable[[str], bytes],
) -> list[str]:
    """The files (paths under ``folder``) that rebuild version ``target``.

    ``names`` maps each file of the folder (``<v>.zip``, ``SSTs/<name>``, ...) to its size;
    ``committed_ids(v)`` returns the unique ids the commit log records for version ``v`` of this folder's
    operator and partition (None when the commit log has no entry: the file of that version is then the only
    one); ``read`` returns a working file's bytes.
    """
    by_version: _Files = {}
    for name in names:
        match = DATA_FILE.match(name)
        if match:
            version, unique_id, kind = int(match.group(1)), match.group(2), match.group(3)
            by_version.setdefault(version, {}).setdefault(kind, []).append((unique_id, name))

    def pick(version: int, kind: str, *, named_by_commit_log: bool = False) -> str | None:
        """The file of ``version``: the one the commit log names, else the only one there is. With
        ``named_by_commit_log``, a file with an id is taken only where the commit log names it."""
        candidates = by_version.get(version, {}).get(kind, [])
        if not candidates:
            return None
        ids = committed_ids(version)
        with_ids = any(uid is not None for uid, _ in candidates)
        if ids is not None and with_ids:
            chosen = [name for uid, name in candidates if uid in ids]
        elif with_ids and named_by_commit_log:
            raise CaptureError(
                f"state folder {folder} cannot tell which {kind} of version {version} the committed batch wrote: "
                "the commit log no longer names it, and the target's changelog carries no lineage this runtime "
                f"reads (the codecs it reads: {', '.join(READABLE_CODECS)})"
            )
        else:
            chosen = [name for _, name in candidates]
        if len(chosen) > 1:
            raise CaptureError(
                f"state folder {folder} has {len(chosen)} {kind} files for version {version} ({', '.join(chosen)}) "
                "and no commit log entry saying which one the committed batch wrote"
            )
        return chosen[0] if chosen else None

    chain = _from_lineage(folder, by_version, target, pick, committed_ids, read)
    if chain is None:  # checkpoint format v1
        chain = _walk_back(folder, target, pick)
    selected = [f"{folder}/{name}" for name in chain]
    for name in chain:
        if name.endswith(".zip"):
            contents = read_zip_contents(read(f"{folder}/{name}"), f"{folder}/{name}")
            selected += _referenced(folder, name, names, SST_FOLDER, contents.sst_files)
            selected += _referenced(folder, name, names, LOG_FOLDER, contents.log_files)
    return selected


class _Pick(Protocol):
    def __call__(self, version: int, kind: str, *, named_by_commit_log: bool = False) -> str | None: ...


def _from_lineage(
    folder: str,
    by_version: _Files,
    target: int,
    pick: _Pick,
    committed_ids: Callable[[int], set[str] | None],
    read: Callable[[str], bytes],
) -> list[str] | None:
    """The chain of checkpoint format v2 (files named ``<v>_<id>``), or None for format v1 files.

    A zip of the target is the whole chain. Otherwise the target changelog's lineage names one file per older
    version: the newest of them that has a zip is the base, the changelogs after it are replayed, as Spark
    loads it. A changelog without a lineage this runtime reads is followed back only as far as the commit log
    names each version's file.
    """
    zip_name = pick(target, "zip")
    if zip_name is not None:
        return [zip_name] if DATA_FILE.match(zip_name).group(2) else None
    changelog = pick(target, "changelog")
    if changelog is None or not DATA_FILE.match(changelog).group(2):
        return None
    lineage = read_lineage(read(f"{folder}/{changelog}"), f"{folder}/{changelog}")
    if lineage is None:
        return _walk_back(folder, target, lambda v, kind: pick(v, kind, named_by_commit_log=True))

    def file_with_id(version: int, unique_id: str, kind: str) -> str | None:
        return next((n for uid, n in by_version.get(version, {}).get(kind, []) if uid == unique_id), None)

    base = next(((v, uid) for v, uid in reversed(lineage) if file_with_id(v, uid, "zip")), None)
    after = [(v, uid) for v, uid in lineage if base is None or v > base[0]]
    expected = list(range(base[0] + 1 if base else 1, target))
    if [v for v, _ in after] != expected:
        start = f"snapshot {base[0]}_{base[1]}.zip" if base else "version 1 (no snapshot of its lineage is there)"
        raise CaptureError(
            f"state folder {folder} cannot rebuild version {target}: the lineage in {changelog} does not reach "
            f"from {start} to it (it lists versions {[v for v, _ in lineage]}); Spark may have cleaned files "
            "this checkpoint needs. Take the checkpoint again; if it recurs, raise "
            "spark.sql.streaming.minBatchesToRetain"
        )
    chain = [file_with_id(*base, "zip")] if base else []
    for version, unique_id in after:
        ids = committed_ids(version)
        if ids is not None and unique_id not in ids:
            raise CaptureError(
                f"state folder {folder}: the lineage in {changelog} names {version}_{unique_id} but the commit log "
                f"names {sorted(ids)} for version {version}; the working folder is inconsistent"
            )
        name = file_with_id(version, unique_id, "changelog")
        if name is None:
            raise CaptureError(
                f"state folder {folder} cannot rebuild version {target}: {version}_{unique_id}.changelog, which "
                f"its lineage names, is gone; Spark may have cleaned files this checkpoint needs"
            )
        chain.append(name)
    return [*chain, changelog]


def _walk_back(folder: str, target: int, pick: Callable[[int, str], str | None]) -> list[str]:
    """The newest zip at or below the target, then every changelog after it, each version's file by ``pick``."""
    chain: list[str] = []
    for base in range(target, -1, -1):
        zip_name = pick(base, "zip") if base > 0 else None
        if zip_name is not None or base == 0:
            chain = ([zip_name] if zip_name else []) + chain
            break
        changelog = pick(base, "changelog")
        if changelog is None:
            raise CaptureError(
                f"state folder {folder} cannot rebuild version {target}: version {base} has neither a zip nor a "
                "changelog; Spark may have cleaned files this checkpoint needs"
            )
        chain.insert(0, changelog)
    return chain


def _referenced(folder: str, zip_name: str, names: dict[str, int], sub: str, files: dict[str, int]) -> list[str]:
    paths = []
    for file_name, size in sorted(files.items()):
        name = f"{sub}/{file_name}"
        if name not in names:
            raise CaptureRaced(f"{folder}/{zip_name} names {name}, which is gone (Spark's maintenance ran meanwhile)")
        if names[name] != size:
            raise CaptureError(
                f"{folder}/{name} has {names[name]} bytes, but {zip_name} says {size}: the file is damaged"
            )
        paths.append(f"{folder}/{name}")
    return paths


def committed_state_ids(commit_text: str) -> dict[str, list[list[str]]] | None:
    """The ``stateUniqueIds`` of a ``commits/<n>`` file (checkpoint format v2), or None (format v1)."""
    lines = [line for line in commit_text.splitlines() if line.strip()]
    if len(lines) < 2:
        return None
    try:
        ids = json.loads(lines[1]).get("stateUniqueIds")
    except (ValueError, AttributeError):
        raise CaptureError("a commit log entry is not JSON") from None
    return ids if isinstance(ids, dict) else None
