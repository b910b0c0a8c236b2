"""State whose key has no columns: a global aggregation's (no fields) and a streaming limit's (one NullType
field). Spark runs such an operator as one partition and keeps its state in partition 0 alone, whatever the
partition count: checkpoints, transforms and rescales must take it as it is and leave it there."""

from __future__ import annotations

from pathlib import Path

import pytest

from spark_checkpoint_runtime import rescale, state_transform
from tests.integration.test_state_stores import clean_state_confs, run_family  # noqa: F401 - a fixture
from tests.integration.test_state_transform import FUNCTIONS, _command
from tests.support.helpers import published_rows
from tests.support.state_matrix import Family

pytestmark = [pytest.mark.spark, pytest.mark.usefixtures("clean_state_confs")]


def _total_is_exact(output: Path, landing) -> list[str]:
    counted = max(row["count"] for row in published_rows(output))
    return [] if counted == len(landing.rows) else [f"the total is {counted}, not {len(landing.rows)}"]


def _first_events_only(output: Path, landing) -> list[str]:
    emitted = len(published_rows(output))
    return [] if emitted == LIMIT else [f"the limit emitted {emitted} rows, not {LIMIT}"]


TOTAL = Family("total_count", "update", ("aggregation",), _total_is_exact)
LIMIT, LIMITED = 5, Family("first_events", "append", ("limit",), _first_events_only)


@pytest.mark.parametrize(
    ("family", "store"),
    [
        (TOTAL, "rocksdb"),
        (TOTAL, "hdfs"),
        (LIMITED, "hdfs"),
        pytest.param(LIMITED, "rocksdb", marks=pytest.mark.matrix),
    ],
    ids=["total-rocksdb", "total-hdfs", "limit-hdfs", "limit-rocksdb"],
)
def test_a_key_with_no_columns_keeps_its_state_in_partition_0(spark, tmp_path, landing, capsys, family, store):
    """A global aggregation's key has no columns, a streaming limit's one NullType column: Spark keeps their state
    in partition 0 alone, and writes no other partition. Every checkpoint takes it (a restored limit emits no more),
    and a transform and a rescale keep it there, so a restored total goes on. Spark's own repartition (RocksDB)
    hashes such a key to pmod(42, N), 2 at 8 partitions, so a rescale to such a count is refused."""
    root, job, count = tmp_path / "root", "total", spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.shuffle.partitions", "4")
    spark.conf.set("spark.example.limit", str(LIMIT))
    TOTAL = family  # noqa: N806 - the family under test
    try:
        landing.add_files(3)
        run_family(spark, tmp_path, landing, TOTAL, store, job)
        if TOTAL is LIMITED:  # a limit is not a stateful operator to the fingerprint: no transform, no rescale
            landing.add_files(2)
            run_family(spark, tmp_path, landing, TOTAL, store, job)
            assert not TOTAL.check(tmp_path / "out", landing)
            return
        code, lines, err = _command(state_transform, spark, capsys, root, job, "--function", f"{FUNCTIONS}:identity")
        assert code == 0, err
        landing.add_files(2)
        run_family(spark, tmp_path, landing, TOTAL, store, job, "--restore-from", lines[-1])
        assert not TOTAL.check(tmp_path / "out", landing)

        if store == "rocksdb":
            code, lines, err = _command(rescale, spark, capsys, root, job, "--partitions", "8")
            assert code == 2 and "to partition 2 of 8, where the query never looks" in err, err
            assert "nothing was saved" in err and not lines
        # At 6 Spark's repartition leaves it in partition 0 (and ours always does): the run restored at 6 goes on.
        code, lines, err = _command(rescale, spark, capsys, root, job, "--partitions", "6")
        assert code == 0, err
        spark.conf.set("spark.sql.shuffle.partitions", "6")
        landing.add_files(2)
        run_family(spark, tmp_path, landing, TOTAL, store, job, "--restore-from", lines[-1])
        assert not TOTAL.check(tmp_path / "out", landing)
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", count)
        spark.conf.unset("spark.example.limit")
