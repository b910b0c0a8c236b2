"""Which files of Spark's working checkpoint folder a snapshot after batch N needs.

Pure functions over a listing (relative path -> size), so the rules are testable without Spark:

- ``metadata`` (the query id);
- the latest two ``offsets/<n>`` and ``commits/<n>`` with ``n <= N`` (Spark reads N and N-1 on restart);
- ``sources/**`` (source logs: written once and kept for many batches, and a file source's compacted
  log grows with every input file, so they are shared like state data and uploaded once);
- state metadata (``state/<op>/_metadata/**``, ``state/<op>/<part>/_metadata/**`` and the like);
- per state store folder, one chain of data files reaching version N+1 (state version = batch id + 1):
  a ``<v>.snapshot`` (or nothing) followed by every ``<v>.delta`` up to N+1.

Files of later batches are left out: they would leak state of a batch the snapshot does not cover.
Hidden files (``.crc`` checksums, ``.*.tmp`` files in flight) are never needed.

Among the chains that reach N+1, the one that needs the fewest new bytes is chosen (an already stored
snapshot plus a few deltas beats a fresh snapshot), up to ``MAX_DELTA_CHAIN`` deltas to bound restore time.
"""

from __future__ import annotations

import json
import posixpath
import re
from dataclasses import dataclass

MAX_DELTA_CHAIN = 50
_NUMBERED = re.compile(r"^(\d+)$")
_STATE_DATA = re.compile(r"^(\d+)\.(delta|snapshot)$")
_VERSIONED_META = re.compile(r"^(\d+)(?:_.*)?$")
_ROCKSDB_HINTS = (re.compile(r"\.zip$"), re.compile(r"\.changelog$"), re.compile(r"(^|/)SSTs/"))


class CaptureError(RuntimeError):
    """The working folder does not hold a consistent set of files for the batch."""


class UnsupportedStateStore(CaptureError):
    """The working folder uses a state store whose files this runtime cannot snapshot yet."""


@dataclass(frozen=True)
class SelectedFile:
    """A file of Spark's working folder that the snapshot needs."""

    target: str  # relative to Spark's working checkpoint folder
    size: int
    shared: bool  # immutable data (state, source logs), stored once in shared/ and referenced by many checkpoints


def select_files(
    listing: dict[str, int], batch_id: int, stored: frozenset[str] | set[str] = frozenset()
) -> list[SelectedFile]:
    """Select what Spark needs to resume after ``batch_id``. ``stored`` holds targets already uploaded."""
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
            raise CaptureError(f"Spark's working folder has no {log_dir}/{batch_id}; batch {batch_id} is not complete")
        selected.extend(SelectedFile(p, visible[p], shared=False) for _, p in upto[-2:])
    selected.extend(SelectedFile(p, s, shared=True) for p, s in sorted(visible.items()) if p.startswith("sources/"))
    selected.extend(_select_state(visible, batch_id, stored))
    return selected


def _select_state(visible: dict[str, int], batch_id: int, stored: frozenset[str] | set[str]) -> list[SelectedFile]:
    state = {p: s for p, s in visible.items() if p.startswith("state/")}
    for path in state:
        if any(h.search(path) for h in _ROCKSDB_HINTS):
            raise UnsupportedStateStore(
                f"the RocksDB state store is not supported yet (found {path}); snapshots of its "
                "SST/zip/changelog files, with or without changelog checkpointing, are not implemented. Set "
                "spark.sql.streaming.stateStore.providerClass to "
                "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider (the default)"
            )
    target_version = batch_id + 1
    by_folder: dict[str, dict[int, dict[str, str]]] = {}
    selected: list[SelectedFile] = []
    for path, size in sorted(state.items()):
        folder, name = posixpath.split(path)
        data = _STATE_DATA.match(name)
        if data:
            by_folder.setdefault(folder, {}).setdefault(int(data.group(1)), {})[data.group(2)] = path
            continue
        # State metadata: keep it unless it is versioned by a later batch (operator metadata v2, schemas).
        versioned = _VERSIONED_META.match(name)
        in_metadata = {"_metadata", "_stateSchema"} & set(folder.split("/"))
        if versioned and in_metadata and int(versioned.group(1)) > batch_id:
            continue
        selected.append(SelectedFile(path, size, shared=False))
    for folder, versions in sorted(by_folder.items()):
        chain = _choose_chain(folder, versions, target_version, visible, stored)
        selected.extend(SelectedFile(p, visible[p], shared=True) for p in chain)
    return selected


def _choose_chain(
    folder: str,
    versions: dict[int, dict[str, str]],
    target: int,
    sizes: dict[str, int],
    stored: frozenset[str] | set[str],
) -> list[str]:
    deltas = {v for v, kinds in versions.items() if "delta" in kinds and v <= target}
    bases = sorted((v for v, kinds in versions.items() if "snapshot" in kinds and v <= target), reverse=True)
    candidates: list[tuple[int, int, list[str]]] = []
    for base in [*bases, 0]:
        needed = range(base + 1, target + 1)
        if not all(v in deltas for v in needed):
            continue
        chain = ([versions[base]["snapshot"]] if base else []) + [versions[v]["delta"] for v in needed]
        new_bytes = sum(sizes[p] for p in chain if p not in stored)
        candidates.append((base, new_bytes, chain))
    if not candidates:
        raise CaptureError(
            f"state folder {folder} has no complete snapshot/delta chain up to version {target}; "
            "Spark may have cleaned files this checkpoint needs"
        )
    newest_base = candidates[0][0]
    bounded = [c for c in candidates if target - c[0] <= MAX_DELTA_CHAIN] or [candidates[0]]
    # Fewest new bytes first; among equals, the newest base (shortest replay on restore).
    best = min(bounded, key=lambda c: (c[1], c[0] != newest_base, -c[0]))
    return best[2]


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
