"""A savepoint taken while batches are staged publishes nothing twice (issue 28, hole 1).

A downstream reader reads every output file once, as it appears. The union of what it read must hold each
running count exactly once, whether the job is restored from the latest checkpoint (older than the
savepoint) or from the savepoint after a SIGKILL.
"""

from __future__ import annotations

import subprocess
from collections import Counter
from pathlib import Path

import pytest

from spark_checkpoint_runtime.options import parse_options
from spark_checkpoint_runtime.run import StreamingJob
from tests.support.helpers import (
    Landing,
    completed_checkpoints,
    final_counts,
    job_args,
    kill_group,
    run_module,
    start_module,
    wait_for,
)

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def _published_files(output: Path) -> dict[str, list[tuple[str, int]]]:
    """Each published output file with its rows, as a reader listing the output folder sees them."""
    import pyarrow.parquet as pq

    files = {}
    for path in sorted(output.glob("c*-b*-part-*")):
        files[path.name] = [(row["key"], row["count"]) for row in pq.read_table(path).to_pylist()]
    return files


@pytest.mark.parametrize("restore_from", ["latest", "savepoint"])
def test_a_savepoint_with_staged_batches_publishes_each_row_once(spark, tmp_path: Path, landing: Landing, restore_from):
    root, work, output = tmp_path / "root", tmp_path / "work", tmp_path / "out"
    args = job_args(
        "counts",
        root,
        work,
        landing,
        pipeline="examples.pipelines:running_counts",
        output_mode="update",
        sink=f"parquet:{output}",
        trigger="continuous",
        batch_interval="200ms",
        checkpoint_interval="10min",  # the first checkpoint only: later batches stay staged
    )
    landing.add_files(3)
    v1 = start_module(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    try:
        wait_for(lambda: completed_checkpoints(root, "counts"), 180, "the first checkpoint", v1)
        for staged in range(1, 4):
            landing.add_files(1)
            wait_for(lambda n=staged: len(list(output.glob("_staging/*/batch-*"))) >= n, 60, "a staged batch", v1)
        asked = run_module(
            ["savepoint", "--job-name", "counts", "--checkpoint-root", str(root), "--trigger-id", "live-1"], 240
        )
        assert asked.returncode == 0, asked.stderr[-3000:]
        savepoint = asked.stdout.strip().splitlines()[-1]
        read = _published_files(output)  # the downstream reader's first pass, right after the savepoint
    finally:
        kill_group(v1)

    landing.add_files(2)
    chosen = "latest" if restore_from == "latest" else savepoint
    StreamingJob(parse_options([*args, "--trigger", "available-now", "--restore-from", chosen]), spark).run()
    for name, rows in _published_files(output).items():
        read.setdefault(name, rows)  # the reader's second pass reads only files it has not read
    counted = Counter(row for rows in read.values() for row in rows)
    twice = sorted(row for row, times in counted.items() if times > 1)
    assert not twice, f"the downstream reader read {len(twice)} running counts twice: {twice[:5]}"
    assert final_counts(output) == landing.counts_by_key()
