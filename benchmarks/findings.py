"""What the benchmarks' JSON files say: their figures, what follows from them, and each goal's verdict.

Everything here reads ``benchmarks/*.json`` and computes (rates, ratios, dollars, verdicts); nothing formats.
``benchmarks.report`` renders it as the tables in README.md and docs/.
A goal is met only when every measured case meets it,
and a ratio goal only when the far end of its bootstrap 95 % interval does (``benchmarks.estimate``, the one
estimator for every ratio).
"""

from __future__ import annotations

import json
import statistics
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.estimate import Estimate, paired_ratios, pooled_paired_ratios

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks"

# S3 Standard, us-east-1, published prices per 1,000 requests (deletes are free).
S3_PRICE_PER_1000 = {"LIST": 0.005, "PUT": 0.005, "COPY": 0.005, "GET": 0.0004, "HEAD": 0.0004}
CHECKPOINTS_PER_DAY = 8640  # at the default 10 s interval

OVERHEAD_GOAL_PERCENT = 5.0
BYTES_GOAL_RATIO = 1.5
RESTORE_GOAL_RATIO = 1.1
RESTORE_S3_GOAL_RATIO = 2.0
AT_SCALE_GOAL_RATIO = 0.95  # batches per minute at 200+ partitions, ours/plain
AT_SCALE_RESULTS = ("throughput_200_local.json", "throughput_200_s3.json")
# Restore at 200 partitions against plain Spark's restart from local disk: ours from local disk, ours from S3.
RESTORE_AT_SCALE_GOALS = {"state_size_p200.json": 1.2, "state_size_p200_s3.json": 2.0}
IDLE_GOAL_PER_DAY = 20_000
ANSWER_GOAL_SECONDS = 10.0
BATCH_PATH_GOAL_MS = 50
POKE_GOAL_REQUESTS = 2
AGE_GROWTH_ALLOWED = 1.15  # room for the one listing of the job folder, a page per 1,000 files
# Checkpoints at 200 partitions on S3 with file merging (benchmarks.scale): requests (deletes shown apart)
# and seconds; and the partition count at which the job must keep up with its interval.
SCALE_GOAL_PARTITIONS = 200
SCALE_GOAL_REQUESTS = 20
SCALE_GOAL_P50_SECONDS = 1.0
SCALE_GOAL_P95_SECONDS = 3.0
KEEPS_UP_PARTITIONS = 1000
# Over a job's life (benchmarks.long_run): the last window's requests and checkpoint p50 against the first's,
# and the bytes stored against those the retained checkpoints reference.
LONG_RUN_CHECKPOINTS = 1000  # the age the goal asks for: a shorter run shows growth so far, not the goal
LONG_RUN_GROWTH_ALLOWED = 1.15
LONG_RUN_DURATION_GROWTH_ALLOWED = 1.5  # seconds are noisier than requests on a shared 2-core machine


def load(name: str) -> dict[str, Any]:
    """One benchmark's JSON under ``benchmarks/``."""
    return json.loads((RESULTS / name).read_text())


def _git(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, timeout=30)


# A commit to runtime/ that cannot move the figures (a stop path, an error message) says why in this trailer;
# the footnotes then name it instead of asking for a rerun. The reason stays in the history for review.
UNAFFECTED_TRAILER = "Figures-unaffected"


def runtime_changes_since(commit: str, until: str = "HEAD") -> list[tuple[str, bool]]:
    """The commits to ``runtime/`` in ``until``'s history but not in ``commit``'s, newest first, each with
    whether it carries the ``Figures-unaffected:`` trailer."""
    found = _git(
        "log",
        f"--format=%h%x09%(trailers:key={UNAFFECTED_TRAILER},valueonly,separator=%x20)",
        f"{commit}..{until}",
        "--",
        "runtime/",
    )
    changes = []
    for line in found.stdout.splitlines():
        short, _, reason = line.partition("\t")
        changes.append((short, bool(reason.strip())))
    return changes


def runtime_staleness(commit: str | None) -> tuple[str | None, list[str]]:
    """What changed in ``runtime/`` since ``commit`` (one ``git log``): the newest commit that does not say why
    the figures still hold (they may no longer hold: rerun), or None; and the commits that say so in their
    ``Figures-unaffected:`` trailer."""
    if not commit:
        return None, []
    changes = runtime_changes_since(commit)
    last = next((short for short, unaffected in changes if not unaffected), None)
    return last, [short for short, unaffected in changes if unaffected]


# --- derived figures ----------------------------------------------------------------------------------


def dollars(counts: dict[str, float]) -> float:
    """What requests counted by kind cost at S3 Standard's published prices."""
    return sum(S3_PRICE_PER_1000.get(kind, 0.0) * count / 1000 for kind, count in counts.items() if kind != "total")


def rounded(counts: dict[str, float]) -> dict[str, int]:
    return {kind: round(value) for kind, value in counts.items()}


@dataclass(frozen=True)
class RunningCost:
    """What a running job costs on S3 (from ``request_cost.json``'s ``running_job``)."""

    idle_per_day: dict[str, float]  # the idle job's requests by kind, scaled to a day
    dollars_per_day: float  # idle, with its Airflow task's kill watch
    dollars_per_checkpoint: float | None  # the older job's checkpoint, where measured by age
    dollars_per_month_checkpointing: float | None  # idle cost plus a checkpoint every 10 s, for 30 days


def running_cost(job: dict[str, Any]) -> RunningCost:
    idle = job["idle"]
    per_day = {k: v * 86400 / idle["seconds"] for k, v in idle["requests"].items()}
    money = dollars(per_day) + dollars({"GET": idle["job_task_kill_watch_per_day"]})
    aged = list(job.get("checkpoint_by_age", {}).values())
    if not aged:
        return RunningCost(per_day, money, None, None)
    per_checkpoint = dollars(aged[-1]["per_checkpoint_by_kind"])
    return RunningCost(per_day, money, per_checkpoint, money * 30 + per_checkpoint * CHECKPOINTS_PER_DAY * 30)


def restore_ratios(size: dict[str, Any]) -> list[float]:
    """Ours over plain Spark's restart time, restart by restart."""
    return [s["restore_ours_seconds"] / s["restore_plain_seconds"] for s in size["samples"]]


def restore_estimate(size: dict[str, Any]) -> Estimate:
    """Ours over plain Spark's restart time: the median restart's ratio and its 95 % interval."""
    return paired_ratios(restore_ratios(size))


def throughput_estimate(case: dict[str, Any]) -> Estimate:
    """Ours over plain Spark's steady-state rows per second in a continuous case, from its pairs (a pooled
    case carries its estimate, ``pooled_case``)."""
    if "pair_ratios" not in case:
        return Estimate.from_dict(case["rows_per_second_ratio"])
    return paired_ratios(case["pair_ratios"])


def batches_estimate(case: dict[str, Any]) -> Estimate:
    """Ours over plain Spark's batches per minute in a continuous case, from its pairs."""
    return Estimate.from_dict(case["batches_per_minute_ratio"])


def bytes_ratio(size: dict[str, Any]) -> float:
    """Bytes written over what Spark itself wrote, as the bytes goal judges them.

    Over the job's whole life (the build and every restart) and over the restarts alone, the worse of the two:
    either window ends where one side has written a snapshot of a partition (a quarter of the state) that the
    other writes or stores a restart later. Older results have only the restarts, or one restart.
    """
    return (
        max(size.get("written_to_native_life_ratio", 0), size.get("written_to_native_sequence_ratio", 0))
        or size["written_to_native_ratio_max"]
    )


def retention_runs_by_files(data: dict[str, Any]) -> list[tuple[int, list[dict[str, Any]]]]:
    """``retention_scale.json``'s runs grouped by files per checkpoint, fewest first."""
    by_files: dict[int, list[dict[str, Any]]] = {}
    for run in data["runs"]:
        by_files.setdefault(run["files_per_checkpoint"], []).append(run)
    return sorted(by_files.items())


def retention_met(runs: list[dict[str, Any]], goal_seconds: float) -> bool:
    """Every run's retention under the goal."""
    return all(r["total_seconds"] < goal_seconds for r in runs)


DELETE_KINDS = ("DELETE", "DELETE_BATCH")  # retention's requests, amortised and shown apart


def deletes(by_kind: dict[str, float]) -> float:
    return round(sum(v for kind, v in by_kind.items() if kind in DELETE_KINDS), 1)


def without_deletes(by_kind: dict[str, float]) -> float:
    return round(sum(v for kind, v in by_kind.items() if kind not in (*DELETE_KINDS, "total")), 1)


# A rerun does not replace a run: ``python -m benchmarks.keep`` moves the JSON it supersedes here, named
# ``<name>@<commit>.json``, so that a goal judged from paired runs sees every run, not the last one.
EARLIER = "earlier"
# What must match for two throughput runs' pairs to be one sample (the pair count may differ).
THROUGHPUT_SETUP = ("scale", "partitions", "root", "latency_ms", "continuous_seconds", "warmup_seconds")
THROUGHPUT_SETUP += ("checkpoint_niceness", "master")


def earlier_runs(name: str) -> list[tuple[str, dict[str, Any]]]:
    """The runs a rerun of ``name`` superseded, as (path under ``benchmarks/``, JSON), oldest first."""
    stem = Path(name).stem
    found = [
        (f"{EARLIER}/{path.name}", json.loads(path.read_text())) for path in (RESULTS / EARLIER).glob(f"{stem}@*.json")
    ]
    return sorted(found, key=lambda kept: kept[1].get("provenance", {}).get("measured_at", ""))


def same_runtime(kept: dict[str, Any], current: dict[str, Any]) -> bool:
    """Whether a kept run measured the same runtime as the current one: both at a committed, clean tree (a run
    that recorded no ``dirty`` flag counts as unknown), the kept run's commit in the current one's history, on
    the same Spark, and every commit to ``runtime/`` between them saying in its ``Figures-unaffected:`` trailer
    why the figures hold. The benchmark's own code is not compared: its commits may add measurements."""
    first, last = kept.get("provenance") or {}, current.get("provenance") or {}
    if (
        not first.get("commit")
        or not last.get("commit")
        or first.get("dirty") is not False
        or last.get("dirty") is not False
    ):
        return False
    if (first.get("versions") or {}).get("pyspark") != (last.get("versions") or {}).get("pyspark"):
        return False
    ancestry = _git("merge-base", "--is-ancestor", first["commit"], last["commit"])
    if ancestry.returncode not in (0, 1):  # 1: not an ancestor; anything else: git could not tell
        raise RuntimeError(
            f"benchmarks.findings: git cannot compare commits {first['commit']} and {last['commit']} "
            f"({ancestry.stderr.strip()}); the goals need the repository's full history (not a shallow clone)"
        )
    return ancestry.returncode == 0 and all(
        unaffected for _, unaffected in runtime_changes_since(first["commit"], until=last["commit"])
    )


def _same_setup(kept: dict[str, Any], current: dict[str, Any]) -> bool:
    return (
        all(kept.get(key) == current.get(key) for key in THROUGHPUT_SETUP)
        and kept.get("continuous", {}).keys() == current["continuous"].keys()
        and kept.get("s3_server") == current.get("s3_server")  # absent: the server ran in ours' driver process
    )


def _same_run(kept: dict[str, Any], current: dict[str, Any]) -> bool:
    """A copy of the current run kept beside it (``benchmarks.keep.set_aside`` of the current file): the same
    pairs must not count twice."""
    first, last = kept.get("provenance") or {}, current.get("provenance") or {}
    return (first.get("commit"), first.get("measured_at")) == (last.get("commit"), last.get("measured_at"))


def pooled_with(name: str) -> list[tuple[str, dict[str, Any]]]:
    """``name``'s run and every kept run of the same runtime and setup whose pairs can join it, as
    (path under ``benchmarks/``, JSON), the current run first."""
    data = load(name)
    pool = [(name, data)]
    for path, kept in earlier_runs(name):
        if not _same_run(kept, data) and _same_setup(kept, data) and same_runtime(kept, data):
            pool.append((path, kept))
    return pool


def pooled_case(cases: list[dict[str, Any]]) -> dict[str, Any]:
    """Continuous cases of several runs (each with its ``runs``) as one case of all their pairs: the medians
    and ratios ``benchmarks.run`` writes for one run, taken over every pair, the ratios' intervals with the runs
    resampled too (``pooled_paired_ratios``)."""
    runs = [run for case in cases for run in case["runs"]]

    def median(side: str, measure: str, digits: int | None = 1) -> float:
        return round(statistics.median(run[side][measure] for run in runs), digits)

    def ratios(measure: str) -> list[list[float]]:
        return [[run["ours"][measure] / run["plain"][measure] for run in case["runs"]] for case in cases]

    return {
        **{f"{side}_batches_per_minute": median(side, "batches_per_minute") for side in ("plain", "ours")},
        "batches_per_minute_ratio": pooled_paired_ratios(ratios("batches_per_minute")).as_dict(),
        "rows_per_second_ratio": pooled_paired_ratios(ratios("rows_per_second")).as_dict(),
        **{
            f"{side}_{measure}": median(side, measure, None)
            for side in ("plain", "ours")
            for measure in ("batch_ms_median", "batch_ms_p95")
        },
        "runs": runs,
    }


@dataclass(frozen=True)
class AtScaleCase:
    """One 200-partition throughput case as its goal judges it: the pairs of every kept run of its runtime."""

    name: str  # the JSON under ``benchmarks/``
    key: str  # the case in its ``continuous``, e.g. ``stateful @ 10s``
    root: str  # where ours checkpointed
    partitions: int
    runs: list[tuple[str, dict[str, Any]]]  # (path under ``benchmarks/``, that run's JSON), the current run first
    judged: dict[str, Any]  # the one run's case, or all of ``runs`` pooled (``pooled_case``)

    def case(self, data: dict[str, Any]) -> dict[str, Any]:
        """This case as one of ``runs`` recorded it."""
        return data["continuous"][self.key]

    @property
    def estimate(self) -> Estimate:
        """Ours over plain Spark's batches per minute, over every pair judged."""
        return batches_estimate(self.judged)


def at_scale_cases() -> list[AtScaleCase]:
    """The 200-partition throughput cases, each judged on the pairs of every kept run of its runtime and
    setup (a run that did not keep its pairs counts alone)."""
    found = []
    for name in AT_SCALE_RESULTS:
        if not (RESULTS / name).exists():
            continue
        pool = pooled_with(name)
        data = pool[0][1]
        for key, case in data["continuous"].items():
            runs = [(path, kept) for path, kept in pool if "runs" in kept["continuous"][key]]
            if len(runs) > 1 and "runs" in case:
                judged = pooled_case([kept["continuous"][key] for _, kept in runs])
            else:
                runs, judged = [(name, data)], case
            found.append(AtScaleCase(name, key, data["root"], data["partitions"], runs, judged))
    return found


def restore_at_scale_cases() -> list[tuple[dict[str, Any], dict[str, Any], float, Estimate]]:
    """(the run, a state size, the goal's bound, the restore estimate) of the 200-partition restore runs."""
    found = []
    for name, bound in RESTORE_AT_SCALE_GOALS.items():
        if (RESULTS / name).exists():
            data = load(name)
            found += [(data, size, bound, restore_estimate(size)) for size in data["sizes"]]
    return found


SCALE_RESULTS = ("scale.json", "scale_queries.json")  # the partition sweep, then operators and stores at 200


def scale_runs(partitions: int) -> list[dict[str, Any]]:
    """The runs of ``benchmarks.scale`` at ``partitions`` with file merging on (the default on S3), every query
    and store measured, those that failed included (a failure is kept as a finding)."""
    return [
        {**run, "results": name}
        for name in SCALE_RESULTS
        if (RESULTS / name).exists()
        for run in load(name)["runs"]
        if run["partitions"] == partitions and run["file_merging"] != "off"
    ]


def keeps_up(run: dict[str, Any]) -> bool:
    """A job keeps up with its interval when several checkpoints completed while data arrived and none took
    longer than the interval (one that does delays the next: the earlier unmerged runs grew 21 s, 44 s, 82 s)."""
    seconds = run.get("checkpoint_seconds") or {}
    return (
        not run.get("failed")
        and run.get("checkpoints", 0) >= 3
        and seconds.get("max") is not None
        and seconds["max"] <= run.get("interval_seconds", 10)
    )


def storage_bound(window: dict[str, Any]) -> float:
    """The most a job may store for what its retained checkpoints reference: file merging's compaction rewrites
    a segment once it is more than ``MAX_SPACE_AMPLIFICATION`` times its live bytes and its dead bytes reach
    ``MIN_COMPACTED_DEAD_BYTES``, so each referenced segment may carry up to that much dead weight."""
    from spark_checkpoint_runtime.file_merging import MAX_SPACE_AMPLIFICATION, MIN_COMPACTED_DEAD_BYTES

    return MAX_SPACE_AMPLIFICATION * window["live_bytes"] + window["segments_referenced"] * MIN_COMPACTED_DEAD_BYTES


# --- the goals ----------------------------------------------------------------------------------------


def last_id(window: dict[str, Any]) -> int:
    """The id of the last checkpoint in one of ``benchmarks.long_run``'s windows."""
    return window["first_id"] + window["checkpoints"] - 1


def checkpoints_made(long_run: dict[str, Any]) -> int:
    """The id of the last checkpoint a long run measured: how old the job got."""
    return last_id(long_run["windows"][-1])


@dataclass(frozen=True)
class Goal:
    """One goal judged from the JSON files: ``met`` is None for a figure reported without a goal; ``figures``
    are what it was judged on."""

    name: str
    met: bool | None
    figures: dict[str, Any]


def judge_goals() -> list[Goal]:
    """Every goal, in the benchmarks page's order, each met only when every measured case meets it."""
    run = load("results.json")
    # State size cases as (store, size): local disk with HDFS-backed state, then RocksDB.
    stores = [("hdfs", s) for s in load("state_size.json")["sizes"]]
    stores += [("rocksdb", s) for s in load("state_size_rocksdb.json")["sizes"]]
    request_cost = load("request_cost.json")
    cost = request_cost["running_job"]
    retention = load("retention_scale.json")
    cases = run["continuous"]
    goals = []

    over = {name: throughput_estimate(r) for name, r in cases.items()}
    floor = 1 - OVERHEAD_GOAL_PERCENT / 100
    goals.append(Goal("overhead", all(e.at_least(floor) for e in over.values()), {"overhead": over}))
    goals.append(Goal("bytes", all(bytes_ratio(s) <= BYTES_GOAL_RATIO for _, s in stores), {"sizes": stores}))
    added = {name: r["ours_batch_ms_p95"] - r["plain_batch_ms_p95"] for name, r in cases.items()}
    capture = max(s["capture_ms"] for _, s in stores)
    goals.append(
        Goal(
            "batch_path",
            all(v < BATCH_PATH_GOAL_MS for v in added.values()),
            {"added_ms": added, "capture_ms": capture},
        )
    )
    restore = [(store, s, restore_estimate(s)) for store, s in stores]
    goals.append(Goal("restore", all(e.at_most(RESTORE_GOAL_RATIO) for *_, e in restore), {"restore": restore}))
    on_s3 = [(s, restore_estimate(s)) for s in load("state_size_s3.json")["sizes"]]
    goals.append(Goal("restore_s3", all(e.at_most(RESTORE_S3_GOAL_RATIO) for _, e in on_s3), {"restore": on_s3}))
    restores = restore_at_scale_cases()
    goals.append(
        Goal(
            "restore_at_scale",
            all(e.at_most(bound) for _, _, bound, e in restores) if restores else None,
            {"cases": restores},
        )
    )
    at_scale = at_scale_cases()
    goals.append(
        Goal(
            "at_scale",
            all(c.estimate.at_least(AT_SCALE_GOAL_RATIO) for c in at_scale) if at_scale else None,
            {"cases": at_scale},
        )
    )
    idle, answered = cost["idle"]["per_day_with_job_task"], cost["answered_seconds"]
    goals.append(
        Goal(
            "idle",
            idle <= IDLE_GOAL_PER_DAY and all(v <= ANSWER_GOAL_SECONDS for v in answered.values()),
            {"per_day": idle, "answered_seconds": answered},
        )
    )
    poke = request_cost["storage"]["sensor poke, nothing new"]
    goals.append(Goal("sensor_poke", poke["total"] <= POKE_GOAL_REQUESTS, {"requests": poke}))
    aged = list(cost.get("checkpoint_by_age", {}).values())
    if aged:
        # Deletes left out on both sides: the older job subsumes a checkpoint each time, the young one (fewer
        # than its 100 retained) none; that is one constant request, not growth.
        young, old = (without_deletes(a["per_checkpoint_by_kind"]) for a in (aged[0], aged[-1]))
        goals.append(
            Goal(
                "checkpoint_by_age",
                old <= young * AGE_GROWTH_ALLOWED,
                {"young": young, "old": old, "first": aged[0], "last": aged[-1]},
            )
        )
    at_200 = scale_runs(SCALE_GOAL_PARTITIONS)
    if at_200:
        goals.append(
            Goal(
                "checkpoints_at_scale",
                all(
                    not run.get("failed")
                    and without_deletes(run["requests_per_checkpoint_by_kind"]) <= SCALE_GOAL_REQUESTS
                    and run["checkpoint_seconds"]["p50"] < SCALE_GOAL_P50_SECONDS
                    and run["checkpoint_seconds"]["p95"] < SCALE_GOAL_P95_SECONDS
                    for run in at_200
                ),
                {"runs": at_200},
            )
        )
    at_1000 = scale_runs(KEEPS_UP_PARTITIONS)
    if at_1000:
        goals.append(Goal("keeps_up", all(keeps_up(run) for run in at_1000), {"runs": at_1000}))
    if (RESULTS / "long_run.json").exists():
        long_run = load("long_run.json")
        windows = long_run["windows"]
        if len(windows) >= 2:
            first, last = windows[0], windows[-1]
            goals.append(
                Goal(
                    "no_growth",
                    checkpoints_made(long_run) >= LONG_RUN_CHECKPOINTS
                    and last["requests_per_checkpoint"] <= first["requests_per_checkpoint"] * LONG_RUN_GROWTH_ALLOWED
                    and last["checkpoint_seconds"]["p50"]
                    <= first["checkpoint_seconds"]["p50"] * LONG_RUN_DURATION_GROWTH_ALLOWED,
                    {"run": long_run, "first": first, "last": last},
                )
            )
        if windows:
            goals.append(
                Goal(
                    "storage_bound",
                    all(w["stored_bytes"] <= storage_bound(w) for w in windows),
                    {"run": long_run, "worst": max(windows, key=lambda w: w["stored_bytes"] / storage_bound(w))},
                )
            )
    goal_seconds = retention["goal_seconds"]
    goals.append(
        Goal(
            "retention",
            retention_met(retention["runs"], goal_seconds),
            {"goal_seconds": goal_seconds, "slowest": max(r["total_seconds"] for r in retention["runs"])},
        )
    )
    return goals
