"""A graceful stop of a real process: SIGTERM finishes the batch, checkpoints, commits and exits 0.

Kills (SIGKILL at chosen and random points) are in ``test_chaos.py``.
"""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import pytest

from tests.conftest import (
    Landing,
    completed_checkpoints,
    job_args,
    published_rows,
    start_module,
    wait_for,
)

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def test_continuous_sigterm_finishes_batch_checkpoints_and_exits_zero(tmp_path: Path, landing: Landing):
    """SIGTERM to the driver: finish the batch in flight, final checkpoint, commit, exit 0."""
    root, work, output = tmp_path / "root", tmp_path / "work", tmp_path / "out"
    landing.add_files(30)
    args = job_args(
        "graceful",
        root,
        work,
        landing,
        sink=f"parquet:{output}",
        trigger="continuous",
        batch_interval="200ms",
        checkpoint_interval="5s",
    )
    process = start_module(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    wait_for(lambda: completed_checkpoints(root, "graceful"), 180, "first checkpoint", process)
    process.send_signal(signal.SIGTERM)
    stdout, stderr = process.communicate(timeout=120)
    assert process.returncode == 0, stderr[-3000:]
    assert "stop requested" in stderr
    import json

    result = json.loads(stdout.strip().splitlines()[-1].removeprefix("result: "))
    assert result["status"] == "cancelled"
    commits = sorted(int(p.name) for p in (root / "graceful" / f"chk-{result['checkpoint_id']}" / "commits").iterdir())
    assert commits[-1] == result["batch_id"]
    # Everything the query processed is published: the final checkpoint covered the last batch.
    assert len(published_rows(output)) == result["rows"] > 0
    assert not any((output / "_staging").glob("batch-*"))
