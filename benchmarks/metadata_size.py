"""`_metadata` at 2,000 partitions and 1,000 checkpoints of history: its size, and what the driver holds.

    .venv/bin/python -m benchmarks.metadata_size [--partitions 2000] [--checkpoints 1000]

No Spark: a job's checkpoints as the runtime records them for the HDFS-backed store with file merging, written
through the format module into a local job folder and kept by the runtime's own retention. Each checkpoint
adds a delta file per partition (Spark writes one per partition per batch) packed into that checkpoint's
segment, every tenth batch also a snapshot per partition (Spark's ``minDeltasForSnapshot``), and references
the older files a restore still needs (the last snapshot and the deltas after it). The history is the
worst a run writes: ``MAX_WRITTEN_RANGES`` lineage ranges. After each checkpoint: ``_metadata`` written,
retention (``subsume``, which plans and applies: it reads the new ``_metadata``), and the offered files replaced,
as the coordinator does. Segments are sparse files of the right length, so retention's validity check sees
what it would on a store.

Reports ``_metadata``'s size as stored (gzip-compressed above 256 KiB of JSON, format version 3) and as JSON,
the time to write and to read it, and the
driver's memory: its resident size at checkpoints 10, 100 and the last (no growth with history), and the
Python allocations one checkpoint's bookkeeping peaks at. Writes ``benchmarks/metadata_size.json``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.provenance import write_result  # noqa: E402

DELTA_BYTES = 4_000
SNAPSHOT_BYTES = 40_000
SNAPSHOT_EVERY = 10
NUM_RETAINED = 3
RUN_ID = "run-1"


def resident_mib() -> float:
    """The process's resident memory now, MiB (Linux ``/proc``)."""
    pages = int(Path("/proc/self/statm").read_text().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def history(first_id: int, own_id: int, ranges: int) -> list[list[int]]:
    """``ranges`` lineage ranges ending in ``[first_id, own_id]``: single ids below, every other one skipped."""
    return [[2 * i + 1, 2 * i + 1] for i in range(ranges - 1)] + [[first_id, own_id]]


class Job:
    """The files a run of ``partitions`` partitions has stored, and the entries of its next checkpoint."""

    def __init__(self, storage, partitions: int):
        self.storage = storage
        self.partitions = partitions
        self.live: dict[str, object] = {}  # target -> FileEntry a restore still needs

    def checkpoint(self, checkpoint_id: int, batch: int):
        from spark_checkpoint_runtime.layout import FileEntry

        checkpoints = self.storage.checkpoints
        segment = checkpoints.segment_relative_file(RUN_ID, checkpoint_id, 0)
        new: list[tuple[str, int]] = [(f"offsets/{batch}", 600), (f"commits/{batch}", 60)]
        version = batch + 1  # Spark's state version after ``batch``
        snapshot = version % SNAPSHOT_EVERY == 0
        for partition in range(self.partitions):
            new.append((f"state/0/{partition}/{version}.delta", DELTA_BYTES))
            if snapshot:
                new.append((f"state/0/{partition}/{version}.snapshot", SNAPSHOT_BYTES))
        if snapshot:  # the chain a restore needs now starts at this snapshot
            self.live = {t: e for t, e in self.live.items() if not t.startswith("state/")}
        offset = 0
        for target, size in new:
            self.live[target] = FileEntry(segment, target, size, True, offset)
            offset += size
        self.live.setdefault("metadata", FileEntry(segment, "metadata", 45, True, offset))
        path = self.storage.job_file(segment)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as handle:
            handle.truncate(offset + 45)  # sparse: the length retention validates, no bytes written
        # Older offsets and commits are history Spark no longer reads: only the last ones are kept.
        for kind in ("offsets", "commits"):
            self.live.pop(f"{kind}/{batch - 1}", None)
        return list(self.live.values())


def run(partitions: int, checkpoints: int, folder: Path) -> dict:
    from spark_checkpoint_runtime.layout import CheckpointMetadata, JobFolder, now_ms
    from spark_checkpoint_runtime.layout.lineage import MAX_WRITTEN_RANGES
    from spark_checkpoint_runtime.retention import MetadataCache, subsume
    from spark_checkpoint_runtime.snapshot import StoredFiles

    storage = JobFolder(str(folder), "wide")
    job, offered, cache = Job(storage, partitions), StoredFiles(), MetadataCache()
    first_id = 2 * MAX_WRITTEN_RANGES + 1  # room below it for the history's single-id ranges
    sizes, json_sizes, entries, write_ms, retention_ms, resident = [], [], [], [], [], {}
    peak_bytes = None
    for number in range(checkpoints):
        checkpoint_id, last = first_id + number, number == checkpoints - 1
        files = job.checkpoint(checkpoint_id, number)
        if last:
            tracemalloc.start()
        started = time.perf_counter()
        meta = CheckpointMetadata(
            id=checkpoint_id, kind="checkpoint", job_name="wide", run_id=RUN_ID, batch_id=number,
            trigger_timestamp_ms=now_ms() - 500, completion_timestamp_ms=now_ms(),
            checkpointing_mode="exactly-once", files=files, state_bytes=sum(f.size for f in files),
            bytes_written=0, lineage=history(first_id, checkpoint_id, MAX_WRITTEN_RANGES),
            format_version=2,
        )  # fmt: skip
        path = storage.checkpoints.write_metadata(meta)
        write_ms.append((time.perf_counter() - started) * 1000)
        started = time.perf_counter()
        subsume(storage, NUM_RETAINED, checkpoint_id, cache)  # plans and applies
        offered.replace(files)
        retention_ms.append((time.perf_counter() - started) * 1000)
        if last:
            peak_bytes = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
        if number in (9, 99) or last:
            resident[number + 1] = round(resident_mib(), 1)
        data = Path(path).read_bytes()
        sizes.append(len(data))
        entries.append(len(files))
        if number % 7 == 0 or last:  # 7: not in step with the snapshot every tenth batch
            json_sizes.append((len(data), len(meta.to_json().encode("utf-8"))))
    started = time.perf_counter()
    storage.checkpoints.read(first_id + checkpoints - 1)
    read_ms = (time.perf_counter() - started) * 1000
    return {
        "partitions": partitions,
        "checkpoints": checkpoints,
        "lineage_ranges": MAX_WRITTEN_RANGES,
        "retained": sorted(storage.checkpoints.ids()),
        "metadata_bytes": {"median": statistics.median(sizes), "max": max(sizes), "last": sizes[-1]},
        "entries": {"median": statistics.median(entries), "max": max(entries)},
        "json_bytes": {"median": statistics.median(j for _, j in json_sizes), "max": max(j for _, j in json_sizes)},
        "stored_share_median": round(statistics.median(b / j for b, j in json_sizes), 3),
        "write_ms": {"median": round(statistics.median(write_ms), 1), "max": round(max(write_ms), 1)},
        "retention_ms": {"median": round(statistics.median(retention_ms), 1), "max": round(max(retention_ms), 1)},
        "read_ms": round(read_ms, 1),
        "resident_mib_at_checkpoint": resident,
        "one_checkpoint_python_peak_mib": round(peak_bytes / 2**20, 1) if peak_bytes else None,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=2000)
    parser.add_argument("--checkpoints", type=int, default=1000)
    parser.add_argument("--out", default=str(REPO / "benchmarks" / "metadata_size.json"))
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-metadata-") as folder:
        result = run(args.partitions, args.checkpoints, Path(folder))
    for key, value in result.items():
        if key != "retained":
            print(f"{key}: {value}")
    write_result(args.out, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
