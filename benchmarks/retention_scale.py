"""Retention at scale: 10,000 checkpoints and 100 savepoints on local disk.

    .venv/bin/python -m benchmarks.retention_scale [--checkpoints 10000] [--savepoints 100] [--files 3]

Reports the retention operator's planning and deletion time and how many storage list calls it made
(``ls``/``find``/``glob``/``walk`` on the fsspec filesystem). The goal: list calls independent of the
number of files per checkpoint, and under 10 s locally. Needs no Spark.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.provenance import write_result  # noqa: E402
from spark_checkpoint_runtime.layout import (  # noqa: E402
    CheckpointMetadata,
    CheckpointStorage,
    FileEntry,
    now_ms,
    write_metadata_atomically,
)
from spark_checkpoint_runtime.retention import apply_job_retention, plan_job_retention  # noqa: E402

LIST_METHODS = ("ls", "find", "glob", "walk")


def populate(root: Path, checkpoints: int, savepoints: int, files: int) -> CheckpointStorage:
    """Checkpoints that each own ``files`` small files and share one state file, plus savepoints."""
    storage = CheckpointStorage(str(root), "scale")
    shared = root / "scale" / "shared" / "r1" / "state.delta"
    shared.parent.mkdir(parents=True)
    shared.write_bytes(b"s" * 64)
    stamp = now_ms()
    for checkpoint_id in range(1, checkpoints + 1):
        folder = root / "scale" / f"chk-{checkpoint_id}"
        folder.mkdir()
        entries = [FileEntry("shared/r1/state.delta", "state/0/0/1.delta", 64, True)]
        for n in range(files):
            (folder / f"f{n}").write_bytes(b"x" * 16)
            entries.append(FileEntry(f"chk-{checkpoint_id}/f{n}", f"offsets/{n}", 16, False))
        meta = CheckpointMetadata(
            checkpoint_id,
            "checkpoint",
            "scale",
            "r1",
            checkpoint_id,
            stamp,
            stamp,
            "exactly-once",
            entries,
            64,
            16 * files,
        )
        write_metadata_atomically(storage.fs, str(folder), meta)
    for n in range(savepoints):
        folder = root / "scale" / "savepoints" / f"savepoint-{n}"
        folder.mkdir(parents=True)
        (folder / "offsets").write_bytes(b"o")
        meta = CheckpointMetadata(
            checkpoints + n + 1,
            "savepoint",
            "scale",
            "r1",
            0,
            stamp - n,
            stamp - n,
            "exactly-once",
            [FileEntry("offsets", "offsets/0", 1, False)],
            0,
            1,
        )
        write_metadata_atomically(storage.fs, str(folder), meta)
    return storage


def count_list_calls(storage: CheckpointStorage) -> dict[str, int]:
    """Count the list calls retention makes on this filesystem instance.

    Only outermost calls count: a local ``find`` walks folder by folder internally, while on object
    storage the same ``find`` is one paginated listing, which is what the count stands for.
    """
    counts = dict.fromkeys(LIST_METHODS, 0)
    depth = [0]
    for name in LIST_METHODS:
        original = getattr(storage.fs, name)

        def counted(*args: Any, _original=original, _name=name, **kwargs: Any) -> Any:
            if depth[0] == 0:
                counts[_name] += 1
            depth[0] += 1
            try:
                return _original(*args, **kwargs)
            finally:
                depth[0] -= 1

        setattr(storage.fs, name, counted)
    return counts


def measure(checkpoints: int, savepoints: int, files: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="retention-scale-") as base:
        storage = populate(Path(base), checkpoints, savepoints, files)
        counts = count_list_calls(storage)
        started = time.perf_counter()
        plan = plan_job_retention(storage, num_retained=3, savepoint_max_count=10, orphan_grace=3600, now=time.time())
        planned = time.perf_counter()
        list_calls_planning = sum(counts.values())
        apply_job_retention(storage, plan)
        done = time.perf_counter()
        return {
            "checkpoints": checkpoints,
            "savepoints": savepoints,
            "files_per_checkpoint": files,
            "plan_seconds": round(planned - started, 3),
            "delete_seconds": round(done - planned, 3),
            "list_calls_planning": list_calls_planning,
            "deleted_checkpoints": len(plan.delete_checkpoints),
            "deleted_savepoints": len(plan.delete_savepoints),
        }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.retention_scale")
    parser.add_argument("--checkpoints", type=int, default=10_000)
    parser.add_argument("--savepoints", type=int, default=100)
    parser.add_argument("--files", type=int, default=3, help="files per checkpoint (besides _metadata)")
    parser.add_argument("--out", default=str(REPO / "benchmarks" / "retention_scale.json"))
    args = parser.parse_args(argv)
    rows = [measure(args.checkpoints, args.savepoints, f) for f in (args.files, args.files * 4)]
    print(
        f"{'checkpoints':>11} {'savepoints':>10} {'files/chk':>9} {'plan s':>7} {'delete s':>8} "
        f"{'list calls':>10} {'deleted chk':>11} {'deleted sp':>10}"
    )
    for r in rows:
        print(
            f"{r['checkpoints']:>11} {r['savepoints']:>10} {r['files_per_checkpoint']:>9} {r['plan_seconds']:>7} "
            f"{r['delete_seconds']:>8} {r['list_calls_planning']:>10} {r['deleted_checkpoints']:>11} "
            f"{r['deleted_savepoints']:>10}"
        )
    write_result(args.out, {"runs": rows})
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
