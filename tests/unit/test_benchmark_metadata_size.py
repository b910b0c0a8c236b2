"""A small run of benchmarks.metadata_size: the runtime's own format and retention, no Spark."""

from __future__ import annotations

from benchmarks.metadata_size import SNAPSHOT_EVERY, run


def test_metadata_size_follows_the_live_chain_and_retention_keeps_three(tmp_path):
    result = run(partitions=20, checkpoints=2 * SNAPSHOT_EVERY + 3, folder=tmp_path)
    assert len(result["retained"]) == 3, "the runtime's retention ran after every checkpoint"
    # A checkpoint references the last snapshot and the deltas after it: at most SNAPSHOT_EVERY + 1 files
    # per partition, plus Spark's logs; never the whole history.
    assert result["entries"]["max"] <= 20 * (SNAPSHOT_EVERY + 1) + 3
    assert result["metadata_bytes"]["max"] > result["metadata_bytes"]["last"] > 0
    assert result["stored_share_median"] == 1, "20 partitions: plain JSON"
    assert 0 < result["json_bytes"]["max"] <= result["metadata_bytes"]["max"], "sampled every tenth"
    assert set(result["resident_mib_at_checkpoint"]) == {10, 23}
    assert result["one_checkpoint_python_peak_mib"] is not None
