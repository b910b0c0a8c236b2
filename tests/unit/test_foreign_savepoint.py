"""Another job's savepoint brings its state, not its output (issue 28, hole 8): restored into a job that has
output of its own in the sink, the run is refused unless ``--existing-output`` says what to do, and then the
sink's history starts like a fresh one's (the other job's ids name none of this job's output). A job with no
history of its own continues the other job, output included (an upgrade under a new name)."""

from __future__ import annotations

from pathlib import Path

import pytest

from spark_checkpoint_runtime.errors import ExistingOutput
from spark_checkpoint_runtime.layout import JobFolder, SavepointFolder
from spark_checkpoint_runtime.options import parse_options
from spark_checkpoint_runtime.run.plan import RunPlanner
from spark_checkpoint_runtime.sinks import ParquetSink
from spark_checkpoint_runtime.snapshot_targets import SavepointTarget
from tests.support.coordinator import running_coordinator, spark_like_working_folder
from tests.support.helpers import checkpoint_metadata


def _savepoint_of_another_job(tmp_path: Path) -> str:
    other = JobFolder(str(tmp_path / "root"), "j")  # the coordinator's working folder belongs to job "j"
    with running_coordinator(other, spark_like_working_folder(tmp_path, batch=0)) as coordinator:
        taken = coordinator.savepoint_now(0, SavepointTarget(SavepointFolder(str(tmp_path / "sp"))))
    assert taken.result is not None, taken.reason
    return str(tmp_path / "sp")


def _planner(tmp_path: Path, savepoint: str, *extra: str) -> RunPlanner:
    argv = ["--job-name", "mine", "--checkpoint-root", str(tmp_path / "root"), "--pipeline", "m:f"]
    options = parse_options([*argv, "--restore-from", savepoint, *extra])
    planner = RunPlanner(JobFolder(str(tmp_path / "root"), "mine"), options, "run-2")
    planner.resolve()
    return planner


def test_another_jobs_savepoint_into_this_jobs_output_is_refused_unless_told(tmp_path: Path):
    savepoint = _savepoint_of_another_job(tmp_path)
    JobFolder(str(tmp_path / "root"), "mine").ids.mark_completed(1, "run-0")  # "mine" has a history of its own
    output = tmp_path / "out"
    output.mkdir()
    for published in ("c1-b0-part-0.parquet", "c2-b1-part-0.parquet"):  # this job's published output
        (output / published).write_bytes(b"rows")
    sink = ParquetSink(str(output))
    with pytest.raises(ExistingOutput, match="restores from a savepoint of job 'j'.*--existing-output move-aside"):
        _planner(tmp_path, savepoint).check_existing_output(sink)

    moved = _planner(tmp_path, savepoint, "--existing-output", "move-aside")
    moved.check_existing_output(sink)
    plan = moved.settle({}, None, sink)
    assert plan.rewind and plan.history.ranges == (), "the other job's ids own none of this sink's output"
    assert plan.next_id > 2, "ids stay above the output this sink holds"

    kept = _planner(tmp_path, savepoint, "--existing-output", "keep").settle({}, None, sink)
    assert kept.history.ranges == ((1, 2),)


def test_another_jobs_savepoint_into_an_empty_sink_needs_no_answer(tmp_path: Path):
    savepoint = _savepoint_of_another_job(tmp_path)
    JobFolder(str(tmp_path / "root"), "mine").ids.mark_completed(1, "run-0")
    _planner(tmp_path, savepoint).check_existing_output(ParquetSink(str(tmp_path / "out")))


def test_asking_again_for_the_same_restore_after_a_first_attempt_is_no_history_of_its_own(tmp_path: Path):
    """The first attempt's checkpoint continues the savepoint (killed before it finished): not a refusal."""
    savepoint = _savepoint_of_another_job(tmp_path)
    output = tmp_path / "out"
    output.mkdir()
    (output / "c1-b0-part-0.parquet").write_bytes(b"the other job's rows")
    mine = JobFolder(str(tmp_path / "root"), "mine")
    planner = _planner(tmp_path, savepoint)
    attempt = checkpoint_metadata(9, [], job="mine")
    attempt = attempt.__class__(**{**attempt.__dict__, "restored_from": planner.point.describe()})
    mine.checkpoints.write_metadata(attempt)
    mine.ids.mark_completed(9, "run-1")
    planner.check_existing_output(ParquetSink(str(output)))  # no refusal
    other = checkpoint_metadata(10, [], job="mine")  # then a run of its own, from latest: a history of its own
    mine.checkpoints.write_metadata(other.__class__(**{**other.__dict__, "restored_from": {"kind": "checkpoint"}}))
    with pytest.raises(ExistingOutput):
        _planner(tmp_path, savepoint).check_existing_output(ParquetSink(str(output)))


def test_a_new_job_continues_another_jobs_savepoint_and_its_output(tmp_path: Path):
    """An upgrade under a new job name, writing the same sink: the savepoint's history owns that output."""
    savepoint = _savepoint_of_another_job(tmp_path)
    output = tmp_path / "out"
    output.mkdir()
    (output / "c1-b0-part-0.parquet").write_bytes(b"the other job's rows")
    sink = ParquetSink(str(output))
    planner = _planner(tmp_path, savepoint)
    planner.check_existing_output(sink)
    plan = planner.settle({}, None, sink)
    assert plan.history.contains(1) and plan.history == planner.point.metadata.history
