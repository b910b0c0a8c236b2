"""A real checkpoint coordinator over a working folder laid out as Spark writes it: no Spark needed."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from spark_checkpoint_runtime.checkpoint_policy import CheckpointConfig
from spark_checkpoint_runtime.coordinator import CheckpointCoordinator
from spark_checkpoint_runtime.layout import JobFolder
from spark_checkpoint_runtime.lease import UNFENCED, Fence
from spark_checkpoint_runtime.snapshot import StoredFiles
from spark_checkpoint_runtime.working_copy import WorkingCopy

PINNED = '{"batchWatermarkMs":0,"conf":{"spark.sql.shuffle.partitions":"2"}}'


def spark_like_working_folder(tmp_path: Path, batch: int) -> WorkingCopy:
    """Run ``run-1``'s working folder under ``tmp_path/work`` after ``batch``, laid out as Spark writes it
    (query metadata, offsets, commits, two state partitions of the HDFS-backed store); called again with a
    later batch, it adds that batch's files."""
    working = WorkingCopy(str(tmp_path / "work"), "j", "run-1")
    if not Path(working.file_path("metadata")).exists():
        working.create()
    files = {"metadata": b"{}"}
    for b in range(batch + 1):
        files[f"offsets/{b}"] = f"v1\n{PINNED}\n{{}}".encode()
        files[f"commits/{b}"] = b"v1\n{}"
        files.update({f"state/0/{p}/{b + 1}.delta": bytes([p, b]) * 10 for p in range(2)})
    for target, data in files.items():
        Path(working.file_path(target)).parent.mkdir(parents=True, exist_ok=True)
        Path(working.file_path(target)).write_bytes(data)
    return working


def purge_history_before(tmp_path: Path, batch: int) -> None:
    """What Spark's purge of its history leaves in the working folder ``spark_like_working_folder`` made:
    offsets and commits from ``batch`` on. Frozen captures are the runtime's, and stay."""
    for log_dir in ("offsets", "commits"):
        for entry in (tmp_path / "work").glob(f"**/{log_dir}/*"):
            if entry.name.isdigit() and int(entry.name) < batch and "frozen" not in entry.parts:
                entry.unlink()


def local_coordinator(
    storage: JobFolder,
    working: WorkingCopy,
    next_id: int = 1,
    fence: Fence = UNFENCED,
    config: CheckpointConfig = CheckpointConfig(interval=3600.0),
) -> CheckpointCoordinator:
    """A real coordinator of run ``run-1`` over ``working`` (periodic checkpoints off by default: snapshots on
    request). ``fence`` is asked before every write, as a run's lease is: a test can act at those points."""
    return CheckpointCoordinator(
        storage,
        working,
        config,
        run_id="run-1",
        next_id=next_id,
        stored=StoredFiles(),
        fingerprint={"operators": []},
        restored_from=None,
        spark_version="test",
        on_completed=lambda meta: None,
        fence=fence,
    )


@contextmanager
def running_coordinator(
    storage: JobFolder, working: WorkingCopy, fence: Fence = UNFENCED
) -> Iterator[CheckpointCoordinator]:
    """``local_coordinator`` started for the block and shut down after it, however the block ends."""
    coordinator = local_coordinator(storage, working, fence=fence)
    coordinator.start()
    try:
        yield coordinator
    finally:
        coordinator.shutdown()
