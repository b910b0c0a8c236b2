"""Lineage: which checkpoint ids, and so which published output, belong to the history a job continues.

A job folder can hold more than one history. A restore from an older checkpoint or from a savepoint starts a
new branch, and the abandoned branch's checkpoints stay on disk for a while. Published sink output is tagged
with the id of the snapshot that published it, so one question decides what a restore keeps: is that id in
the restored snapshot's history?

Every ``_metadata`` records its history as a few inclusive id ranges (``lineage``). A run that continues
from snapshot R writes checkpoints whose lineage is R's plus ``[first id of the run, own id]``. Ids only grow
(above every id in sight), so the list gains a range only when a history skips ids: a rewind, a damaged
checkpoint, a failed checkpoint at the end of a run. ``_metadata`` written before lineage was recorded counts
as ``[1, own id]``.

Every ``_metadata`` also names the staged output its completion publishes (``staged_output``): batches that
one run staged, published tagged with one snapshot id. A restore publishes exactly that and aborts every
other staged batch, a zombie run's late writes included.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from spark_checkpoint_runtime.layout.names import validate_key

# A history gains a range per skip; a job restored ten thousand times from older checkpoints is not normal.
MAX_RANGES = 10_000
# A run writes at most this many ranges: past it, gaps that no output and no snapshot uses are closed
# (``Lineage.compacted``), so a job that rewinds often does not grow every _metadata toward MAX_RANGES.
MAX_WRITTEN_RANGES = 1_000
MAX_STAGED_BATCHES = 1_000_000
_MAX_ID = 2**62  # ids are counters; anything near this is damage, not history


def _checked_id(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= _MAX_ID:
        raise ValueError(f"{what} {value!r} is not a checkpoint id")
    return value


@dataclass(frozen=True)
class Lineage:
    """The checkpoint ids of one history, as sorted, disjoint, non-adjacent inclusive ranges."""

    ranges: tuple[tuple[int, int], ...] = ()

    @classmethod
    def of(cls, ranges: Iterable[Sequence[int]]) -> Lineage:
        """Normalize ``ranges`` (any order, overlapping or adjacent ones merge)."""
        merged: list[list[int]] = []
        for low, high in sorted((int(r[0]), int(r[1])) for r in ranges):
            if low > high:
                continue
            if merged and low <= merged[-1][1] + 1:
                merged[-1][1] = max(merged[-1][1], high)
            else:
                merged.append([low, high])
        return cls(tuple((low, high) for low, high in merged))

    @classmethod
    def parse(cls, value: Any, checkpoint_id: int) -> Lineage:
        """The lineage recorded in a ``_metadata`` of snapshot ``checkpoint_id``; raises ``ValueError`` if damaged.

        ``None`` (written before lineage was recorded) means every id up to the snapshot's own.
        """
        if value is None:
            return cls.of([(1, checkpoint_id)])
        if not isinstance(value, list) or len(value) > MAX_RANGES:
            raise ValueError(f"lineage must be a list of at most {MAX_RANGES} [first, last] ranges")
        ranges = []
        for item in value:
            if not isinstance(item, list) or len(item) != 2:
                raise ValueError(f"lineage range {item!r} is not [first, last]")
            low, high = _checked_id(item[0], "lineage range start"), _checked_id(item[1], "lineage range end")
            if low > high:
                raise ValueError(f"lineage range {item!r} ends before it starts")
            ranges.append((low, high))
        lineage = cls.of(ranges)
        if not lineage.contains(checkpoint_id):
            raise ValueError(f"lineage {lineage.describe()} does not contain the snapshot's own id {checkpoint_id}")
        return lineage

    def contains(self, checkpoint_id: int) -> bool:
        """Is output published with ``checkpoint_id`` part of this history?"""
        index = bisect.bisect_right(self.ranges, (checkpoint_id, _MAX_ID + 1)) - 1
        return index >= 0 and self.ranges[index][0] <= checkpoint_id <= self.ranges[index][1]

    def with_range(self, first: int, last: int) -> Lineage:
        """This history continued by the ids ``first`` to ``last`` (one run's checkpoints)."""
        return Lineage.of([*self.ranges, (first, last)])

    def compacted(self, in_use: Iterable[int], max_ranges: int = MAX_WRITTEN_RANGES) -> Lineage:
        """This history with gaps closed, oldest first, until at most ``max_ranges`` ranges are left.

        A gap is closed only when none of its ids is ``in_use`` (an id of output published or set aside in the
        sink, or of a snapshot still on storage): claiming such an id would adopt output of another history.
        Closing any other gap changes nothing a restore does, since ids only grow and no output or snapshot
        will ever carry one of them.
        """
        if len(self.ranges) <= max_ranges:
            return self
        used = sorted(set(in_use))
        merged = [list(self.ranges[0])]
        excess = len(self.ranges) - max_ranges
        for low, high in self.ranges[1:]:
            gap_low, gap_high = merged[-1][1] + 1, low - 1
            index = bisect.bisect_left(used, gap_low)
            free = index == len(used) or used[index] > gap_high
            if excess > 0 and free:
                merged[-1][1] = high
                excess -= 1
            else:
                merged.append([low, high])
        return Lineage(tuple((low, high) for low, high in merged))

    @property
    def highest(self) -> int:
        """The largest id in the history (0 when empty)."""
        return self.ranges[-1][1] if self.ranges else 0

    def to_json(self) -> list[list[int]]:
        return [[low, high] for low, high in self.ranges]

    def describe(self) -> str:
        """``1-5, 8-12`` (for messages)."""
        return ", ".join(str(low) if low == high else f"{low}-{high}" for low, high in self.ranges) or "(empty)"


@dataclass(frozen=True)
class StagedOutput:
    """Staged sink output that one snapshot's completion publishes.

    ``batches`` were staged by run ``run_id``; they are published tagged with ``checkpoint_id``. A restore
    from the snapshot publishes what is still staged of them (a commit cut short) and aborts the rest.
    """

    checkpoint_id: int
    run_id: str
    batches: tuple[int, ...]

    def to_json(self) -> dict[str, Any]:
        return {"checkpoint_id": self.checkpoint_id, "run_id": self.run_id, "batches": list(self.batches)}

    @classmethod
    def parse(cls, value: Any) -> StagedOutput | None:
        """From ``_metadata``; None when the snapshot publishes nothing. Raises ``ValueError`` if damaged."""
        if value is None:
            return None
        if not isinstance(value, dict) or set(value) != {"checkpoint_id", "run_id", "batches"}:
            raise ValueError("staged_output must be {checkpoint_id, run_id, batches}")
        batches = value["batches"]
        if not isinstance(batches, list) or len(batches) > MAX_STAGED_BATCHES:
            raise ValueError(f"staged_output batches must be a list of at most {MAX_STAGED_BATCHES} batch ids")
        return cls(
            _checked_id(value["checkpoint_id"], "staged_output checkpoint id"),
            validate_key(value["run_id"], "staged_output run id"),
            tuple(sorted({_checked_id(b, "staged batch id") for b in batches})),
        )
