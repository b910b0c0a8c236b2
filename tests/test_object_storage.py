"""The checkpoint root on S3: s3fs against moto's S3 server on loopback (a real HTTP server, real requests).

The crash/restore chain of ``test_chaos`` runs with ``s3://`` as the checkpoint root: listing, uploads,
conditional ``_metadata`` (``If-None-Match``), the lease, and retention all go over HTTP. The output stays on
local disk (Spark would need the S3A jars to write it, and there is no Maven here).
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from spark_checkpoint_runtime.layout import CheckpointStorage, SnapshotExists
from tests import figures
from tests.conftest import S3_BUCKET as BUCKET
from tests.conftest import S3_SECRET as SECRET
from tests.conftest import Landing, checkpoint_metadata, final_counts
from tests.test_chaos import RANDOM, SEED, run_chain


def test_metadata_on_s3_is_created_once(s3):
    storage = CheckpointStorage(f"s3://{BUCKET}/unit", "once", s3)
    storage.write_checkpoint_metadata(checkpoint_metadata(1, [], job="once"))
    with pytest.raises(SnapshotExists):
        storage.write_checkpoint_metadata(checkpoint_metadata(1, [], job="once"))
    assert [m.id for m in storage.completed_checkpoints()] == [1]


@pytest.mark.spark
@pytest.mark.slow
def test_crash_restore_with_the_checkpoint_root_on_s3(s3, tmp_path: Path, landing: Landing):
    rng = random.Random(SEED + 3)
    root = f"s3://{BUCKET}/chaos"
    plan = ["upload@2", "before-metadata@1", "retention-delete@1", RANDOM]
    output = run_chain(
        tmp_path,
        landing,
        "s3-stateful",
        plan,
        rng,
        storage_options=s3,
        checkpoint_root=root,
        pipeline="examples.pipelines:running_counts",
        output_mode="update",
    )
    largest = final_counts(output)
    expected = landing.counts_by_key()
    figures.record_rows(
        len(landing.rows),
        sum(max(0, n - largest.get(k, 0)) for k, n in expected.items()),
        sum(max(0, largest.get(k, 0) - n) for k, n in expected.items()),
        "exactly-once",
    )
    assert largest == expected

    storage = CheckpointStorage(root, "s3-stateful", s3)
    completed = storage.completed_checkpoints()
    assert len(completed) == 2, "retention on S3 keeps --num-retained 2"
    referenced = {f.path for meta in completed for f in meta.files if f.shared}
    assert referenced == set(storage.shared_files()), "no unreferenced shared file is left on S3"
    assert storage.latest_valid_checkpoint() is not None
    log = (tmp_path / "job.log").read_text(errors="replace")
    assert SECRET not in log
    assert all(SECRET not in meta.to_json() for meta in completed)
