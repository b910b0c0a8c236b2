"""What the parts of one run share: staged batches, stop flags, rows, the savepoint taken.

The query loop stages batches here, the coordinator asks which staged output a snapshot publishes
(``staged_for``), and the publisher marks what a completed snapshot published. None of them calls back into
the job.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from spark_checkpoint_runtime.layout import CheckpointMetadata, StagedOutput
from spark_checkpoint_runtime.run.steps import StepTimes

log = logging.getLogger(__name__)


class RunState:
    """One run's shared state. Thread-safe where threads meet (the batch thread, the coordinator, signals)."""

    def __init__(self, run_id: str):
        self.run_id = run_id
        self.stop_requested = threading.Event()
        self.stopping = threading.Event()  # set once the query is being stopped: no new batch may start
        self.rows: dict[int, int] = {}  # input rows per batch, for the run report
        self.savepoint: CheckpointMetadata | None = None
        self.savepoint_url: str | None = None
        self.steps = StepTimes()  # seconds per step of the run, for the run report
        # Batches this run staged that no completed snapshot has published yet, and (during a rewind) the
        # restored snapshot's staged output that the rewind checkpoint carries over.
        self._staged: set[int] = set()
        self._carried: StagedOutput | None = None
        self._lock = threading.Lock()

    def request_stop(self, *_: Any) -> None:
        """Ask for a graceful stop: finish the batch in flight, checkpoint, commit, exit."""
        if not self.stop_requested.is_set():
            log.info("stop requested: finishing the batch in flight, then a final checkpoint")
        self.stop_requested.set()

    def staged(self, batch_id: int) -> None:
        """The batch's output is staged, waiting for a snapshot that covers it."""
        with self._lock:
            self._staged.add(batch_id)

    def carry(self, staged: StagedOutput | None) -> None:
        """A rewind: the first snapshot of the new history publishes the restored snapshot's staged output."""
        with self._lock:
            self._carried = staged

    def staged_for(self, checkpoint_id: int, batch_id: int) -> StagedOutput | None:
        """The staged output snapshot ``checkpoint_id`` of ``batch_id`` publishes when it completes."""
        with self._lock:
            if self._carried is not None:
                return self._carried
            batches = tuple(sorted(b for b in self._staged if b <= batch_id))
        return StagedOutput(checkpoint_id, self.run_id, batches) if batches else None

    def published(self, staged: StagedOutput) -> None:
        """A completed snapshot published ``staged``: those batches are no longer waiting."""
        with self._lock:
            self._carried = None
            if staged.run_id == self.run_id:
                self._staged.difference_update(staged.batches)
