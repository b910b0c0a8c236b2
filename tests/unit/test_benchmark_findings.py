"""The benchmarks' figures and goal verdicts, judged apart from the README tables (``benchmarks.findings``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import findings


@pytest.fixture
def results(tmp_path: Path, monkeypatch) -> Path:
    """A copy of the benchmarks' JSON files for a test to change."""
    for path in [*findings.RESULTS.glob("*.json"), *findings.RESULTS.glob(f"{findings.EARLIER}/*.json")]:
        copy = tmp_path / path.relative_to(findings.RESULTS)
        copy.parent.mkdir(exist_ok=True)
        copy.write_text(path.read_text())
    monkeypatch.setattr(findings, "RESULTS", tmp_path)
    return tmp_path


def _edit(results: Path, name: str, change) -> None:
    data = json.loads((results / name).read_text())
    change(data)
    (results / name).write_text(json.dumps(data))


def _verdicts() -> dict[str, bool | None]:
    return {goal.name: goal.met for goal in findings.judge_goals()}


def test_every_goal_is_judged(results: Path):
    verdicts = _verdicts()
    assert list(verdicts) == [
        "overhead",
        "bytes",
        "batch_path",
        "restore",
        "restore_s3",
        "restore_at_scale",
        "at_scale",
        "idle",
        "sensor_poke",
        "checkpoint_by_age",
        "checkpoints_at_scale",
        "keeps_up",
        "no_growth",
        "storage_bound",
        "retention",
    ]
    assert all(isinstance(met, bool) for met in verdicts.values())


def _restarts(ratio: float):
    """Every restart of every size takes ``ratio`` times plain Spark's."""

    def change(data: dict) -> None:
        for size in data["sizes"]:
            for sample in size["samples"]:
                sample["restore_ours_seconds"] = sample["restore_plain_seconds"] * ratio

    return change


@pytest.mark.parametrize(
    ("names", "goal", "bound"),
    [
        (["state_size.json", "state_size_rocksdb.json"], "restore", findings.RESTORE_GOAL_RATIO),
        (["state_size_s3.json"], "restore_s3", findings.RESTORE_S3_GOAL_RATIO),
        (["state_size_p200_s3.json", "state_size_p200.json"], "restore_at_scale", 1.2),  # local disk: 1.2×
    ],
)
def test_a_restore_goal_holds_only_while_every_restart_interval_is_under_it(results: Path, names, goal, bound):
    for name in names:
        _edit(results, name, _restarts(1.0))
    assert _verdicts()[goal] is True
    _edit(results, names[-1], _restarts(bound * 1.01))  # one store's, or one root's, restarts all miss
    assert _verdicts()[goal] is False


@pytest.mark.parametrize(
    ("name", "goal", "miss"),
    [
        ("results.json", "batch_path", lambda d: next(iter(d["continuous"].values())).update(ours_batch_ms_p95=1e6)),
        ("state_size.json", "bytes", lambda d: d["sizes"][0].update(written_to_native_life_ratio=1.6)),
        ("retention_scale.json", "retention", lambda d: d["runs"][-1].update(total_seconds=d["goal_seconds"])),
    ],
)
def test_one_case_that_misses_a_goal_is_enough(results: Path, name: str, goal: str, miss):
    _edit(results, name, miss)
    assert _verdicts()[goal] is False


def test_the_bytes_goal_takes_the_worse_window_and_falls_back_to_the_worst_restart():
    both = {"written_to_native_life_ratio": 1.2, "written_to_native_sequence_ratio": 1.4}
    assert findings.bytes_ratio({**both, "written_to_native_ratio_max": 9}) == 1.4
    assert findings.bytes_ratio({"written_to_native_ratio_max": 1.7}) == 1.7


def test_the_running_cost_adds_the_kill_watch_and_a_checkpoint_every_ten_seconds():
    job = {
        "idle": {
            "seconds": 3600,
            "requests": {"GET": 100, "LIST": 10, "total": 110},
            "job_task_kill_watch_per_day": 1440,
        },
        "checkpoint_by_age": {
            "young": {"per_checkpoint_by_kind": {"PUT": 1}},
            "old": {"per_checkpoint_by_kind": {"PUT": 2}},
        },
    }
    cost = findings.running_cost(job)
    assert cost.idle_per_day == {"GET": 2400, "LIST": 240, "total": 2640}
    daily = 2400 * 0.0004 / 1000 + 240 * 0.005 / 1000 + 1440 * 0.0004 / 1000
    assert cost.dollars_per_day == pytest.approx(daily)
    assert cost.dollars_per_checkpoint == pytest.approx(2 * 0.005 / 1000), "the older job's checkpoint"
    assert cost.dollars_per_month_checkpointing == pytest.approx(daily * 30 + 2 * 0.005 / 1000 * 8640 * 30)
    del job["checkpoint_by_age"]
    assert findings.running_cost(job).dollars_per_month_checkpointing is None


def _scale_run(partitions: int):
    def pick(data: dict) -> dict:
        return next(r for r in data["runs"] if r["partitions"] == partitions and r["file_merging"] != "off")

    return pick


def test_a_checkpoint_at_200_partitions_is_judged_on_its_requests_and_both_percentiles(results: Path):
    def meets(data: dict) -> None:
        for run in data["runs"]:
            if run["partitions"] == 200:
                run["requests_per_checkpoint_by_kind"] = {"PUT": 3.0, "LIST": 8.0, "DELETE_BATCH": 5.0}
                run["checkpoint_seconds"].update(p50=0.5, p95=2.9)
                run.pop("failed", None)

    for name in findings.SCALE_RESULTS:
        _edit(results, name, meets)
    assert _verdicts()["checkpoints_at_scale"] is True, "deletes are shown apart, not counted"
    # Every operator and store measured at 200 partitions counts, not the sweep's aggregation alone.
    _edit(results, "scale_queries.json", lambda d: d["runs"][-1]["checkpoint_seconds"].update(p50=1.0))
    assert _verdicts()["checkpoints_at_scale"] is False
    _edit(results, "scale_queries.json", meets)
    _edit(results, "scale.json", lambda d: _scale_run(200)(d)["checkpoint_seconds"].update(p95=3.0))
    assert _verdicts()["checkpoints_at_scale"] is False
    _edit(results, "scale.json", lambda d: _scale_run(200)(d)["checkpoint_seconds"].update(p95=1.0))
    _edit(results, "scale.json", lambda d: _scale_run(200)(d)["requests_per_checkpoint_by_kind"].update(PUT=12.1))
    assert _verdicts()["checkpoints_at_scale"] is False


def test_a_job_keeps_up_only_with_several_checkpoints_each_within_the_interval(results: Path):
    def meets(data: dict) -> None:
        run = _scale_run(1000)(data)
        run.pop("failed", None)
        run.update(checkpoints=5, interval_seconds=10, checkpoint_seconds={"p50": 1.0, "p95": 2.0, "max": 9.9})

    _edit(results, "scale.json", meets)
    assert _verdicts()["keeps_up"] is True
    _edit(results, "scale.json", lambda d: _scale_run(1000)(d)["checkpoint_seconds"].update(max=10.5))
    assert _verdicts()["keeps_up"] is False
    _edit(results, "scale.json", lambda d: _scale_run(1000)(d).update(checkpoints=1))
    _edit(results, "scale.json", lambda d: _scale_run(1000)(d)["checkpoint_seconds"].update(max=1.0))
    assert _verdicts()["keeps_up"] is False, "one checkpoint says nothing about keeping up"


def _long_run(results: Path) -> None:
    """A ``benchmarks.long_run`` result of two windows, for the goals judged from it."""

    def window(first_id: int) -> dict:
        return {
            "first_id": first_id,
            "checkpoints": 20,
            "requests_per_checkpoint": 20.0,
            "checkpoint_seconds": {"p50": 0.2, "p95": 0.3, "max": 0.4, "all": [0.2] * 20},
            "stored_bytes": 15_000_000,
            "live_bytes": 10_000_000,
            "segments_referenced": 4,
        }

    data = {"partitions": 200, "checkpoints": 1000, "windows": [window(20), window(981)], "argv": []}
    (results / "long_run.json").write_text(json.dumps(data))


def test_the_long_run_goals_are_judged_where_a_long_run_was_measured(results: Path):
    (results / "long_run.json").unlink(missing_ok=True)
    assert not {"no_growth", "storage_bound"} & set(_verdicts()), "nothing measured: nothing judged"
    _long_run(results)
    goals = [goal.name for goal in findings.judge_goals()]
    assert goals[goals.index("keeps_up") + 1 : goals.index("retention")] == ["no_growth", "storage_bound"]


def test_growth_over_a_jobs_life_compares_its_last_window_with_its_first(results: Path):
    _long_run(results)

    def windows(requests: float, p50: float):
        def change(data: dict) -> None:
            data["windows"][0].update(requests_per_checkpoint=20.0)
            data["windows"][0]["checkpoint_seconds"]["p50"] = 0.2
            data["windows"][-1].update(requests_per_checkpoint=requests)
            data["windows"][-1]["checkpoint_seconds"]["p50"] = p50

        return change

    _edit(results, "long_run.json", windows(22.0, 0.25))
    assert _verdicts()["no_growth"] is True
    _edit(results, "long_run.json", windows(23.5, 0.25))  # more than 15 % more requests
    assert _verdicts()["no_growth"] is False
    _edit(results, "long_run.json", windows(20.0, 0.31))  # a p50 more than half again as long
    assert _verdicts()["no_growth"] is False
    _edit(results, "long_run.json", windows(20.0, 0.2))
    _edit(results, "long_run.json", lambda data: data["windows"][-1].update(first_id=581))
    assert _verdicts()["no_growth"] is False, "600 checkpoints without growth are not the 1,000 the goal asks"


def test_storage_is_bounded_by_live_bytes_and_each_referenced_segments_dead_floor(results: Path):
    from spark_checkpoint_runtime.file_merging import MIN_COMPACTED_DEAD_BYTES

    _long_run(results)

    def stored(extra: int):
        def change(data: dict) -> None:
            for window in data["windows"]:
                window.update(live_bytes=10_000_000, segments_referenced=4)
                window["stored_bytes"] = 20_000_000 + 4 * MIN_COMPACTED_DEAD_BYTES + extra

        return change

    _edit(results, "long_run.json", stored(0))
    assert _verdicts()["storage_bound"] is True
    _edit(results, "long_run.json", stored(1))
    assert _verdicts()["storage_bound"] is False


# Commits of this repository the pooling tests run against: no commit to runtime/ lies between the first two;
# 9d96402 (a runtime change that does not say why the figures hold) lies between the last two; 7308351 changed
# runtime/ with a Figures-unaffected trailer, and 083022b is its parent.
SAME_RUNTIME, LATER_SAME_RUNTIME, OLDER_RUNTIME = "7142379", "47e2bc6", "2fca235"
BEFORE_UNAFFECTED, UNAFFECTED = "083022b", "7308351"


def _pairs(ratio: float):
    """Every pair of the 200-partition local-disk case at ``ratio``, ours over plain batches per minute."""

    def change(data: dict) -> None:
        case = data["continuous"]["stateful @ 10s"]
        for run in case["runs"]:
            run["ours"]["batches_per_minute"] = run["plain"]["batches_per_minute"] * ratio
        case["batches_per_minute_ratio"] = findings.pooled_case([case])["batches_per_minute_ratio"]

    return change


def _local_case() -> findings.AtScaleCase:
    return next(c for c in findings.at_scale_cases() if c.name == "throughput_200_local.json")


@pytest.fixture
def local_run(results: Path) -> tuple[dict, int]:
    """The local-disk throughput run, every pair at 1.0, at a clean commit; nothing kept beside it."""
    for path in (results / findings.EARLIER).glob("*.json"):
        path.unlink()
    name = "throughput_200_local.json"
    _edit(results, name, _pairs(1.0))
    _edit(results, name, lambda data: data["provenance"].update(commit=LATER_SAME_RUNTIME, dirty=False))
    current = json.loads((results / name).read_text())
    return current, len(current["continuous"]["stateful @ 10s"]["runs"])


def _keep(results: Path, current: dict, commit: str, change=lambda data: None, ratio: float = 0.9) -> Path:
    """Keep a run of ``commit`` beside the current one, its pairs at ``ratio``."""
    earlier = json.loads(json.dumps(current))
    earlier["provenance"].update(commit=commit, measured_at="2026-11-01T00:00:00+00:00")
    _pairs(ratio)(earlier)
    change(earlier)
    path = results / findings.EARLIER / f"throughput_200_local@{commit}.json"
    path.write_text(json.dumps(earlier))
    return path


def test_a_throughput_goal_pools_every_kept_run_of_one_runtime_and_setup(results: Path, local_run):
    current, pairs = local_run
    name = "throughput_200_local.json"
    assert _local_case().estimate.low == 1.0 and _local_case().estimate.pairs == pairs

    # A run of the same runtime and setup joins the sample, and its misses count against the goal.
    kept = _keep(results, current, SAME_RUNTIME)
    case = _local_case()
    assert case.estimate.pairs == 2 * pairs and [path for path, _ in case.runs] == [name, f"earlier/{kept.name}"]
    assert case.estimate.median == 0.95 and case.estimate.low == 0.9 and case.estimate.high == 1.0
    assert _verdicts()["at_scale"] is False
    # A runtime commit between them that says why the figures hold does not split them.
    current["provenance"]["commit"] = UNAFFECTED
    (results / name).write_text(json.dumps(current))
    kept.unlink()
    kept = _keep(results, current, BEFORE_UNAFFECTED)
    assert _local_case().estimate.pairs == 2 * pairs
    current["provenance"]["commit"] = LATER_SAME_RUNTIME
    (results / name).write_text(json.dumps(current))
    # Not pooled: another runtime, a later commit, an uncommitted tree or one that did not say, another setup,
    # another Spark, or a copy of the current run itself.
    for commit, change in (
        (OLDER_RUNTIME, lambda data: None),
        ("e73f181", lambda data: None),
        (SAME_RUNTIME, lambda data: data["provenance"].update(dirty=True)),
        (SAME_RUNTIME, lambda data: data["provenance"].pop("dirty")),
        (SAME_RUNTIME, lambda data: data.update(latency_ms=50.0)),
        (SAME_RUNTIME, lambda data: data.update(s3_server="own process")),
        (SAME_RUNTIME, lambda data: data["provenance"]["versions"].update(pyspark="3.5.7")),
        (LATER_SAME_RUNTIME, lambda data: data["provenance"].update(measured_at=current["provenance"]["measured_at"])),
    ):
        kept.unlink()
        kept = _keep(results, current, commit, change)
        assert _local_case().estimate.pairs == pairs, (commit, kept.read_text()[-400:])


def test_a_pooled_interval_resamples_the_runs_as_well_as_their_pairs():
    from benchmarks.estimate import paired_ratios, pooled_paired_ratios

    one = [0.97, 1.0, 1.02, 0.99, 1.01, 0.98, 1.03, 0.96]
    assert pooled_paired_ratios([one]) == paired_ratios(one)
    apart = [[0.99 + 0.005 * i for i in range(10)], [0.93 + 0.005 * i for i in range(10)]]
    pooled, flat = pooled_paired_ratios(apart), paired_ratios(apart[0] + apart[1])
    assert pooled.median == flat.median and pooled.pairs == flat.pairs == 20
    # Two runs further apart than their pairs spread: the interval reaches into each run's own range.
    assert pooled.low < flat.low and pooled.high > flat.high
    assert pooled.low < 0.95 < pooled.high
