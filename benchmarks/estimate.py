"""The one estimator every benchmark goal is judged with: the median of paired ratios, with a bootstrap 95 %
confidence interval.

A benchmark runs A (ours) and B (plain Spark) as pairs, alternating which goes first, in one process; each
pair gives one ratio A/B. The point estimate is the median of those ratios; the interval comes from 10,000
resamples of the pairs with replacement (the percentile method), from a fixed seed so that the same JSON
always gives the same interval. A goal counts as met only when the interval's far end meets it: an upper
bound on a ratio must hold for ``high``, a lower bound for ``low``.

Where several kept runs of one runtime are pooled (``pooled_paired_ratios``), each resample first draws the
runs with replacement and then each drawn run's pairs: two runs of one benchmark can differ by more than their
pairs spread within each (the machine's speed changes between them), and an interval that resampled the pairs
alone would be narrower than what a further run could show. With one run it is the estimator above.
"""

from __future__ import annotations

import random
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

NAME = (
    "median of paired ratios, bootstrap 95 % CI (percentile, 10,000 resamples; where runs are pooled, "
    "the runs and then each run's pairs are resampled)"
)
RESAMPLES = 10_000
SEED = 20261126


@dataclass(frozen=True)
class Estimate:
    """A ratio's median over ``pairs`` pairs and its 95 % interval [``low``, ``high``]."""

    median: float
    low: float
    high: float
    pairs: int

    def at_most(self, bound: float) -> bool:
        """The whole interval is at or under ``bound`` (an upper goal, e.g. restore ≤ 1.2× native)."""
        return self.high <= bound

    def at_least(self, bound: float) -> bool:
        """The whole interval is at or over ``bound`` (a lower goal, e.g. throughput ≥ 0.95× plain)."""
        return self.low >= bound

    def text(self, digits: int = 2) -> str:
        """``1.03 (0.98–1.07, 9 pairs)``: what the docs' tables print."""
        return f"{self.median:.{digits}f} ({self.low:.{digits}f}–{self.high:.{digits}f}, {self.pairs} pairs)"

    @classmethod
    def from_dict(cls, found: dict[str, Any]) -> Estimate:
        """The estimate ``as_dict`` wrote into a benchmark's JSON."""
        return cls(found["median"], found["low"], found["high"], found["pairs"])

    def as_dict(self) -> dict[str, float | int | str]:
        return {"median": self.median, "low": self.low, "high": self.high, "pairs": self.pairs, "estimator": NAME}


def paired_ratios(ratios: Sequence[float]) -> Estimate:
    """The median of ``ratios`` (one per A/B pair) and its bootstrap 95 % interval.

    One pair gives an interval of that one value: honest about the point, silent about the spread, and
    the report prints the pair count beside it.
    """
    values = [float(r) for r in ratios]
    if not values:
        raise ValueError("no pairs to estimate from: the benchmark measured nothing")
    rng = random.Random(SEED)
    n = len(values)
    medians = [statistics.median(rng.choices(values, k=n)) for _ in range(RESAMPLES)]
    return _estimate(values, medians)


def _estimate(values: list[float], medians: list[float]) -> Estimate:
    """The median of ``values`` and the 2.5th and 97.5th percentiles of the resampled ``medians``."""
    medians = sorted(medians)
    low = medians[int(0.025 * (RESAMPLES - 1))]
    high = medians[int(0.975 * (RESAMPLES - 1))]
    return Estimate(round(statistics.median(values), 4), round(low, 4), round(high, 4), len(values))


def pooled_paired_ratios(runs: Sequence[Sequence[float]]) -> Estimate:
    """The median of every run's pair ratios pooled, and a two-stage bootstrap 95 % interval: each resample
    draws as many runs as there are, with replacement, then each drawn run's pairs, with replacement. One run
    gives exactly ``paired_ratios``."""
    kept = [[float(r) for r in ratios] for ratios in runs if ratios]
    if len(kept) <= 1:
        return paired_ratios(kept[0] if kept else [])
    rng = random.Random(SEED)
    medians = []
    for _ in range(RESAMPLES):
        drawn = [value for ratios in rng.choices(kept, k=len(kept)) for value in rng.choices(ratios, k=len(ratios))]
        medians.append(statistics.median(drawn))
    return _estimate([value for ratios in kept for value in ratios], medians)
