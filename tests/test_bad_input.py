"""Must-show 6: bad input exits non-zero with a one-line reason and leaves the checkpoint root unchanged."""

from __future__ import annotations

from pathlib import Path

import pytest

from spark_checkpoint_runtime.options import parse_options
from spark_checkpoint_runtime.run import StreamingJob
from tests.support.helpers import SPARK_CONF, Landing, job_args, run_module, tree_state


def _seed_root(root: Path) -> None:
    """A job folder with content, so 'unchanged' means something."""
    (root / "j" / "chk-1").mkdir(parents=True)
    (root / "j" / "chk-1" / "_metadata").write_text("{not json")
    (root / "j" / "shared").mkdir()
    (root / "j" / "shared" / "f").write_text("x")


def _assert_refused(result, expected: str, code: int = 2) -> None:
    assert result.returncode == code, (result.returncode, result.stderr[-2000:])
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("error: ") and expected in last, last


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (["--bogus", "x"], "unrecognized arguments: --bogus"),
        (["--checkpoint-interval", "fast"], "--checkpoint-interval: 'fast' is not a duration"),
        (["--checkpoint-interval", "10 fortnights"], "unknown unit"),
        (["--job-name", "a/b"], "job name 'a/b' is not allowed"),
        (["--job-name", ".."], "job name '..' is not allowed"),
        (["--job-name", "../escape"], "is not allowed"),
    ],
)
def test_bad_options_exit_2_without_touching_the_root(tmp_path: Path, landing: Landing, change, expected):
    root = tmp_path / "root"
    _seed_root(root)
    before = tree_state(root)
    result = run_module(job_args("j", root, tmp_path / "work", landing) + change, timeout=120)
    _assert_refused(result, expected)
    assert tree_state(root) == before
    assert not (tmp_path / "escape").exists()


def test_restore_from_garbage_or_outside_the_root(tmp_path: Path, landing: Landing):
    root, work = tmp_path / "root", tmp_path / "work"
    _seed_root(root)
    garbage = tmp_path / "garbage"
    garbage.mkdir()
    (garbage / "_metadata").write_text("hello")
    before = tree_state(root)
    cases = [
        (str(garbage), "is outside checkpoint root"),
        (str(root / "j" / ".." / ".." / "etc"), "is outside checkpoint root"),
        ("memory://elsewhere/j/chk-1", "is outside checkpoint root"),
        (str(root / "j" / "chk-1"), "not valid JSON"),
        (str(root / "j" / "shared"), "is not a checkpoint folder"),
    ]
    for target, expected in cases:
        _assert_refused(run_module(job_args("j", root, work, landing, restore_from=target), timeout=120), expected)
    # "latest" with only damaged checkpoints refuses rather than silently starting from empty state.
    _assert_refused(run_module(job_args("j", root, work, landing), timeout=120), "has no valid checkpoint", code=3)
    assert tree_state(root) == before


@pytest.mark.spark
@pytest.mark.slow
def test_changed_shuffle_partitions_is_refused_by_the_cli(spark, tmp_path: Path, landing: Landing):
    root, work = tmp_path / "root", tmp_path / "work"
    landing.add_files(2)
    options = job_args(
        "j",
        root,
        work,
        landing,
        pipeline="examples.pipelines:running_counts",
        output_mode="update",
        sink=f"parquet:{tmp_path / 'out'}",
    )
    StreamingJob(parse_options(options), spark).run()
    before = tree_state(root), tree_state(tmp_path / "out")
    conf = [a for k, v in {**SPARK_CONF, "spark.sql.shuffle.partitions": "5"}.items() for a in ("--conf", f"{k}={v}")]
    result = run_module(options + conf, timeout=240)
    _assert_refused(result, "incompatible restore", code=3)
    assert "conf spark.sql.shuffle.partitions: 2 became 5" in result.stderr
    assert (tree_state(root), tree_state(tmp_path / "out")) == before
