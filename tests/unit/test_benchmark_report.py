"""The README's benchmark tables are generated from the benchmarks' JSON (python -m benchmarks.report)."""

from __future__ import annotations

import json
import re

import pytest

from benchmarks import findings, report


@pytest.fixture
def results(tmp_path, monkeypatch):
    """A copy of the committed JSON files that the report reads instead, for a test to alter."""
    for path in [*findings.RESULTS.glob("*.json"), *findings.RESULTS.glob(f"{findings.EARLIER}/*.json")]:
        copy = tmp_path / path.relative_to(findings.RESULTS)
        copy.parent.mkdir(exist_ok=True)
        copy.write_text(path.read_text())
    monkeypatch.setattr(findings, "RESULTS", tmp_path)
    return tmp_path


def test_the_readme_tables_are_what_the_json_files_say():
    assert report.main(["--check"]) == 0, "run: .venv/bin/python -m benchmarks.report"


def test_every_generated_block_is_on_a_page_and_every_json_names_its_machine():
    pages = "\n".join(path.read_text() for path in report.documents())
    assert sorted(report.blocks(pages)) == sorted(report.GENERATED)
    for name in set(re.findall(r"`benchmarks/(\w+\.json)`", pages)):
        provenance = json.loads((findings.RESULTS / name).read_text()).get("provenance")
        assert provenance and provenance["commit"] and provenance["machine"]["cpus"], name


def test_a_changed_figure_makes_the_check_fail(tmp_path):
    stale = tmp_path / "benchmarks.md"
    current = (report.DOCS / "benchmarks.md").read_text()
    block = re.search(r"<!-- begin generated: goals -->\n(.*?)\n<!-- end generated: goals -->", current, re.S)
    assert block is not None
    stale.write_text(current.replace(block[1], block[1].replace("met", "mett", 1)))
    assert report.main(["--check", "--readme", str(stale)]) == 1
    assert report.main(["--readme", str(stale)]) == 0 and stale.read_text() == current


def test_a_goal_is_met_only_when_every_case_meets_it(results):
    run = json.loads((results / "results.json").read_text())
    for case in run["continuous"].values():
        case["pair_ratios"] = [0.97, 0.99, 1.0, 1.01, 0.98]
    (results / "results.json").write_text(json.dumps(run))
    assert "| throughput overhead" in report.goals()[2] and "**met**" in report.goals()[2]
    # One case of four misses it: its median meets the goal, the far end of its interval does not.
    next(iter(run["continuous"].values()))["pair_ratios"] = [0.90, 0.96, 0.97, 0.98, 1.0]
    (results / "results.json").write_text(json.dumps(run))
    assert "**not met**" in report.goals()[2]


def test_the_estimator_is_the_median_pair_with_a_reproducible_interval_around_it():
    from benchmarks.estimate import paired_ratios

    ratios = [1.02, 0.97, 1.05, 0.99, 1.01, 0.96, 1.03, 1.00, 0.98]
    estimate = paired_ratios(ratios)
    assert estimate.median == 1.0 and estimate.pairs == 9
    assert min(ratios) <= estimate.low < estimate.median < estimate.high <= max(ratios)
    assert paired_ratios(ratios) == estimate  # a fixed seed: the same JSON, the same table
    assert estimate.at_least(0.95) and not estimate.at_least(0.99)  # judged by the interval's far end
    assert estimate.at_most(1.1) and not estimate.at_most(1.01)
    wide = paired_ratios([0.8, 1.0, 1.2])
    assert wide.low < estimate.low and wide.high > estimate.high  # fewer, more spread pairs: a wider interval
    with pytest.raises(ValueError, match="measured nothing"):
        paired_ratios([])


def test_each_pair_at_scale_is_shown_with_the_side_that_ran_first(results):
    local, on_s3 = (json.loads((results / name).read_text()) for name in findings.AT_SCALE_RESULTS)
    case = next(iter(local["continuous"].values()))
    case["runs"] = [
        {"first": "plain", "plain": {"batches_per_minute": 8.0}, "ours": {"batches_per_minute": 7.92}},
        {"first": "ours", "plain": {"batches_per_minute": 7.5}, "ours": {"batches_per_minute": 7.8}},
    ]
    for case in on_s3["continuous"].values():
        case.pop("runs", None)  # a run from before every run was kept
    for name, data in zip(findings.AT_SCALE_RESULTS, (local, on_s3), strict=True):
        (results / name).write_text(json.dumps(data))
    rows = [line for line in report.throughput_at_scale() if line.startswith("| stateful")]
    by_root = [row for row in rows if row.count("|") == 7]  # the second table: where the time went, and the pairs
    assert by_root[0].endswith("| 0.99 p, 1.04 o |") and by_root[1].endswith("| not kept |")


def test_the_machine_each_side_ran_on_is_shown_where_the_runs_recorded_it(results):
    for kept in (results / findings.EARLIER).glob("*.json"):  # one run per row here: no pooled rows
        kept.unlink()
    local, on_s3 = (json.loads((results / name).read_text()) for name in findings.AT_SCALE_RESULTS)
    machine = {"batches_per_minute": 7.0, "machine_cpu_s_per_minute": 108.0, "steal_cpu_s_per_minute": 0.0}
    for case in on_s3["continuous"].values():
        case["runs"] = [
            {
                "first": first,
                "plain": {**machine, "machine_cpu_s_per_minute": busy},
                "ours": {**machine, "steal_cpu_s_per_minute": steal, "s3_server_cpu_s_per_minute": 0.6},
            }
            for first, busy, steal in (("plain", 110.0, 0.0), ("ours", 106.0, 2.8), ("plain", 108.0, 0.2))
        ]
    for case in local["continuous"].values():
        for run in case.get("runs", []):  # a run from before the machine was recorded
            for side in ("plain", "ours"):
                run[side].pop("machine_cpu_s_per_minute", None)
    for name, data in zip(findings.AT_SCALE_RESULTS, (local, on_s3), strict=True):
        (results / name).write_text(json.dumps(data))
    rows = [line for line in report.throughput_at_scale() if line.startswith("| stateful")]
    by_root = [row.split(" | ") for row in rows if row.count("|") == 7]
    assert by_root[0][4] == "not recorded"
    assert by_root[1][4] == "108.0, 0.0 / 108.0, 0.2 (0.6)", "medians of the runs, per side; the server's in ours'"


def test_a_run_at_another_checkpoint_niceness_names_it_in_its_command(results):
    local_name = findings.AT_SCALE_RESULTS[0]
    local = json.loads((results / local_name).read_text())
    local["checkpoint_niceness"] = 0  # what `benchmarks.run --checkpoint-niceness 0` records
    (results / local_name).write_text(json.dumps(local))
    commands = [line for line in report.throughput_at_scale() if line.startswith("<sub>")]
    assert "--checkpoint-niceness 0 --root local" in commands[0]
    assert "--checkpoint-niceness" not in commands[1], "recorded only where the run set it"


def test_each_kept_run_of_one_runtime_has_its_row_and_the_goal_figure_is_their_pooled_pairs(results):
    for kept in (results / findings.EARLIER).glob("*.json"):
        kept.unlink()
    name = findings.AT_SCALE_RESULTS[1]
    current = json.loads((results / name).read_text())
    current["provenance"].update(commit="47e2bc6", dirty=False)
    (results / name).write_text(json.dumps(current))
    earlier = {**current, "provenance": {**current["provenance"], "commit": "7142379"}}  # no runtime change between
    (results / findings.EARLIER / "throughput_200_s3@7142379.json").write_text(json.dumps(earlier))

    lines = report.throughput_at_scale()
    rows = [line for line in lines if line.startswith("| stateful") and "ours to s3" in line and line.count("|") == 8]
    assert [row.split(" | ")[0].rsplit(", ", 1)[1] for row in rows] == [
        "run at 47e2bc6",
        "run at 7142379",
        "the 2 runs' pairs pooled",
    ]
    assert ["**" in row.split(" | ")[3] for row in rows] == [False, False, True], "the goal's figure is in bold"
    pairs = len(current["continuous"]["stateful @ 10s"]["runs"])
    assert f"{2 * pairs} pairs)**" in rows[2]
    assert any("→ `benchmarks/earlier/throughput_200_s3@7142379.json`" in line for line in lines)
    assert "(2 runs of one runtime pooled)" in "\n".join(report.goals())
