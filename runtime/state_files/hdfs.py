"""The HDFS-backed state store's files: ``<v>.delta`` per version and an occasional ``<v>.snapshot``.

Version ``v`` is rebuilt from a snapshot at or below it (or from nothing) plus every delta after it. Among the
chains that reach the target version, the one needing the fewest new bytes wins (a stored snapshot plus a few
deltas beats a fresh snapshot), with at most ``MAX_DELTA_CHAIN`` deltas to bound restore time. But once that
chain replays more than ``REPLAY_BEFORE_SNAPSHOT`` deltas and Spark has written a newer snapshot, the newer
snapshot's chain is stored: Spark's own spacing of snapshots (``minDeltasForSnapshot``, 10 by default), so a
restore replays no more than a native restart does, for bytes Spark itself wrote.
"""

from __future__ import annotations

import re

from spark_checkpoint_runtime.state_files.errors import CaptureError

MAX_DELTA_CHAIN = 50
REPLAY_BEFORE_SNAPSHOT = 10  # Spark's spark.sql.streaming.stateStore.minDeltasForSnapshot default
DATA_FILE = re.compile(r"^(\d+)\.(delta|snapshot)$")


def select_chain(folder: str, names: dict[str, int], target: int, stored: frozenset[str] | set[str]) -> list[str]:
    """The files (paths under ``folder``) that rebuild version ``target``; ``names`` maps file name -> size."""
    versions: dict[int, dict[str, str]] = {}
    for name in names:
        match = DATA_FILE.match(name)
        if match:
            versions.setdefault(int(match.group(1)), {})[match.group(2)] = f"{folder}/{name}"
    sizes = {f"{folder}/{name}": size for name, size in names.items()}
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
    if target - best[0] > REPLAY_BEFORE_SNAPSHOT and newest_base > best[0]:
        # Without this, a job whose runs are short reuses its stored deltas forever: every restore replays
        # them all, where a native restart starts from the snapshot Spark wrote (1 GB: 1.7 s more per restart).
        return candidates[0][2]
    return best[2]
