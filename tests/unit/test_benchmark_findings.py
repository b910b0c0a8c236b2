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


def test_every_goal_is_judged_and_the_s3_restore_only_reported(results: Path):
    verdicts = _verdicts()
    assert list(verdicts) == [
        "overhead",
        "bytes",
        "batch_path",
        "restore",
        "restore_s3",
        "idle",
        "sensor_poke",
        "checkpoint_by_age",
        "retention",
    ]
    assert verdicts["restore_s3"] is None
    assert all(isinstance(met, bool) for name, met in verdicts.items() if name != "restore_s3")


@pytest.mark.parametrize(
    ("name", "goal", "miss"),
    [
        ("results.json", "batch_path", lambda d: next(iter(d["continuous"].values())).update(ours_batch_ms_p95=1e6)),
        ("state_size_rocksdb.json", "restore", lambda d: d["sizes"][-1].update(restore_ours_seconds=1e6)),
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
