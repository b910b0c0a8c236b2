"""The README's benchmark tables are generated from the benchmarks' JSON (python -m benchmarks.report)."""

from __future__ import annotations

import json
import re

from benchmarks import findings, report


def test_the_readme_tables_are_what_the_json_files_say():
    assert report.main(["--check"]) == 0, "run: .venv/bin/python -m benchmarks.report"


def test_every_generated_block_is_on_a_page_and_every_json_names_its_machine():
    pages = "\n".join(path.read_text() for path in report.documents())
    assert sorted(report.blocks(pages)) == sorted(report.GENERATED)
    for name in set(re.findall(r"`benchmarks/(\w+\.json)`", pages)):
        provenance = json.loads((findings.RESULTS / name).read_text()).get("provenance")
        assert provenance and provenance["commit"] and provenance["machine"]["cpus"], name


def test_a_changed_figure_makes_the_check_fail(tmp_path):
    stale = tmp_path / "README.md"
    current = report.README.read_text()
    block = re.search(r"<!-- begin generated: goals -->\n(.*?)\n<!-- end generated: goals -->", current, re.S)
    assert block is not None
    stale.write_text(current.replace(block[1], block[1].replace("met", "mett", 1)))
    assert report.main(["--check", "--readme", str(stale)]) == 1
    assert report.main(["--readme", str(stale)]) == 0 and stale.read_text() == current


def test_a_goal_is_met_only_when_every_case_meets_it(tmp_path, monkeypatch):
    for path in findings.RESULTS.glob("*.json"):
        (tmp_path / path.name).write_text(path.read_text())
    monkeypatch.setattr(findings, "RESULTS", tmp_path)
    run = json.loads((tmp_path / "results.json").read_text())
    for case in run["continuous"].values():
        case["overhead_percent"] = 1.0
    (tmp_path / "results.json").write_text(json.dumps(run))
    assert "| throughput overhead" in report.goals()[2] and "**met**" in report.goals()[2]
    next(iter(run["continuous"].values()))["overhead_percent"] = 5.1  # one case of four misses it
    (tmp_path / "results.json").write_text(json.dumps(run))
    assert "**not met**" in report.goals()[2]
