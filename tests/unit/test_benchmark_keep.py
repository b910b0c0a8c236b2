"""A rerun's JSON takes its place and the run it supersedes is kept (``python -m benchmarks.keep``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import keep
from benchmarks.findings import EARLIER


def _run(path: Path, commit: str | None, figure: float) -> Path:
    provenance = {"commit": commit, "dirty": False} if commit else None
    path.write_text(json.dumps({"figure": figure, "provenance": provenance}))
    return path


def test_the_superseded_run_moves_under_earlier_named_by_its_commit(tmp_path: Path):
    target = _run(tmp_path / "throughput_200_local.json", "9179cab", 0.97)
    rerun = _run(tmp_path / "rerun.json", "e73f181", 0.99)
    assert keep.main([str(rerun), str(target)]) == 0
    kept = tmp_path / EARLIER / "throughput_200_local@9179cab.json"
    assert json.loads(kept.read_text())["figure"] == 0.97
    assert json.loads(target.read_text())["figure"] == 0.99
    assert rerun.exists(), "the rerun's own file is copied, not moved"


def test_a_first_run_has_nothing_to_keep(tmp_path: Path):
    rerun = _run(tmp_path / "rerun.json", "e73f181", 0.99)
    assert keep.keep(rerun, tmp_path / "new.json") is None
    assert json.loads((tmp_path / "new.json").read_text())["figure"] == 0.99


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        (lambda t: (_run(t / "rerun.json", None, 1.0), _run(t / "x.json", "a1", 1.0)), "records no provenance"),
        (lambda t: (_run(t / "rerun.json", "b2", 1.0), _run(t / "x.json", None, 1.0)), "records no provenance"),
        (lambda t: ((t / "rerun.json"), _run(t / "x.json", "a1", 1.0)), "cannot read"),
        (lambda t: (_run(t / "x.json", "a1", 1.0), t / "x.json"), "is the committed file itself"),
    ],
)
def test_nothing_is_replaced_when_either_run_cannot_be_named(tmp_path: Path, setup, message: str):
    rerun, target = setup(tmp_path)
    before = target.read_text()
    with pytest.raises(SystemExit, match=message):
        keep.keep(rerun, target)
    assert target.read_text() == before and not (tmp_path / EARLIER).exists()


def test_another_run_of_a_kept_commit_is_kept_beside_it_and_the_same_run_only_once(tmp_path: Path):
    target = _run(tmp_path / "scale.json", "a1", 1.0)
    (tmp_path / EARLIER).mkdir()
    _run(tmp_path / EARLIER / "scale@a1.json", "a1", 0.5)
    assert keep.keep(_run(tmp_path / "rerun.json", "b2", 2.0), target) == tmp_path / EARLIER / "scale@a1.2.json"
    assert json.loads((tmp_path / EARLIER / "scale@a1.json").read_text())["figure"] == 0.5
    assert json.loads((tmp_path / EARLIER / "scale@a1.2.json").read_text())["figure"] == 1.0
    assert keep.set_aside(target) == tmp_path / EARLIER / "scale@b2.json"
    assert keep.set_aside(target) == tmp_path / EARLIER / "scale@b2.json", "the same run is kept once"
    assert len(list((tmp_path / EARLIER).iterdir())) == 3


def test_a_full_benchmark_run_keeps_each_result_it_rewrites_and_only_those(tmp_path: Path, monkeypatch):
    import benchmarks.__main__ as every

    untouched = _run(tmp_path / "results.json", "a1", 1.0)
    rewritten = _run(tmp_path / "scale.json", "a1", 2.0)

    def scale(argv: list[str]) -> int:
        _run(rewritten, "b2", 3.0)
        return 0

    def failing(argv: list[str]) -> int:
        _run(untouched, "b2", 4.0)
        raise RuntimeError("a benchmark that fails after writing part of its result")

    monkeypatch.setattr(every, "RESULTS", tmp_path)
    monkeypatch.setattr(every, "RUNS", ((scale, []),))
    assert every.main() == 0
    assert sorted(path.name for path in (tmp_path / EARLIER).iterdir()) == ["scale@a1.json"]
    assert json.loads((tmp_path / EARLIER / "scale@a1.json").read_text())["figure"] == 2.0
    monkeypatch.setattr(every, "RUNS", ((failing, []),))
    with pytest.raises(RuntimeError):
        every.main()
    assert json.loads((tmp_path / EARLIER / "results@a1.json").read_text())["figure"] == 1.0
