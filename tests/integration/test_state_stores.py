"""Every state store layout x every stateful operator family, in-process: snapshot, restore, exact output.

A combination runs the job over some input (a checkpoint per batch), lands more input and runs it again
from latest: the output must be exactly right, the second run must have restored the first's state, and
``_metadata`` must record the operators and the state store. The default run covers each file layout and
each operator family once; ``-m matrix`` runs every combination (see docs/reliability.md).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from spark_checkpoint_runtime.fingerprint import IncompatibleRestore
from spark_checkpoint_runtime.layout import JobFolder
from tests.support.helpers import job_args
from tests.support.state_matrix import FAMILIES, STATE_CONFS, STORES, Family, store_args

pytestmark = pytest.mark.spark

# One combination per operator family, spread so that every store layout is covered several times.
DEFAULT = {
    ("hdfs", "session-window"),
    ("hdfs", "applyInPandasWithState"),
    ("hdfs", "outer-join"),
    ("rocksdb", "inner-join"),
    ("rocksdb", "dedup"),
    ("rocksdb", "windowed-aggregation"),
    ("rocksdb-changelog", "dedup-within-watermark"),
    ("rocksdb-changelog", "transformWithState"),
    ("rocksdb", "transformWithState-ttl"),
    ("rocksdb-changelog", "transformWithState-rows-ttl"),
    ("rocksdb-changelog", "chained"),
    ("rocksdb-v2", "inner-join"),
    ("rocksdb-v2", "aggregation"),
}
COMBINATIONS = [
    pytest.param(
        store, family, id=f"{store}-{family}", marks=[] if (store, family) in DEFAULT else [pytest.mark.matrix]
    )
    for store in STORES
    for family, spec in FAMILIES.items()
    if not (spec.rocksdb_only and store == "hdfs")
]


@pytest.fixture
def clean_state_confs(spark):
    """In-process jobs set their Spark confs on the shared session: give the next test the defaults back."""
    yield
    for key in STATE_CONFS:
        spark.conf.unset(key)


def run_family(spark, tmp_path: Path, landing, family: Family, store: str, job: str = "stateful", *more: str) -> dict:
    from spark_checkpoint_runtime.options import parse_options
    from spark_checkpoint_runtime.run import StreamingJob

    argv = job_args(
        job,
        tmp_path / "root",
        tmp_path / "work",
        landing,
        pipeline=f"examples.pipelines:{family.pipeline}",
        output_mode=family.output_mode,
        sink=f"parquet:{tmp_path / 'out'}",
    )
    return StreamingJob(parse_options([*argv, *store_args(store, family), *more]), spark).run()


@pytest.mark.parametrize(("store", "family_name"), COMBINATIONS)
def test_snapshot_and_restore_keep_the_output_exact(spark, tmp_path, landing, clean_state_confs, store, family_name):
    family = FAMILIES[family_name]
    landing.add_files(4)
    first = run_family(spark, tmp_path, landing, family, store)
    assert first["status"] == "finished" and len(first["checkpoints_completed"]) >= 3, first
    landing.add_files(3)
    second = run_family(spark, tmp_path, landing, family, store)
    assert second["restored_from"]["id"] == first["checkpoint_id"], "the second run continued the first's state"
    problems = family.check(tmp_path / "out", landing)
    assert not problems, problems[:10]

    meta = json.loads((tmp_path / "root" / "stateful" / f"chk-{second['checkpoint_id']}" / "_metadata").read_text())
    assert tuple(sorted(op["type"] for op in meta["fingerprint"]["operators"])) == tuple(sorted(family.types))
    recorded = meta["fingerprint"]["state_store"]
    assert recorded["provider"] == ("RocksDBStateStoreProvider" if store != "hdfs" else "HDFSBackedStateStoreProvider")
    assert recorded["changelog_checkpointing"] is (store in ("rocksdb-changelog", "rocksdb-v2"))
    state = [f["target"] for f in meta["files"] if f["target"].startswith("state/")]
    if store == "hdfs":
        assert any(t.endswith(".delta") for t in state)
    else:
        assert any("/SSTs/" in t for t in state) or any(t.endswith(".changelog") for t in state), state
        if store == "rocksdb":
            assert any(t.endswith(".zip") for t in state) and not any(t.endswith(".changelog") for t in state)
    if store == "rocksdb-v2":
        assert all("_" in t.rsplit("/", 1)[1] for t in state if t.endswith((".zip", ".changelog")))
        assert any(t.endswith(".changelog.crc") for t in state), "checksum sidecars travel with their files"
    reused = [f for f in meta["files"] if f["shared"] and f"/{first['run_id']}/" in f["path"]]
    assert reused, "state files stored by the first run are referenced, not uploaded again"


def test_a_restore_that_switches_the_state_store_is_refused_naming_both(spark, tmp_path, landing, clean_state_confs):
    family = FAMILIES["aggregation"]
    landing.add_files(2)
    run_family(spark, tmp_path, landing, family, "rocksdb")
    before = sorted(p.name for p in (tmp_path / "root" / "stateful").iterdir())
    spark.conf.unset("spark.sql.streaming.stateStore.providerClass")
    with pytest.raises(
        IncompatibleRestore, match="written by RocksDBStateStoreProvider.*uses HDFSBackedStateStoreProvider"
    ):
        run_family(spark, tmp_path, landing, family, "hdfs")
    with pytest.raises(IncompatibleRestore, match="format v1, the new pipeline uses v2"):
        run_family(spark, tmp_path, landing, family, "rocksdb-v2")
    assert sorted(p.name for p in (tmp_path / "root" / "stateful").iterdir()) == before, "the root is untouched"


def test_a_processing_time_transform_with_state_is_refused_at_start_unless_no_data_batches_are_off(
    spark, tmp_path, landing, clean_state_confs
):
    """PySpark 4.3.0 fails such a query in its first empty batch (INTERNAL_ERROR, no more progress): the run
    refuses it before writing anything, naming the conf that makes it run (the TTL family sets it)."""
    from spark_checkpoint_runtime.spark_versions import NO_DATA_BATCHES_CONF, UnsupportedSparkFeature

    without_conf = dataclasses.replace(FAMILIES["transformWithState-ttl"], confs=())
    landing.add_files(2)
    spark.conf.unset(NO_DATA_BATCHES_CONF)
    with pytest.raises(UnsupportedSparkFeature, match=r"processing-time mode .*noDataMicroBatches\.enabled=false"):
        run_family(spark, tmp_path, landing, without_conf, "rocksdb")
    assert not list(tmp_path.glob("root/*/chk-*")), "no checkpoint was taken"
    assert not (tmp_path / "out").exists(), "nothing was published"


def test_inspect_shows_each_stateful_operator_with_store_partitions_and_bytes(
    spark, tmp_path, landing, clean_state_confs
):
    from spark_checkpoint_runtime.admin import inspect_job

    landing.add_files(2)
    run_family(spark, tmp_path, landing, FAMILIES["chained"], "rocksdb")
    report = inspect_job(JobFolder(str(tmp_path / "root"), "stateful"))
    operators = report["latest"]["operators"]
    assert [op["kind"] for op in operators] == ["aggregation", "deduplication"]  # Spark numbers them top-down
    assert {op["store"] for op in operators} == {"RocksDBStateStoreProvider"}
    assert all(op["partitions"] == 2 and op["state_bytes"] > 0 for op in operators), operators
