"""The benchmarks' figures and goal verdicts, judged apart from the README tables (``benchmarks.findings``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import findings


@pytest.fixture
def results(tmp_path: Path, monkeypatch) -> Path:
    """A copy of the benchmarks' JSON files for a test to change."""
    for path in findings.RESULTS.glob("*.json"):
        (tmp_path / path.name).write_text(path.read_text())
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
