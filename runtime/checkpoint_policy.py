"""When a checkpoint is due, and how many failed checkpoints a job tolerates (Flink's options and roles).

- ``CheckpointConfig``: interval, min pause, timeout, tolerable failures, num-retained, checkpointing mode;
- ``RequestDecider`` applies the interval and min pause (one checkpoint at a time, as in Flink's default
  ``max-concurrent-checkpoints: 1``);
- ``FailureManager`` counts consecutive failed checkpoints against ``tolerable-failed-checkpoints``.
"""

from __future__ import annotations

from dataclasses import dataclass

from spark_checkpoint_runtime.file_merging import FileMerging
from spark_checkpoint_runtime.thread_priority import BACKGROUND_NICENESS


@dataclass(frozen=True)
class CheckpointConfig:
    """Flink's checkpoint options, in seconds."""

    interval: float = 10.0
    min_pause: float = 0.0
    timeout: float = 600.0
    tolerable_failures: int = 0
    num_retained: int = 3
    mode: str = "exactly-once"
    merging: FileMerging = FileMerging()  # small new files packed into segments (object stores by default)
    niceness: int = BACKGROUND_NICENESS  # the checkpoint threads' nice steps below the job (see thread_priority)


class RequestDecider:
    """Is a periodic checkpoint due? Interval since the last trigger, min pause since the last completion."""

    def __init__(self, interval: float, min_pause: float):
        self.interval = interval
        self.min_pause = min_pause
        self.last_trigger: float | None = None
        self.last_completion: float | None = None

    def due(self, now: float) -> bool:
        if self.last_trigger is not None and now - self.last_trigger < self.interval:
            return False
        return self.last_completion is None or now - self.last_completion >= self.min_pause

    def triggered(self, now: float) -> None:
        self.last_trigger = now

    def finished(self, now: float) -> None:
        self.last_completion = now


class FailureManager:
    """Counts consecutive failed checkpoints; past the tolerable number the job must fail."""

    def __init__(self, tolerable: int):
        self.tolerable = tolerable
        self.consecutive = 0
        self.total = 0

    def failed(self, checkpoint_id: int, reason: str) -> str | None:
        """Record a failure; return the job's failure reason once the tolerance is exceeded."""
        self.consecutive += 1
        self.total += 1
        if self.consecutive > self.tolerable:
            return (
                f"checkpoint {checkpoint_id} failed ({reason}); {self.consecutive} consecutive failed "
                f"checkpoint(s) exceed --tolerable-failed-checkpoints {self.tolerable}"
            )
        return None

    def succeeded(self) -> None:
        self.consecutive = 0
