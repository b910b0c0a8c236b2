"""How long each step of a run took, for the run report: where a restart's time goes.

A restart's cost against a native Spark restart is what users weigh before adopting the runtime
(``benchmarks/state_size.py`` measures it); the report's ``step_seconds`` says which step to look at when a
restore is slow, without a profiler on the cluster.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager


class StepTimes:
    """Wall-clock seconds per named step of one run, in the order the steps first ran."""

    def __init__(self) -> None:
        self._seconds: dict[str, float] = {}

    @contextmanager
    def step(self, name: str) -> Iterator[None]:
        """Time the block as step ``name`` (a step timed twice adds up); a step that raises still counts."""
        started = time.perf_counter()
        try:
            yield
        finally:
            self._seconds[name] = self._seconds.get(name, 0.0) + time.perf_counter() - started

    def as_dict(self) -> dict[str, float]:
        """The steps' seconds, rounded to the millisecond."""
        return {name: round(seconds, 3) for name, seconds in self._seconds.items()}
