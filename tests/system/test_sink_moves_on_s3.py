"""Sink moves on an object store are idempotent and resumable (issue 28, hole 4).

On S3 a move is a copy and a delete, made for many files at once (``MOVES_AT_ONCE`` copies, then one batched
delete). A kill between them leaves files in two places; a kill part-way through a batch leaves some files moved
and some not. Whatever is left, the next recovery finishes the job and every
part of a batch is published exactly once. s3fs against moto's S3 server on loopback (real HTTP), and a real
process SIGKILLed between a copy and its delete.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from spark_checkpoint_runtime.layout import Lineage, StagedOutput, open_url
from spark_checkpoint_runtime.sinks import ParquetSink
from tests.support.helpers import REPO, S3_BUCKET, subprocess_env

pytestmark = pytest.mark.slow

PARTS = [f"part-{n:05d}.parquet" for n in range(4)]


def _stage(fs, root: str, run_id: str, batch_id: int) -> None:
    for name in PARTS:
        fs.pipe_file(f"{root}/_staging/{run_id}/batch-{batch_id}/{name}", f"{batch_id}:{name}".encode())


def _published(fs, root: str) -> dict[str, bytes]:
    return {p.rsplit("/", 1)[1]: fs.cat_file(p) for p in fs.ls(root, detail=False) if "/c" in p}


def test_an_abort_cut_short_then_a_commit_of_the_same_batch_loses_no_part(s3):
    """The state a kill between copy and delete leaves, then the next two recoveries: another abort (a crash
    restart from a checkpoint that does not name the batch), then a restore from a savepoint that names it."""
    root = f"{S3_BUCKET}/abort-cut-short"
    fs, _ = open_url(f"s3://{root}", s3)
    _stage(fs, root, "r0", 4)
    aborted = f"{root}/_aborted/r0/batch-4"
    fs.copy(f"{root}/_staging/r0/batch-4/{PARTS[0]}", f"{aborted}/{PARTS[0]}")
    fs.rm(f"{root}/_staging/r0/batch-4/{PARTS[0]}")  # moved
    fs.copy(f"{root}/_staging/r0/batch-4/{PARTS[1]}", f"{aborted}/{PARTS[1]}")  # copied; killed before the delete
    sink = ParquetSink(f"s3://{root}", s3)
    sink.recover(None, Lineage.of([(1, 6)]))  # the restart's recovery aborts the rest
    sink.recover(StagedOutput(7, "r0", (4,)), Lineage.of([(1, 7)]))  # a restore from the snapshot naming it
    assert _published(fs, root) == {f"c7-b4-{name}": f"4:{name}".encode() for name in PARTS}
    assert not fs.exists(f"{root}/_staging/r0/batch-4") and not fs.exists(aborted)


@pytest.mark.parametrize("step", ["commit", "abort"])
@pytest.mark.parametrize("hit", [1, 3])
def test_a_kill_between_copy_and_delete_is_finished_by_the_next_recovery(s3, tmp_path, step: str, hit: int):
    root = f"{S3_BUCKET}/kill-{step}-{hit}"
    fs, _ = open_url(f"s3://{root}", s3)
    _stage(fs, root, "r0", 2)
    staged = "StagedOutput(5, 'r0', (2,))" if step == "commit" else "None"
    script = textwrap.dedent(
        f"""
        from spark_checkpoint_runtime import faults
        from spark_checkpoint_runtime.layout import Lineage, StagedOutput
        from spark_checkpoint_runtime.sinks import ParquetSink
        faults.configure()
        ParquetSink("s3://{root}", {s3!r}).recover({staged}, Lineage.of([(1, 5)]))
        print("not killed")
        """
    )
    killed = subprocess.run(
        [sys.executable, "-c", script],
        cwd=REPO,
        env={**subprocess_env(), "CHECKPOINT_FAULTS": f"sink-move@{hit}"},
        capture_output=True,
        text=True,
        timeout=120,
        start_new_session=True,
    )
    assert killed.returncode == -9 and "not killed" not in killed.stdout, killed.stderr[-2000:]
    in_two_places = [n for n in PARTS if fs.exists(f"{root}/_staging/r0/batch-2/{n}")]
    # The parts are copied together, then deleted together: killed in between, every one is in both places.
    assert in_two_places == PARTS, "killed after the copies, before their delete"
    # The next run's recovery: from the same snapshot (commit), or from one that names the batch after all.
    ParquetSink(f"s3://{root}", s3).recover(StagedOutput(5, "r0", (2,)), Lineage.of([(1, 5)]))
    assert _published(fs, root) == {f"c5-b2-{name}": f"2:{name}".encode() for name in PARTS}
    assert not fs.exists(f"{root}/_staging/r0/batch-2") and not fs.exists(f"{root}/_aborted/r0/batch-2")
