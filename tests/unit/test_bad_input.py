"""Must-show 6: bad input exits non-zero with a one-line reason and leaves the checkpoint root unchanged."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.helpers import Landing, job_args, run_module, tree_state


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
        (["--stop-timeout", "60"], "--stop-timeout must be at least 1s"),
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
