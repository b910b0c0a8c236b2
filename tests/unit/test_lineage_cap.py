"""A job that rewinds often writes a bounded history (issue 28, hole 9): past ``MAX_WRITTEN_RANGES`` ranges, the
gaps that no output and no snapshot uses are closed; a gap some output uses stays, so no restore ever adopts
another history's output."""

from __future__ import annotations

from pathlib import Path

from spark_checkpoint_runtime.layout import JobFolder, Lineage
from spark_checkpoint_runtime.layout.lineage import MAX_RANGES, MAX_WRITTEN_RANGES
from spark_checkpoint_runtime.options import parse_options
from spark_checkpoint_runtime.run.plan import RunPlanner
from spark_checkpoint_runtime.sinks import ParquetSink
from tests.support.helpers import checkpoint_metadata


def test_compaction_closes_only_gaps_nothing_uses():
    history = Lineage.of((3 * i, 3 * i + 1) for i in range(1, 3001))  # 3,000 ranges: ids 3i, 3i+1
    used = {3 * i + 2 for i in range(1, 3001, 4)}  # output of an abandoned branch in every fourth gap
    compacted = history.compacted(used)
    assert len(compacted.ranges) <= MAX_WRITTEN_RANGES
    assert all(compacted.contains(i) for low, high in history.ranges for i in (low, high)), "nothing dropped"
    assert not any(compacted.contains(i) for i in used), "a gap some output uses is never claimed"


def test_a_run_restored_from_a_long_history_writes_it_compacted(tmp_path: Path):
    storage = JobFolder(str(tmp_path / "root"), "j")
    ranges = [[10 * i, 10 * i] for i in range(1, MAX_RANGES - 10)]  # a history near the readers' limit
    meta = checkpoint_metadata(ranges[-1][0], [])
    meta = meta.__class__(**{**meta.__dict__, "lineage": ranges})
    storage.checkpoints.write_metadata(meta)
    output = tmp_path / "out"
    output.mkdir()
    (output / "c15-b0-part-0.parquet").write_bytes(b"another branch's rows")  # id 15 lies in the first gap
    options = parse_options(["--job-name", "j", "--checkpoint-root", str(tmp_path / "root"), "--pipeline", "m:f"])
    planner = RunPlanner(storage, options, "run-2")
    planner.resolve()
    plan = planner.settle({}, None, ParquetSink(str(output)))
    assert len(plan.history.ranges) <= MAX_WRITTEN_RANGES
    assert plan.history.contains(10) and plan.history.contains(20) and not plan.history.contains(15)
