"""Retention at scale: 10,000 checkpoints and 100 savepoints on local disk.

    .venv/bin/python -m benchmarks.retention_scale [--checkpoints 10000] [--savepoints 100] [--files 3]
        [--repeat 3] [--s3-checkpoints 1000]

Reports the retention operator's planning and deletion time and how many storage list calls it made
(``ls``/``find``/``glob``/``walk`` on the fsspec filesystem), for every one of ``--repeat`` runs of each
configuration. The goal: list calls independent of the number of files per checkpoint, and every run under
10 s locally (met only if every run meets it). Then one run on the loopback S3 server of
``--s3-checkpoints`` checkpoints, counting every request by kind. Needs no Spark.
"""

from __future__ import annotations

import argparse
import posixpath
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.provenance import write_result  # noqa: E402
from spark_checkpoint_runtime.layout import (  # noqa: E402
    CheckpointMetadata,
    FileEntry,
    JobFolder,
    now_ms,
    store,  # noqa: E402
    write_metadata_atomically,
)
from spark_checkpoint_runtime.retention import apply_job_retention, plan_job_retention  # noqa: E402

LIST_METHODS = ("ls", "find", "glob", "walk")
GOAL_SECONDS = 10.0


def populate(storage: JobFolder, checkpoints: int, savepoints: int, files: int) -> JobFolder:
    """Checkpoints that each own ``files`` small files and share one state file, plus savepoints."""
    fs, made = storage.fs, set()

    def put(path: str, data: bytes) -> None:
        folder = posixpath.dirname(path)
        if folder not in made:  # a local disk needs the folder first; object stores have none
            fs.makedirs(folder, exist_ok=True)
            made.add(folder)
        fs.pipe_file(path, data)

    put(storage.job_file("shared/r1/state.delta"), b"s" * 64)
    stamp = now_ms()
    for checkpoint_id in range(1, checkpoints + 1):
        folder = storage.checkpoints.path(checkpoint_id)
        entries = [FileEntry("shared/r1/state.delta", "state/0/0/1.delta", 64, True)]
        for n in range(files):
            put(posixpath.join(folder, f"f{n}"), b"x" * 16)
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
        write_metadata_atomically(fs, folder, meta)
    for n in range(savepoints):
        folder = storage.savepoints.path(f"savepoint-{n}")
        put(posixpath.join(folder, "offsets"), b"o")
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
        write_metadata_atomically(fs, folder, meta)
    return storage


@contextmanager
def count_list_calls(storage: JobFolder) -> Iterator[dict[str, int]]:
    """Count the list calls retention makes on this filesystem instance, and its local recursive listings.

    Only outermost calls count: a local ``find`` (or the runtime's own local listing, ``local_files``)
    walks folder by folder internally, while on object storage the same ``find`` is one paginated
    listing, which is what the count stands for.
    """
    counts = dict.fromkeys((*LIST_METHODS, "local_files"), 0)
    depth = [0]

    def counting(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
        def counted(*args: Any, **kwargs: Any) -> Any:
            if depth[0] == 0:
                counts[name] += 1
            depth[0] += 1
            try:
                return original(*args, **kwargs)
            finally:
                depth[0] -= 1

        return counted

    for name in LIST_METHODS:
        setattr(storage.fs, name, counting(name, getattr(storage.fs, name)))
    original_local = store.local_files  # what files_under calls for a local folder
    store.local_files = counting("local_files", original_local)
    try:
        yield counts
    finally:
        store.local_files = original_local
        for name in LIST_METHODS:
            delattr(storage.fs, name)


def measure(checkpoints: int, savepoints: int, files: int) -> dict[str, Any]:
    """One retention run over a fresh local job: times, outermost list calls, what it deleted."""
    with tempfile.TemporaryDirectory(prefix="retention-scale-") as base:
        storage = populate(JobFolder(base, "scale"), checkpoints, savepoints, files)
        with count_list_calls(storage) as counts:
            started = time.perf_counter()
            plan = plan_job_retention(
                storage, num_retained=3, savepoint_max_count=10, orphan_grace=3600, now=time.time()
            )
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
            "total_seconds": round(done - started, 3),
            "list_calls_planning": list_calls_planning,
            "deleted_checkpoints": len(plan.delete_checkpoints),
            "deleted_savepoints": len(plan.delete_savepoints),
        }


def measure_s3(checkpoints: int, savepoints: int, files: int) -> dict[str, Any]:
    """One retention run on the loopback S3 server, counting every request by kind (not only listings)."""
    from benchmarks.s3_requests import CountingS3Server

    server = CountingS3Server().start()
    try:
        storage = JobFolder(f"s3://{server.bucket}/scale", "scale", server.options)
        populate(storage, checkpoints, savepoints, files)
        server.reset()
        started = time.perf_counter()
        plan = plan_job_retention(storage, num_retained=3, savepoint_max_count=10, orphan_grace=3600, now=time.time())
        planning = server.snapshot()
        server.reset()
        apply_job_retention(storage, plan)
        deleting = server.snapshot()
        seconds = time.perf_counter() - started
    finally:
        server.stop()
    return {
        "checkpoints": checkpoints,
        "savepoints": savepoints,
        "files_per_checkpoint": files,
        "deleted_checkpoints": len(plan.delete_checkpoints),
        "deleted_files": len(plan.delete_checkpoints) * (files + 1) + len(plan.delete_savepoints) * 2,
        "requests_planning": planning,
        "requests_deleting": deleting,
        "seconds_on_loopback": round(seconds, 2),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.retention_scale")
    parser.add_argument("--checkpoints", type=int, default=10_000)
    parser.add_argument("--savepoints", type=int, default=100)
    parser.add_argument("--files", type=int, default=3, help="files per checkpoint (besides _metadata)")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each local configuration")
    parser.add_argument("--s3-checkpoints", type=int, default=1000, help="checkpoints of the S3 run (0: skip it)")
    parser.add_argument("--out", default=str(REPO / "benchmarks" / "retention_scale.json"))
    args = parser.parse_args(argv)
    rows = [
        measure(args.checkpoints, args.savepoints, files)
        for files in (args.files, args.files * 4)
        for _ in range(args.repeat)
    ]
    print(
        f"{'checkpoints':>11} {'savepoints':>10} {'files/chk':>9} {'plan s':>7} {'delete s':>8} {'total s':>8} "
        f"{'list calls':>10} {'deleted chk':>11} {'deleted sp':>10}"
    )
    for r in rows:
        print(
            f"{r['checkpoints']:>11} {r['savepoints']:>10} {r['files_per_checkpoint']:>9} {r['plan_seconds']:>7} "
            f"{r['delete_seconds']:>8} {r['total_seconds']:>8} {r['list_calls_planning']:>10} "
            f"{r['deleted_checkpoints']:>11} {r['deleted_savepoints']:>10}"
        )
    # The goal is met only if every run meets it: a median would hide the slow run.
    met = all(r["total_seconds"] < GOAL_SECONDS for r in rows)
    print(f"goal: every run under {GOAL_SECONDS:g} s locally: {'met' if met else 'NOT met'}")
    result: dict[str, Any] = {"runs": rows, "goal_seconds": GOAL_SECONDS, "goal_met_by_every_run": met}
    if args.s3_checkpoints:
        s3 = measure_s3(args.s3_checkpoints, 20, args.files)
        result["s3"] = s3
        print(f"on S3 (loopback), {s3['checkpoints']} checkpoints: planning {s3['requests_planning']}")
        print(f"  deleting {s3['deleted_files']} files: {s3['requests_deleting']}")
    write_result(args.out, result)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
