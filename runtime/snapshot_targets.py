"""Where a snapshot goes: the run's numbered checkpoints, or a savepoint folder.

The coordinator takes both kinds the same way (capture, upload, ``_metadata``); what differs is where the
files land and what happens around them, and that difference lives here, behind one interface:

- a **checkpoint** references the shared files already stored (incremental), is written under the job's
  ``chk-N``, becomes "latest", subsumes older checkpoints, and counts against the tolerable failures;
- a **savepoint** copies every file into a self-contained folder, shares nothing with later checkpoints,
  and is never subsumed.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Protocol

from spark_checkpoint_runtime import faults
from spark_checkpoint_runtime.file_merging import Compaction, FileMerging
from spark_checkpoint_runtime.layout import CheckpointMetadata, JobFolder, SavepointFolder, SnapshotExists
from spark_checkpoint_runtime.snapshot import Capture, StoredFiles, Upload, upload, upload_savepoint
from spark_checkpoint_runtime.working_copy import WorkingCopy


class SnapshotTarget(Protocol):
    """What the coordinator needs of a snapshot's destination."""

    kind: str  # "checkpoint" or "savepoint", as written into ``_metadata``
    incremental: bool  # references files already stored instead of copying them
    subsumes: bool  # a completed one becomes "latest", replaces the stored set and runs retention
    where: str  # for the log line of a completed snapshot
    location: str | None  # a savepoint's folder, for the id record; None for the job's own checkpoints

    def upload(
        self, snap: Capture, working: WorkingCopy, aborted: threading.Event, fence: Callable[[str], None]
    ) -> Upload: ...

    def write_metadata(self, meta: CheckpointMetadata) -> None: ...

    def withdraw(self, snapshot_id: int) -> None:
        """Take back what was written after the run lost the job (only what this run wrote)."""

    def discard(self, snapshot_id: int) -> None:
        """Remove what a failed or aborted snapshot left (it has no ``_metadata``)."""


class CheckpointTarget:
    """The run's numbered checkpoints under the job folder."""

    kind = "checkpoint"
    incremental = True
    subsumes = True
    where = ""
    location = None

    def __init__(self, storage: JobFolder, run_id: str, stored: StoredFiles, merging: FileMerging = FileMerging()):
        self.storage = storage
        self.run_id = run_id
        self.stored = stored
        self.merging = merging
        self.compaction = Compaction(storage, known_sizes=stored.sizes)
        self.uploaded: set[str] = set()  # shared files this run uploaded: only these may already be stored

    def upload(
        self, snap: Capture, working: WorkingCopy, aborted: threading.Event, fence: Callable[[str], None]
    ) -> Upload:
        return upload(
            snap,
            working,
            self.storage,
            self.run_id,
            self.stored,
            aborted,
            fence=fence,
            uploaded=self.uploaded,
            merging=self.merging,
            compaction=self.compaction,
        )

    def write_metadata(self, meta: CheckpointMetadata) -> None:
        faults.reach("before-metadata")
        self.storage.checkpoints.write_metadata(meta)

    def withdraw(self, snapshot_id: int) -> None:
        self.storage.checkpoints.withdraw_metadata(snapshot_id, self.run_id)

    def discard(self, snapshot_id: int) -> None:
        self.storage.checkpoints.discard_own(snapshot_id, self.run_id)


class SavepointTarget:
    """One self-contained savepoint folder (under the job's ``savepoints/`` or a target directory)."""

    kind = "savepoint"
    incremental = False
    subsumes = False

    def __init__(self, folder: SavepointFolder):
        self.folder = folder
        self.started = False  # this attempt began copying into the folder
        self.written = False  # this attempt wrote the folder's _metadata

    @property
    def where(self) -> str:
        return f" at {self.folder.url}"

    @property
    def location(self) -> str:
        return self.folder.url

    def upload(
        self, snap: Capture, working: WorkingCopy, aborted: threading.Event, fence: Callable[[str], None]
    ) -> Upload:
        # A completed savepoint is immutable: one already there (the same trigger id asked twice, a copy made
        # by hand) is refused before a single file of it is overwritten.
        if self.folder.exists():
            raise SnapshotExists(
                f"{self.folder.url} already holds a completed savepoint; a savepoint is never overwritten: ask "
                "with another trigger id or target directory"
            )
        self.started = True
        return upload_savepoint(snap, working, self.folder, aborted, fence=fence)

    def write_metadata(self, meta: CheckpointMetadata) -> None:
        self.folder.write_metadata(meta)
        self.written = True

    def withdraw(self, snapshot_id: int) -> None:
        if self.written:
            self.folder.discard()
        else:
            self.discard(snapshot_id)

    def discard(self, snapshot_id: int) -> None:
        # Only what this attempt wrote: never a folder it found completed, nor one it never began.
        if self.started and not self.written and not self.folder.exists():
            self.folder.discard()
