"""Rules of the control channel: where a savepoint may go, answers from runs that are gone, long ids, pruning."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from spark_checkpoint_runtime.layout import CheckpointFormatError, ControlChannel, JobFolder, key_from
from spark_checkpoint_runtime.options import JobOptions, parse_options
from spark_checkpoint_runtime.run.control_requests import check_savepoint_target


def _options(root: Path, *extra: str) -> JobOptions:
    return parse_options(["--job-name", "j", "--checkpoint-root", str(root), "--pipeline", "m:f", *extra])


@pytest.mark.parametrize(
    ("target", "allowed"),
    [
        ("{root}/j/moved", True),
        ("file://{root}/elsewhere", True),
        ("{tmp}/approved/sp", True),
        ("{root}/../escape", False),
        ("/etc/cron.d", False),
        ("s3://someone-elses-bucket/x", False),
        ("{tmp}/approved-but-not-really", False),
    ],
)
def test_a_savepoint_goes_only_under_the_root_or_an_allowed_prefix(tmp_path: Path, target: str, allowed: bool):
    root = tmp_path / "root"
    options = _options(root, "--savepoint-targets", f"{tmp_path}/approved, s3://ours")
    storage = JobFolder(str(root), "j")
    wanted = target.format(root=root, tmp=tmp_path)
    if allowed:
        check_savepoint_target(storage, options, wanted)
    else:
        with pytest.raises(CheckpointFormatError, match="--savepoint-targets"):
            check_savepoint_target(storage, options, wanted)


def test_an_in_progress_answer_from_a_run_that_is_gone_expires(tmp_path: Path):
    control = ControlChannel(JobFolder(str(tmp_path), "j"))
    control.heartbeat("live-run", None)
    control.request("sp-1", "savepoint")
    control.respond("sp-1", {"status": "in_progress", "run_id": "killed-run"})
    assert control.request_savepoint("sp-1") is None, "asked again: a live run will answer"
    assert control.response("sp-1") is None and [r.trigger_id for r in control.pending()] == ["sp-1"]
    control.respond("sp-1", {"status": "in_progress", "run_id": "live-run"})
    assert control.request_savepoint("sp-1")["status"] == "in_progress", "a live run's answer stands"


def test_long_ids_keep_a_hash_of_the_whole_text():
    first, second = "d" * 300 + ".task.run-1", "d" * 300 + ".task.run-2"
    assert len(key_from(first)) == 200 and key_from(first) != key_from(second)
    assert key_from("dag id/with spaces") == "dag-id-with-spaces"


def test_settled_control_files_are_pruned(tmp_path: Path):
    control = ControlChannel(JobFolder(str(tmp_path), "j"))
    control.request("answered", "savepoint")
    control.respond("answered", {"status": "completed"})
    control.request("for-ended-run", "stop", "run-a")
    control.write_run_report("run-a", {"status": "finished"})
    control.request("waiting", "stop", "run-b")
    control.heartbeat("run-b-id", "run-b")  # run-b is alive: a request for it stays, however old
    control.request("for-killed-run", "stop", "run-c")  # run-c died without a report: nothing will answer
    base = Path(control.base)
    week_ago = time.time() - 8 * 86400
    for path in base.rglob("*.json"):
        os.utime(path, (week_ago, week_ago))
    control.request("fresh", "savepoint")
    control.respond("fresh", {"status": "completed"})
    control.heartbeat("run-b-id", "run-b")  # (the heartbeat is fresh)
    assert control.prune(7 * 86400) == 5
    left = sorted(str(p.relative_to(base)) for p in base.rglob("*.json") if p.parent.name != "alive")
    assert left == ["requests/fresh.json", "requests/waiting.json", "responses/fresh.json"]
    assert json.loads((base / "requests" / "waiting.json").read_text())["run_key"] == "run-b"
