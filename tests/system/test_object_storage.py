"""The checkpoint root on S3: s3fs against moto's S3 server on loopback (a real HTTP server, real requests).

The crash/restore chain of ``test_chaos`` runs with ``s3://`` as the checkpoint root: listing, uploads,
conditional ``_metadata`` (``If-None-Match``), the lease, and retention all go over HTTP. The output stays on
local disk (Spark would need the S3A jars to write it, and there is no Maven here).
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from spark_checkpoint_runtime.layout import JobFolder
from tests.support import figures
from tests.support.helpers import S3_BUCKET as BUCKET
from tests.support.helpers import S3_SECRET as SECRET
from tests.support.helpers import Landing, final_counts
from tests.system.test_chaos import RANDOM, SEED, run_chain


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

    storage = JobFolder(root, "s3-stateful", s3)
    completed = storage.checkpoints.completed()
    assert len(completed) == 2, "retention on S3 keeps --num-retained 2"
    referenced = {f.path for meta in completed for f in meta.files if f.shared}
    assert referenced == set(storage.checkpoints.shared_files()), "no unreferenced shared file is left on S3"
    assert storage.checkpoints.latest_valid() is not None
    # On an object store the checkpoints' small files went into segments (file merging, on by default there).
    assert all(any(f.offset is not None for f in meta.files) for meta in completed)
    log = (tmp_path / "job.log").read_text(errors="replace")
    assert SECRET not in log
    assert all(SECRET not in meta.to_json() for meta in completed)
