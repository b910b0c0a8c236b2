"""A job's checkpoints (``chk-<N>/`` and the ``shared/`` files they reference): reading, validating, "latest",
writing and discarding them."""

from __future__ import annotations

import logging
import posixpath
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from spark_checkpoint_runtime.layout.errors import CheckpointFormatError, DamagedCheckpoint, NoValidCheckpoint
from spark_checkpoint_runtime.layout.metadata import (
    CheckpointMetadata,
    ValidCheckpoint,
    missing_files,
    read_metadata,
)
from spark_checkpoint_runtime.layout.names import (
    METADATA_FILE,
    SEGMENTS_DIR,
    SHARED_DIR,
    checkpoint_dir_name,
    relative_to,
    safe_relative_path,
)
from spark_checkpoint_runtime.layout.store import delete_each, write_metadata_atomically

if TYPE_CHECKING:
    from spark_checkpoint_runtime.layout.job_folder import JobFolder

log = logging.getLogger(__name__)


class CompletedCheckpoints:
    """The checkpoints of one job folder (``job.checkpoints``): ``chk-<N>/_metadata``, the files each owns, and
    the ``shared/`` files they reference."""

    def __init__(self, job: JobFolder):
        self.job = job

    # --- paths -----------------------------------------------------------------------------------
    def path(self, checkpoint_id: int) -> str:
        """The ``chk-<N>`` folder of checkpoint ``checkpoint_id``."""
        return posixpath.join(self.job.job_path, checkpoint_dir_name(checkpoint_id))

    def relative_file(self, checkpoint_id: int, target: str) -> str:
        """Job-relative path where checkpoint ``checkpoint_id`` keeps a file it owns."""
        return posixpath.join(checkpoint_dir_name(checkpoint_id), safe_relative_path(target, context="target"))

    def shared_relative_file(self, run_id: str, target: str, *, variant: str | None = None) -> str:
        """Job-relative path of a shared file (state data, source log) uploaded by run ``run_id``."""
        name = safe_relative_path(target, context="target")
        if variant:
            name = f"{name}.{variant}"
        return posixpath.join(SHARED_DIR, run_id, name)

    def segment_relative_file(self, run_id: str, checkpoint_id: int, number: int) -> str:
        """Job-relative path of segment ``number`` of checkpoint ``checkpoint_id``: one object holding many of
        its small new files (file merging), shared by every later checkpoint that references one of them."""
        return posixpath.join(SHARED_DIR, run_id, SEGMENTS_DIR, f"chk-{checkpoint_id}-{number}.seg")

    @property
    def shared_path(self) -> str:
        return posixpath.join(self.job.job_path, SHARED_DIR)

    # --- listing ---------------------------------------------------------------------------------
    def ids(self) -> list[int]:
        """Ids of every ``chk-<N>`` folder, complete or not, ascending."""
        return self.job.listing().checkpoint_ids

    def newest_metadata_id(self, ids: list[int] | None = None) -> int | None:
        """The newest ``chk-<N>`` that has a ``_metadata`` file, parseable or not (None: no such folder).

        ``ids``: the ``ids()`` a caller already listed.
        """
        for checkpoint_id in reversed(self.ids() if ids is None else ids):
            if self.job.fs.exists(posixpath.join(self.path(checkpoint_id), METADATA_FILE)):
                return checkpoint_id
        return None

    def shared_files(self) -> dict[str, int]:
        """Every file under ``shared/``: job-relative path to size."""
        try:
            found = self.job.fs.find(self.shared_path, detail=True)
        except FileNotFoundError:
            return {}
        return {
            relative_to(path, self.job.job_path): int(info.get("size") or 0)
            for path, info in found.items()
            if info.get("type") != "directory"
        }

    def referenced_shared_files(self, meta: CheckpointMetadata) -> dict[str, int]:
        """The files under the ``shared/<run>/`` folders ``meta`` references: job-relative path to size.

        Enough to validate that one snapshot. A snapshot that references one run's folder lists only that
        folder. One that references several (a job restarted often keeps reusing older runs' segments) lists
        ``shared/`` once: retention keeps little there beyond what the retained checkpoints reference, so
        one listing, 1,000 keys a request, costs no more than a listing per run, and restarts do not add one.
        """
        runs, top_level = set(), False
        for entry in meta.files:
            parts = entry.path.split("/")
            if parts[0] == SHARED_DIR and len(parts) > 2:
                runs.add(posixpath.join(parts[0], parts[1]))
            elif parts[0] == SHARED_DIR:
                top_level = True  # not a layout the runtime writes, but _metadata is untrusted: look it up
        found: dict[str, int] = {}
        wanted = tuple(f"{run}/" for run in runs)
        folders = [self.shared_path] if len(runs) > 1 else [posixpath.join(self.job.job_path, run) for run in runs]
        for folder in folders:
            details = self.job.files_with_details(folder)
            found.update({path: size for path, (size, _) in details.items() if path.startswith(wanted)})
        if top_level:
            try:
                entries = self.job.fs.ls(self.shared_path, detail=True)
            except FileNotFoundError:
                entries = []
            for info in entries:
                if info.get("type") != "directory":
                    found[relative_to(info["name"], self.job.job_path)] = int(info.get("size") or 0)
        return found

    # --- _metadata -------------------------------------------------------------------------------
    def read(self, checkpoint_id: int) -> CheckpointMetadata:
        """Read and parse ``chk-<N>/_metadata``; ``DamagedCheckpoint`` if missing, malformed or another's."""
        meta = read_metadata(self.job.fs, self.path(checkpoint_id))
        self._check_belongs(meta, checkpoint_id)
        return meta

    def _check_belongs(self, meta: CheckpointMetadata, checkpoint_id: int) -> None:
        location = self.job.url_of(self.path(checkpoint_id))
        if meta.job_name != self.job.job_name:
            raise DamagedCheckpoint(location, f"_metadata belongs to job {meta.job_name!r}, not {self.job.job_name!r}")
        if meta.id != checkpoint_id or meta.kind != "checkpoint":
            raise DamagedCheckpoint(
                location, f"_metadata says {meta.kind} {meta.id}, folder says checkpoint {checkpoint_id}"
            )

    def completed(self) -> list[CheckpointMetadata]:
        """Every checkpoint whose ``_metadata`` parses (files not checked), oldest first."""
        found = []
        for checkpoint_id in self.ids():
            try:
                found.append(self.read(checkpoint_id))
            except DamagedCheckpoint:
                continue
        return found

    def write_metadata(self, meta: CheckpointMetadata) -> str:
        """Write ``chk-<N>/_metadata`` in one step, never over an existing one (an exclusive create: a hard link of a
        finished temporary file on disk, ``If-None-Match`` on S3). Returns its path."""
        return write_metadata_atomically(self.job.fs, self.path(meta.id), meta)

    def withdraw_metadata(self, checkpoint_id: int, run_id: str) -> None:
        """Delete ``chk-<N>/_metadata`` if run ``run_id`` wrote it (a run that lost the job takes it back)."""
        if self._metadata_writer(checkpoint_id) == run_id:
            delete_each(self.job.fs, [posixpath.join(self.path(checkpoint_id), METADATA_FILE)], recursive=False)

    def _metadata_writer(self, checkpoint_id: int) -> str | None:
        """The run that wrote ``chk-<N>/_metadata``, or None if there is no readable one."""
        try:
            return read_metadata(self.job.fs, self.path(checkpoint_id)).run_id
        except CheckpointFormatError:
            return None

    # --- discards --------------------------------------------------------------------------------
    def discard(self, checkpoint_ids: list[int], listed_files: list[str] | None = None) -> None:
        """Delete checkpoint folders, every ``_metadata`` first: a crash leaves garbage, never a lie.

        ``listed_files``: as in ``JobFolder.discard_snapshots``.
        """
        self.job.discard_snapshots([self.path(i) for i in checkpoint_ids], listed_files)

    def discard_own(self, checkpoint_id: int, run_id: str) -> None:
        """Discard a failed checkpoint of run ``run_id``, unless another run completed that id meanwhile.

        Ids can only collide when two runs write one job (a zombie that lost the lease): the other run's
        completed checkpoint must survive the zombie's clean-up.
        """
        writer = self._metadata_writer(checkpoint_id)
        if writer is not None and writer != run_id:
            log.warning("leaving chk-%d alone: run %s completed it", checkpoint_id, writer)
            return
        self.discard([checkpoint_id])

    # --- validation and "latest" ------------------------------------------------------------------
    def validate(
        self,
        checkpoint_id: int,
        shared_listing: dict[str, int] | None = None,
        meta: CheckpointMetadata | None = None,
    ) -> CheckpointMetadata:
        """Return the metadata if every file it lists exists with the recorded size, else raise.

        ``shared_listing``: sizes of shared files already listed (default: all of ``shared/``); ``meta``: the
        checkpoint's ``_metadata`` already read.
        """
        meta = meta if meta is not None else self.read(checkpoint_id)
        folder = self.path(checkpoint_id)
        shared = shared_listing if shared_listing is not None else self.shared_files()
        try:
            owned = {
                relative_to(path, self.job.job_path): int(info.get("size") or 0)
                for path, info in self.job.fs.find(folder, detail=True).items()
                if info.get("type") != "directory"
            }
        except FileNotFoundError:
            owned = {}
        problems = missing_files(meta.files, {**owned, **shared})
        if problems:
            raise DamagedCheckpoint(self.job.url_of(folder), problems)
        return meta

    def iter_valid(
        self, newer_than: int | None = None, ids: list[int] | None = None
    ) -> Iterator[tuple[int, CheckpointMetadata | DamagedCheckpoint]]:
        """Newest first (down to ``newer_than``, exclusive): each checkpoint id with its metadata, or why not valid.

        Each is checked against a listing of only the ``shared/<run>/`` folders its ``_metadata`` references:
        the cost follows the checkpoints looked at, never every file the job ever shared, and nothing is
        listed beyond the job folder when no checkpoint is newer than ``newer_than``. ``ids``: the ``ids()``
        a caller already listed.
        """
        for checkpoint_id, result, _ in self._validated(newer_than, ids):
            yield checkpoint_id, result

    def _validated(
        self, newer_than: int | None, ids: list[int] | None
    ) -> Iterator[tuple[int, CheckpointMetadata | DamagedCheckpoint, dict[str, int]]]:
        """``iter_valid`` with the shared files' listing each checkpoint was checked against."""
        for checkpoint_id in reversed(self.ids() if ids is None else ids):
            if newer_than is not None and checkpoint_id <= newer_than:
                return
            shared: dict[str, int] = {}
            try:
                meta = self.read(checkpoint_id)
                shared = self.referenced_shared_files(meta)
                yield checkpoint_id, self.validate(checkpoint_id, shared, meta), shared
            except DamagedCheckpoint as exc:
                yield checkpoint_id, exc, shared

    def latest_valid(self, *, newer_than: int | None = None, ids: list[int] | None = None) -> ValidCheckpoint | None:
        """The newest checkpoint whose ``_metadata`` parses and whose files all exist.

        Damaged ones are skipped with a warning naming why. Returns None when there are no checkpoints
        (newer than ``newer_than``, if given). Raises ``NoValidCheckpoint`` when checkpoints exist but none
        is valid, because starting from empty state then would silently lose data. ``ids``: the ``ids()`` a
        caller already listed.
        """
        skipped: list[str] = []
        for checkpoint_id, result, shared in self._validated(newer_than, ids):
            if isinstance(result, DamagedCheckpoint):
                if result.reason.startswith("no _metadata"):
                    continue  # in progress or abandoned mid-upload: never a completed checkpoint
                log.warning("skipping damaged checkpoint %s: %s", checkpoint_dir_name(checkpoint_id), result.reason)
                skipped.append(f"{checkpoint_dir_name(checkpoint_id)}: {result.reason}")
                continue
            sizes = {f.path: shared[f.path] for f in result.files if f.shared and f.path in shared}
            return ValidCheckpoint(result, self.path(checkpoint_id), self.job.fs, self.job.job_path, sizes)
        if skipped:
            raise NoValidCheckpoint(
                f"{self.job.location} has no valid checkpoint ({'; '.join(skipped)}); "
                "pass --restore-from PATH to pick one, or --restore-from none to start fresh"
            )
        return None


def find_completed_checkpoint(
    storage: JobFolder, newer_than: int | None = None, completed_after_ms: int | None = None
) -> dict[str, Any] | None:
    """The newest valid completed checkpoint (newer than ``newer_than``) as a JSON-able summary, or None.

    The one condition behind the checkpoint sensor's poke and its trigger. With ``completed_after_ms``
    (epoch milliseconds) the newest one counts only if it completed after that moment. All checkpoints being
    damaged counts as "none yet" here (a warning is logged); restoring is where that is refused.
    """
    try:
        found = storage.checkpoints.latest_valid(newer_than=newer_than)
    except NoValidCheckpoint as exc:
        log.warning("%s", exc)
        return None
    if found is None:
        return None
    # Ids only grow, so the newest is the one to compare; an older one cannot be later.
    if completed_after_ms is not None and found.metadata.completion_timestamp_ms <= completed_after_ms:
        return None
    return {**found.metadata.summary(), "checkpoint_path": storage.url_of(found.path)}
