"""RocksDB checkpoint format v2 over a real Spark: a batch's retried attempt leaves a second changelog of one
version, and once the commit log has forgotten that version the capture still takes the committed file."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from examples.pipelines import EVENT_SCHEMA
from spark_checkpoint_runtime.state_files import select_files
from spark_checkpoint_runtime.state_files.lineage import read_lineage
from tests.support.landing import Landing
from tests.support.state_matrix import ROCKSDB

pytestmark = pytest.mark.spark

V2_CHANGELOGS = {
    "spark.sql.shuffle.partitions": "2",
    "spark.sql.streaming.stateStore.providerClass": ROCKSDB,
    "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
    "spark.sql.streaming.stateStore.checkpointFormatVersion": "2",
    # No snapshot in the test's life: every version is rebuilt from version 1's changelog on.
    "spark.sql.streaming.stateStore.minDeltasForSnapshot": "1000",
    "spark.sql.streaming.minBatchesToRetain": "3",  # the commit log forgets batch 2 within the test
}


def _run_counts(session, landing: Landing, working: Path, seen: dict[str, int], fail_batch: int | None = None) -> None:
    """Every available file, one per batch; running counts by key land in ``seen``. ``fail_batch`` fails after
    that batch's state is written (its tasks committed their stores) but before Spark commits the batch."""

    def sink(df, batch_id: int) -> None:
        rows = df.collect()  # runs the stateful plan: the stores write this attempt's changelogs
        if batch_id == fail_batch:
            raise RuntimeError("the sink failed after the state was written")
        seen.update({r["key"]: r["count"] for r in rows})

    stream = session.readStream.schema(EVENT_SCHEMA).option("maxFilesPerTrigger", 1).json(str(landing.path))
    query = (
        stream.groupBy("key")
        .count()
        .writeStream.outputMode("update")
        .foreachBatch(sink)
        .option("checkpointLocation", str(working))
        .trigger(availableNow=True)
        .start()
    )
    try:
        query.awaitTermination()
    finally:
        query.stop()


def test_a_retried_batchs_abandoned_changelog_is_never_captured_once_the_commit_log_forgot_it(spark, tmp_path):
    session = spark.newSession()
    for key, value in V2_CHANGELOGS.items():
        session.conf.set(key, value)
    landing, working, seen = Landing(tmp_path / "landing"), tmp_path / "working", {}
    landing.add_files(3)
    with pytest.raises(Exception, match="the sink failed after the state was written"):
        _run_counts(session, landing, working, seen, fail_batch=2)
    landing.add_files(6)
    _run_counts(session, landing, working, seen)  # batch 2 again, then 3 to 8

    listing = {str(p.relative_to(working)): p.stat().st_size for p in working.rglob("*") if p.is_file()}
    assert "commits/2" not in listing, "the commit log should have forgotten batch 2"
    twice = [p for p in listing if p.startswith("state/0/") and "/3_" in p and p.endswith(".changelog")]
    assert len(twice) == 4, f"each partition should hold two changelogs of version 3: {sorted(twice)}"

    selected = [f.target for f in select_files(listing, 8, read=lambda p: (working / p).read_bytes(), partitions=2)]
    for partition in ("0", "1"):
        folder = working / "state" / "0" / partition
        target = [p for p in selected if p.startswith(f"state/0/{partition}/9_") and p.endswith(".changelog")]
        lineage = read_lineage((working / target[0]).read_bytes(), target[0])
        expected = [f"state/0/{partition}/{v}_{uid}.changelog" for v, uid in lineage] + target
        chosen = [p for p in selected if p.startswith(f"state/0/{partition}/") and p.endswith(".changelog")]
        assert chosen == sorted(expected, key=lambda p: int(Path(p).name.split("_")[0])), folder
        assert [v for v, _ in lineage] == list(range(1, 9))

    # The selection alone is a working folder Spark resumes from: it finds every file the lineage names.
    restored = tmp_path / "restored"
    for target in selected:
        (restored / target).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(working / target, restored / target)
    landing.add_files(1)
    _run_counts(session, landing, restored, seen)
    assert seen == landing.counts_by_key()
