"""A savepoint's files frozen together with the checkpoint taken just before it.

A savepoint is taken after a checkpoint of the same batch (that checkpoint publishes the output; see
``CheckpointCoordinator.savepoint_now``). It is uploaded only once that checkpoint completes, and while the
query runs on Spark keeps just 10 batches of history in the working folder: a savepoint captured after a long
upload could find its batch gone. So its files are frozen (hard links, a ``Capture``) right after the
checkpoint's own capture, on the coordinator thread, and the savepoint takes that capture when its turn comes.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from spark_checkpoint_runtime.snapshot import Capture, StoredFiles, capture
from spark_checkpoint_runtime.working_copy import WorkingCopy

if TYPE_CHECKING:
    from spark_checkpoint_runtime.coordinator import SnapshotRequest

log = logging.getLogger(__name__)


class SavepointFreezes:
    """Freezes savepoints' files early and hands each capture to exactly one owner.

    ``lock`` is the coordinator's: a waiting caller that gives up (``SnapshotRequest.abandoned``) and the
    coordinator thread race for the capture, and whoever takes it releases its frozen files.
    """

    def __init__(
        self, working: WorkingCopy, stored: StoredFiles, clock: Callable[[], float], lock: threading.Condition
    ):
        self.working = working
        self.stored = stored
        self.clock = clock
        self.lock = lock
        self._count = 0  # names the frozen captures: savepoint-1, savepoint-2, ...

    def freeze(self, savepoint: SnapshotRequest, batch_id: int) -> None:
        """Freeze ``savepoint``'s files now, at ``batch_id`` (the batch of the checkpoint just taken before it).

        Should this capture fail, the savepoint is captured when its turn comes, as any savepoint is.
        """
        self.release(savepoint)  # frozen with an earlier try of this checkpoint, which was declined
        self._count += 1
        name = f"savepoint-{self._count}"
        started = self.clock()
        try:
            prepared = capture(self.working, 0, batch_id, self.stored, reuse=False, frozen_as=name)
        except Exception as exc:  # noqa: BLE001 - the savepoint's own capture comes later and reports it
            self.working.release(name)
            log.warning("savepoint files not frozen at batch %d (%s); they are captured later", batch_id, exc)
            return
        prepared = replace(prepared, took_ms=int((self.clock() - started) * 1000))
        with self.lock:
            if not savepoint.abandoned:
                savepoint.prepared, prepared = prepared, None
        if prepared is not None:  # its caller stopped waiting meanwhile
            self.working.release(prepared.frozen_as)

    def take(self, request: SnapshotRequest) -> Capture | None:
        """The request's frozen capture, now owned by the caller (who uploads or releases it); None if none."""
        with self.lock:
            prepared, request.prepared = request.prepared, None
        return prepared

    def release(self, request: SnapshotRequest) -> None:
        """Drop the request's frozen capture, if it still has one (its files are no longer needed)."""
        if (prepared := self.take(request)) is not None:
            self.working.release(prepared.frozen_as)
