"""``python -m spark_checkpoint_runtime transform``: a savepoint whose state rows a Python function changed, written
over a local materialisation of our snapshot; the job restored from it continues from the changed state."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from pyspark.sql import functions as F

from spark_checkpoint_runtime import rescale, state_inspection, state_transform, transform_rows
from spark_checkpoint_runtime.hdfs_rescale import ROW_CHECKSUM
from spark_checkpoint_runtime.hdfs_state_files import StateFileCodec, load_version, with_row_checksum
from spark_checkpoint_runtime.layout import JobFolder
from spark_checkpoint_runtime.snapshot import materialize
from spark_checkpoint_runtime.unsafe_rows import write_row
from spark_checkpoint_runtime.working_copy import WorkingCopy
from tests.integration.test_state_stores import clean_state_confs, run_family  # noqa: F401 - a fixture
from tests.support.helpers import published_rows
from tests.support.state_matrix import FAMILIES, STATE_CONFS, Family
from tests.support.transforms import BUMP, BUMPED, DROPPED

pytestmark = [pytest.mark.spark, pytest.mark.usefixtures("clean_state_confs")]

FUNCTIONS = "tests.support.transforms"
SPARK = tuple(int(part) for part in __import__("pyspark").__version__.split(".")[:2])


def _command(module, spark, capsys, root: Path, job: str, *more: str) -> tuple[int, list[str], str]:
    code = module.main(["--job-name", job, "--checkpoint-root", str(root), *more], spark)
    captured = capsys.readouterr()
    return code, [line for line in captured.out.splitlines() if line.strip()], captured.err


def _state_rows(spark, capsys, root: Path, job: str, *which: str) -> dict[str, int]:
    argv = [*which, "--json", "--limit", "1000000"]
    code, lines, err = _command(state_inspection, spark, capsys, root, job, *argv)
    assert code == 0, err
    return {row["key"]["key"]: row["value"]["count"] for row in map(json.loads, lines)}


def _stored_state(spark, tmp_path: Path, root: Path, job: str, location: str) -> dict[tuple[str, int], dict]:
    """Every store's state of a snapshot as Spark stored it: key bytes to value bytes, per operator folder and
    partition (decompressed with the job's codec)."""
    storage = JobFolder(str(root), job)
    snapshot = storage.resolve_snapshot(location)
    working = WorkingCopy(str(tmp_path / "read" / str(snapshot.metadata.id)), job, "read")
    working.create()
    materialize(snapshot, working)
    codec = StateFileCodec(spark, "lz4", tmp_path)
    version = snapshot.metadata.batch_id + 1
    state = Path(working.spark_path) / "state"
    found = {}
    for operator in sorted(p for p in state.iterdir() if p.name.isdigit()):
        for partition in sorted(p for p in operator.iterdir() if p.name.isdigit()):
            stores = [partition] + [p for p in partition.iterdir() if p.is_dir() and p.name != "_metadata"]
            for folder in stores:
                if any(f.suffix in (".delta", ".snapshot") for f in folder.iterdir()):
                    found[(str(folder.relative_to(state)), version)] = load_version(codec, folder, version)
    return found


def _latest_counts(out: Path, published: Counter) -> dict[str, int]:
    """Each key's newest count among the rows published since ``published``."""
    latest: dict[str, int] = {}
    for row in map(dict, (Counter(tuple(sorted(r.items())) for r in published_rows(out)) - published).elements()):
        latest[row["key"]] = max(latest.get(row["key"], 0), row["count"])
    return latest


def _assert_dropped_and_bumped(latest: dict[str, int], before: dict[str, int], totals: dict[str, int]) -> None:
    """After ``drop_and_bump`` of the counts ``before``: the dropped key counts from zero again, the fixed one
    goes on from its fixed value, every other goes on from where it was."""
    assert latest[DROPPED] == totals[DROPPED] - before[DROPPED], "the dropped key counts from zero again"
    assert latest[BUMPED] == totals[BUMPED] + BUMP, "the fixed count goes on from the fixed value"
    assert {k: n for k, n in latest.items() if k not in (DROPPED, BUMPED)} == {
        k: totals[k] for k in latest if k not in (DROPPED, BUMPED)
    }


def test_a_transformed_savepoint_drops_fixes_and_bootstraps_keys_and_the_job_continues_from_it(
    spark, tmp_path, landing, capsys
):
    family, root, job = FAMILIES["aggregation"], tmp_path / "root", "counts"
    landing.add_files(3)
    first = run_family(spark, tmp_path, landing, family, "hdfs", job)
    before = landing.counts_by_key()
    assert DROPPED in before and BUMPED in before

    code, lines, err = _command(state_transform, spark, capsys, root, job, "--function", f"{FUNCTIONS}:drop_and_bump")
    assert code == 0, err
    savepoint = lines[-1]
    assert f"with {FUNCTIONS}:drop_and_bump" in err
    meta = json.loads((Path(savepoint.removeprefix("file:")) / "_metadata").read_text())
    assert meta["kind"] == "savepoint" and meta["batch_id"] == first["batch_id"]
    assert meta["restored_from"]["transformed_with"] == f"{FUNCTIONS}:drop_and_bump"
    assert meta["restored_from"]["transformed_rows"] == len(before) - 1
    expected = {k: n + (BUMP if k == BUMPED else 0) for k, n in before.items() if k != DROPPED}
    assert _state_rows(spark, capsys, root, job, "--savepoint", savepoint) == expected
    # Every row sits in the partition Spark's shuffle looks for it in: a restored run's counts continue.
    published = Counter(tuple(sorted(r.items())) for r in published_rows(tmp_path / "out"))
    landing.add_files(3)
    second = run_family(spark, tmp_path, landing, family, "hdfs", job, "--restore-from", savepoint)
    assert second["restored_from"]["id"] == meta["id"]
    latest, totals = _latest_counts(tmp_path / "out", published), landing.counts_by_key()
    _assert_dropped_and_bumped(latest, before, totals)
    assert len(latest) == len(totals)

    # Bootstrapping, rescaled in the same step: a key built from a batch DataFrame joins the state, given as a
    # file, at 6 partitions; the run restored from it continues every count from the savepoint's state.
    code, lines, err = _command(
        state_transform,
        spark,
        capsys,
        root,
        job,
        "--function",
        f"{Path(__file__).parents[1] / 'support' / 'transforms.py'}:bootstrap",
        "--partitions",
        "6",
    )
    assert code == 0 and "at 6 partitions" in err, err
    rescaled = json.loads((Path(lines[-1].removeprefix("file:")) / "_metadata").read_text())
    assert rescaled["fingerprint"]["pinned_confs"]["spark.sql.shuffle.partitions"] == "6"
    assert rescaled["restored_from"]["rescaled_from_partitions"] == int(spark.conf.get("spark.sql.shuffle.partitions"))
    seeded = _state_rows(spark, capsys, root, job, "--savepoint", lines[-1])
    assert seeded == {**_state_rows(spark, capsys, root, job), "seeded": 7}
    published = Counter(tuple(sorted(r.items())) for r in published_rows(tmp_path / "out"))
    before_third, count = landing.counts_by_key(), spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.shuffle.partitions", "6")
    try:
        landing.add_files(3)
        run_family(spark, tmp_path, landing, family, "hdfs", job, "--restore-from", lines[-1])
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", count)
    third: dict[str, int] = {}
    for row in map(dict, (Counter(tuple(sorted(r.items())) for r in published_rows(tmp_path / "out")) - published)):
        third[row["key"]] = max(third.get(row["key"], 0), row["count"])
    totals = landing.counts_by_key()
    assert third == {k: seeded[k] + totals[k] - before_third[k] for k in totals}


@pytest.mark.parametrize(
    ("family_name", "store"),
    [
        ("windowed-aggregation", "default"),  # a struct of timestamps in the key
        ("inner-join", "left-keyWithIndexToValue"),  # one of a join's four stores, in a folder of its own
        pytest.param("dedup", "default", marks=pytest.mark.matrix),
        pytest.param("session-window", "default", marks=pytest.mark.matrix),
        pytest.param("dedup-within-watermark", "default", marks=pytest.mark.matrix),
        pytest.param("inner-join", "right-keyToNumValues", marks=pytest.mark.matrix),
    ],
)
def test_an_identity_transform_writes_the_state_byte_for_byte(spark, tmp_path, landing, capsys, family_name, store):
    """Spark finds a key by its exact bytes: a key written differently would be counted again beside the old
    one. Every key and value written from the rows Spark read must be the bytes Spark wrote, and every other
    store stays as it was."""
    family, root, job = FAMILIES[family_name], tmp_path / "root", "stateful"
    landing.add_files(3)
    first = run_family(spark, tmp_path, landing, family, "hdfs", job)
    argv = ["--function", f"{FUNCTIONS}:identity", "--store-name", store]
    code, lines, err = _command(state_transform, spark, capsys, root, job, *argv)
    assert code == 0, err
    source = str(root / job / f"chk-{first['checkpoint_id']}")
    original = _stored_state(spark, tmp_path, root, job, source)
    assert sum(len(state) for state in original.values()) > 0
    assert _stored_state(spark, tmp_path, root, job, lines[-1]) == original

    landing.add_files(2)
    run_family(spark, tmp_path, landing, family, "hdfs", job, "--restore-from", lines[-1])
    problems = family.check(tmp_path / "out", landing)
    assert not problems, problems[:10]


@pytest.mark.parametrize(
    ("store", "family_name", "store_name"),
    [
        ("rocksdb", "aggregation", "default"),
        pytest.param("rocksdb-v2", "aggregation", "default", marks=pytest.mark.matrix),
        pytest.param("rocksdb", "inner-join", "left-keyWithIndexToValue", marks=pytest.mark.matrix),
        pytest.param("rocksdb", "windowed-aggregation", "default", marks=pytest.mark.matrix),
        pytest.param("rocksdb", "dedup", "default", marks=pytest.mark.matrix),
        pytest.param("rocksdb", "dedup-within-watermark", "default", marks=pytest.mark.matrix),
        pytest.param("rocksdb", "session-window", "default", marks=pytest.mark.matrix),
        pytest.param("rocksdb", "applyInPandasWithState", "default", marks=pytest.mark.matrix),
        pytest.param("rocksdb", "chained", "default", marks=pytest.mark.matrix),
    ],
)
def test_rocksdb_state_is_transformed_by_sparks_state_rewriter_and_the_job_continues_from_it(
    spark, tmp_path, landing, capsys, store, family_name, store_name
):
    """RocksDB's files are written by RocksDB: Spark's state rewriter writes the function's rows for one store
    (and every other store as it was) as the next batch; the restored run continues from the changed state."""
    family, root, job = FAMILIES[family_name], tmp_path / "root", "stateful"
    landing.add_files(3)
    first = run_family(spark, tmp_path, landing, family, store, job)
    for key in STATE_CONFS:  # the command's own session has none of the job's confs
        spark.conf.unset(key)
    if family_name == "aggregation":
        function, before = f"{FUNCTIONS}:drop_and_bump", landing.counts_by_key()
    else:
        function, before = f"{FUNCTIONS}:identity", None
    argv = ["--function", function, "--store-name", store_name]
    code, lines, err = _command(state_transform, spark, capsys, root, job, *argv)
    assert code == 0, err
    meta = json.loads((Path(lines[-1].removeprefix("file:")) / "_metadata").read_text())
    assert meta["batch_id"] == first["batch_id"] + 1, "Spark's rewriter writes the next batch"
    assert meta["restored_from"]["transformed_with"] == function

    published = Counter(tuple(sorted(r.items())) for r in published_rows(tmp_path / "out"))
    landing.add_files(3)
    run_family(spark, tmp_path, landing, family, store, job, "--restore-from", lines[-1])
    if before is None:
        problems = family.check(tmp_path / "out", landing)
        assert not problems, problems[:10]
        return
    assert meta["restored_from"]["transformed_rows"] == len(before) - 1
    _assert_dropped_and_bumped(_latest_counts(tmp_path / "out", published), before, landing.counts_by_key())


def _column_families(spark, tmp_path: Path, root: Path, job: str, location: str) -> Counter:
    """Every row of a RocksDB snapshot's store 0, of every column family, as Spark's state rewriter reads them:
    (family, key bytes, value bytes)."""
    snapshot = state_transform.source_snapshot(JobFolder(str(root), job), location)
    working = WorkingCopy(str(tmp_path / "families" / str(snapshot.metadata.id)), job, "read")
    working.create()
    materialize(snapshot, working)
    frame = (
        spark.read.format("statestore")
        .option("batchId", snapshot.metadata.batch_id)
        .option("operatorId", 0)
        .option("_readAllColumnFamilies", "true")  # the rewriter's own reading (internal to Spark)
        .load(working.schema_location)
    )
    return Counter((r["column_family_name"], bytes(r["key_bytes"]), bytes(r["value_bytes"])) for r in frame.collect())


def _variable(spark, capsys, root: Path, job: str, *which: str) -> dict[str, list]:
    """A transformWithState variable's values (``--state-var NAME``) or timers (``--timers``) per key, as the
    ``state`` command reads them (``--json``)."""
    argv = [*which, "--json", "--limit", "1000000"]
    code, lines, err = _command(state_inspection, spark, capsys, root, job, *argv)
    assert code == 0, err
    found: dict[str, list] = {}
    for row in map(json.loads, lines):
        found.setdefault(row["key"]["key"], []).append(
            {k: v for k, v in row.items() if k not in ("key", "partition_id")}
        )
    return found


@pytest.mark.skipif(SPARK < (4, 3), reason="Spark's state rewriter arrived in 4.3")
@pytest.mark.parametrize("family_name", ["transformWithState", "transformWithState-ttl"])
def test_a_transform_with_state_variable_is_transformed_with_its_indexes_and_the_job_continues_from_it(
    spark, tmp_path, landing, capsys, family_name
):
    """One state variable at a time: the function gets a value, a list (in order) or a map per key, and the
    variable's derived families (list counts, TTL indexes) are rebuilt from its rows: an identity transform
    writes every family byte for byte as Spark did; the job restored from a changed count continues from it."""
    family, root, job = FAMILIES[family_name], tmp_path / "root", "tws"
    landing.add_files(3)
    first = run_family(spark, tmp_path, landing, family, "rocksdb", job)
    for key in STATE_CONFS:  # the command's own session has none of the job's confs
        spark.conf.unset(key)
    source = _column_families(spark, tmp_path, root, job, "latest")
    variables = {name for name, _, _ in source if not name.startswith("$")}
    assert variables == {"count", "recent", "per_value"}
    assert any(name.startswith(("$rowCounter_", "$ttl_")) for name, _, _ in source), "derived families are read"

    for which in [*(["--state-var", variable] for variable in sorted(variables)), ["--timers"]]:
        argv = ["--function", f"{FUNCTIONS}:identity", *which, "--trigger-id", f"same-{which[-1].strip('-')}"]
        code, lines, err = _command(state_transform, spark, capsys, root, job, *argv)
        assert code == 0, err
        assert _column_families(spark, tmp_path, root, job, lines[-1]) == source, which

    recent = _variable(spark, capsys, root, job, "--state-var", "recent")
    argv = ["--function", f"{FUNCTIONS}:reversed_lists", "--state-var", "recent"]
    code, lines, err = _command(state_transform, spark, capsys, root, job, *argv)
    assert code == 0, err
    assert _variable(spark, capsys, root, job, "--state-var", "recent", "--savepoint", lines[-1]) == {
        key: values[::-1] for key, values in recent.items()
    }, "a list is written in the order the function gives"
    timers = _variable(spark, capsys, root, job, "--timers")
    assert DROPPED in timers, "every key has a timer"
    argv = ["--function", f"{FUNCTIONS}:drop_timers", "--timers"]
    code, lines, err = _command(state_transform, spark, capsys, root, job, *argv)
    assert code == 0, err
    assert _variable(spark, capsys, root, job, "--timers", "--savepoint", lines[-1]) == {
        key: found for key, found in timers.items() if key != DROPPED
    }, "a key's timers are dropped, both of Spark's timer indexes with them"

    refusals = [
        (["--function", f"{FUNCTIONS}:identity"], "with --state-var (count, per_value, recent), or its timers"),
        (["--function", f"{FUNCTIONS}:identity", "--state-var", "nope"], "has no state variable 'nope'"),
        (["--function", f"{FUNCTIONS}:keys_only", "--state-var", "recent"], "needs 'key' and 'list_value'"),
        (["--function", f"{FUNCTIONS}:null_element", "--state-var", "recent"], "a null value"),
        (["--function", f"{FUNCTIONS}:timers_twice", "--timers"], "more than once"),
        (["--function", f"{FUNCTIONS}:identity", "--state-var", "count", "--timers"], "not allowed with argument"),
    ]
    if family_name.endswith("-ttl"):
        refusals.append(
            (
                ["--function", f"{FUNCTIONS}:without_expiry", "--state-var", "count"],
                "without its value or ttlExpirationMs",
            )
        )
    for argv, reason in refusals:
        code, lines, err = _command(state_transform, spark, capsys, root, job, *argv)
        assert code == 2 and reason in err, (argv, err)

    before = landing.counts_by_key()
    argv = ["--function", f"{FUNCTIONS}:drop_and_bump_count", "--state-var", "count"]
    code, lines, err = _command(state_transform, spark, capsys, root, job, *argv)
    assert code == 0, err
    meta = json.loads((Path(lines[-1].removeprefix("file:")) / "_metadata").read_text())
    assert meta["batch_id"] == first["batch_id"] + 1 and meta["restored_from"]["transformed_state_var"] == "count"
    assert meta["restored_from"]["transformed_rows"] == len(before) - 1
    published = Counter(tuple(sorted(r.items())) for r in published_rows(tmp_path / "out"))
    landing.add_files(3)
    run_family(spark, tmp_path, landing, family, "rocksdb", job, "--restore-from", lines[-1])
    _assert_dropped_and_bumped(_latest_counts(tmp_path / "out", published), before, landing.counts_by_key())


def test_what_cannot_be_transformed_is_refused_and_nothing_is_saved(spark, tmp_path, landing, capsys):
    landing.add_files(2)
    run_family(spark, tmp_path, landing, FAMILIES["aggregation"], "hdfs", "counts")
    run_family(spark, tmp_path / "other", landing, FAMILIES["aggregation"], "rocksdb", "on-rocksdb")
    root = tmp_path / "root"
    savepoints = root / "counts" / "savepoints"

    refusals = [
        ("on-rocksdb", f"{FUNCTIONS}:identity --partitions 3", "rescale it first (rescale --partitions 3)"),
        ("counts", "no_such_module_here:fn", "could not be loaded: ModuleNotFoundError"),
        ("counts", f"{FUNCTIONS}:missing", "has no function 'missing'"),
        ("counts", "identity", "must be MODULE:NAME or FILE.py:NAME"),
        ("counts", f"{FUNCTIONS}:wrong_value_type", "'value' column is struct<count:string>"),
        ("counts", f"{FUNCTIONS}:duplicate_keys", "more than once"),
        ("counts", f"{FUNCTIONS}:fails", "the function failed: RuntimeError: poisoned row found"),
        ("counts", f"{FUNCTIONS}:fails_in_spark", "ValueError: cannot fix key k"),
        ("counts", f"{FUNCTIONS}:identity --state-var count", "--state-var is for a transformWithState operator"),
        ("counts", f"{FUNCTIONS}:identity --timers", "--timers is for a transformWithState operator"),
    ]
    for job, function, reason in refusals:
        where = tmp_path / "other" / "root" if job == "on-rocksdb" else root
        code, lines, err = _command(state_transform, spark, capsys, where, job, "--function", *function.split())
        assert code == 2 and reason in err, (function, err)
        assert not lines
    assert not savepoints.exists() or not any(savepoints.iterdir()), "a refused transform left a savepoint"

    code, _, err = _command(
        state_transform, spark, capsys, root, "counts", "--function", f"{FUNCTIONS}:identity", "--store-name", "left"
    )
    assert code == 2 and "has no state for operator 0 store 'left'" in err

    # A trigger id names the savepoint: asked again (an Airflow retry) the same one comes back.
    once = ["--function", f"{FUNCTIONS}:identity", "--trigger-id", "fix-1"]
    code, lines, err = _command(state_transform, spark, capsys, root, "counts", *once)
    assert code == 0 and lines[-1].endswith("/counts/savepoints/savepoint-fix-1"), err
    code, again, err = _command(state_transform, spark, capsys, root, "counts", *once)
    assert code == 0 and again[-1] == lines[-1], err
    other = ["--function", f"{FUNCTIONS}:drop_and_bump", "--trigger-id", "fix-1"]
    code, _, err = _command(state_transform, spark, capsys, root, "counts", *other)
    assert code == 2 and "already holds a savepoint" in err


def test_a_key_computed_as_minus_zero_or_a_signed_nan_is_written_where_and_as_spark_stores_it(spark, tmp_path):
    """Spark's aggregation looks a double key up with -0.0 as 0.0 and every NaN as one: a function's key computed
    as -0.0 must be stored (and partitioned) as Spark stored 0.0, or the restored run starts that key from empty
    state beside the written one. Spark's own state, from the same keys, is the reference."""
    source, checkpoint = tmp_path / "keys", tmp_path / "spark-checkpoint"
    spark.sql("SELECT CAST(k AS DOUBLE) AS k FROM VALUES ('0.0'), ('NaN'), ('1.5') AS t(k)").write.parquet(str(source))
    query = (
        spark.readStream.schema("k double")
        .parquet(str(source))
        .groupBy("k")
        .count()
        .writeStream.format("noop")
        .outputMode("update")
        .option("checkpointLocation", str(checkpoint))
        .start()
    )
    try:
        query.processAllAvailable()
    finally:
        query.stop()
    codec = StateFileCodec(spark, "lz4", tmp_path)
    stored = {
        key: int(partition.name)
        for partition in (checkpoint / "state" / "0").iterdir()
        if partition.name.isdigit()
        for key in load_version(codec, partition, 1)
    }
    assert len(stored) == 3

    found = spark.read.format("statestore").load(str(checkpoint))
    # The function's keys: 0.0 negated to -0.0, NaN negated to a NaN with its sign bit set.
    computed = found.select(F.struct((-F.col("key.k")).alias("k")).alias("key"), F.col("value"), F.col("partition_id"))
    key_fields, value_fields = state_transform._checked_result(found, computed)
    partitions = int(spark.conf.get("spark.sql.shuffle.partitions"))
    written = {
        key: target
        for target, key, _ in transform_rows.stored_records(computed, key_fields, value_fields, 1, partitions)
    }
    minus_one_and_a_half = [key for key in written if key not in stored]
    assert len(minus_one_and_a_half) == 1, "only -1.5 is a key Spark did not store"
    assert {k: p for k, p in written.items() if k in stored} == {k: p for k, p in stored.items() if k != _key(1.5)}


def _key(value: float) -> bytes:
    return write_row([value], [{"name": "k", "type": "double", "nullable": True}])


def test_deduplication_normalises_its_keys_from_spark_4_2_and_every_other_operator_always():
    normalises = transform_rows.normalises_float_keys
    assert normalises("stateStoreSave", (4, 0, 5)) and normalises("symmetricHashJoin", (4, 1, 4))
    assert normalises("applyInPandasWithState", (4, 0, 5)) and normalises(None, (4, 3, 0))
    assert not normalises("dedupe", (4, 0, 5)) and not normalises("dedupeWithinWatermark", (4, 1, 4))
    assert normalises("dedupe", (4, 2, 0)) and normalises("dedupeWithinWatermark", (4, 3, 0))
    assert not normalises("transformWithStateInPandasExec", (4, 3, 0))
    assert not normalises("transformWithStateExec", (4, 3, 0))


def _check_paths(output: Path, landing) -> list[str]:
    """``counts_by_key_path``'s latest row per key: the count and the largest ``[value, id]`` of its events."""
    latest: dict[str, dict] = {}
    for row in published_rows(output):
        key = row["path"][0]
        if row["count"] >= latest.get(key, {"count": 0})["count"]:
            latest[key] = row
    expected = {}
    for event in landing.rows:
        count, largest = expected.get(event["key"], (0, None))
        pair = [event["value"], event["id"]]
        expected[event["key"]] = (count + 1, max(largest, pair) if largest else pair)
    problems = [f"{k}: {latest.get(k)} != {n}" for k, n in expected.items() if k not in latest]
    values = {}
    for event in landing.rows:
        values.setdefault(event["key"], set()).add(event["value"])
    for key, (count, largest) in expected.items():
        row = latest.get(key)
        if row is not None and (row["count"], list(row["largest"]), row["path"]) != (count, largest, [key, "all"]):
            problems.append(f"{key}: {row} != count {count}, largest {largest}")
        # The first event's map: one entry, the key with one of its values (which one is the engine's order).
        first = dict(row["first"]) if row is not None else {}
        if row is not None and (list(first) != [key] or first[key] not in values[key]):
            problems.append(f"{key}: first {row['first']}")
    return problems


@pytest.mark.parametrize("store", ["hdfs", "rocksdb"])
def test_state_holding_arrays_and_maps_is_written_as_spark_wrote_it_and_placed_by_the_array_key(
    spark, tmp_path, landing, capsys, store
):
    """An array grouping key and an aggregation buffer holding an array and a map: an identity transform writes
    Spark's bytes (maps in their stored entry order), a rescale places each key by the hash of its array, and
    the restored run continues every count and maximum (RocksDB is rescaled by Spark, so only transformed)."""
    family = Family("counts_by_key_path", "update", ("aggregation",), _check_paths)
    root, job = tmp_path / "root", "paths"
    landing.add_files(3)
    first = run_family(spark, tmp_path, landing, family, store, job)
    for key in STATE_CONFS:
        spark.conf.unset(key)
    code, lines, err = _command(state_transform, spark, capsys, root, job, "--function", f"{FUNCTIONS}:identity")
    assert code == 0, err
    if store == "hdfs":
        source = str(root / job / f"chk-{first['checkpoint_id']}")
        original = _stored_state(spark, tmp_path, root, job, source)
        assert sum(len(state) for state in original.values()) > 0
        assert _stored_state(spark, tmp_path, root, job, lines[-1]) == original
        # The rescale reads each key's array from its bytes to hash it.
        code, lines, err = _command(rescale, spark, capsys, root, job, "--from", lines[-1], "--partitions", "3")
        assert code == 0, err
    partitions = "3" if store == "hdfs" else spark.conf.get("spark.sql.shuffle.partitions")
    count = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.shuffle.partitions", partitions)
    try:
        landing.add_files(3)
        run_family(spark, tmp_path, landing, family, store, job, "--restore-from", lines[-1])
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", count)
    problems = _check_paths(tmp_path / "out", landing)
    assert not problems, problems[:10]


@pytest.mark.skipif(SPARK < (4, 2), reason="row checksums: Spark 4.2+")
@pytest.mark.parametrize(
    "store",
    [
        "hdfs",
        pytest.param(
            "rocksdb",
            marks=[pytest.mark.matrix, pytest.mark.skipif(SPARK < (4, 3), reason="Spark's state rewriter: 4.3+")],
        ),
    ],
)
def test_a_store_with_row_checksums_is_written_with_them_and_spark_verifies_them_on_restore(
    spark, tmp_path, landing, capsys, store
):
    """With ``rowChecksum.enabled`` (pinned by the query's first batch) each stored value carries the CRC32C of
    its key and value; Spark checks every one when it loads the state. The transform writes them (Spark's
    rewriter does for RocksDB), so the restored run loads the changed state and continues from it."""
    family, root, job = FAMILIES["aggregation"], tmp_path / "root", "checked"
    landing.add_files(3)
    try:
        first = run_family(spark, tmp_path, landing, family, store, job, "--conf", f"{ROW_CHECKSUM}=true")
    finally:
        spark.conf.unset(ROW_CHECKSUM)
    for key in STATE_CONFS:
        spark.conf.unset(key)
    before = landing.counts_by_key()
    code, lines, err = _command(state_transform, spark, capsys, root, job, "--function", f"{FUNCTIONS}:drop_and_bump")
    assert code == 0, err
    if store == "hdfs":
        written = _stored_state(spark, tmp_path, root, job, lines[-1])
        assert sum(len(state) for state in written.values()) > 0
        assert all(
            with_row_checksum(key, value[4:]) == value for state in written.values() for key, value in state.items()
        ), "every value starts with its row's CRC32C"
        source = _stored_state(spark, tmp_path, root, job, str(root / job / f"chk-{first['checkpoint_id']}"))
        assert sum(len(state) for state in source.values()) > 0
        assert all(
            with_row_checksum(key, value[4:]) == value for state in source.values() for key, value in state.items()
        ), "as Spark writes them"

    published = Counter(tuple(sorted(r.items())) for r in published_rows(tmp_path / "out"))
    landing.add_files(2)
    run_family(spark, tmp_path, landing, family, store, job, "--restore-from", lines[-1])
    latest: dict[str, int] = {}
    for row in map(
        dict, (Counter(tuple(sorted(r.items())) for r in published_rows(tmp_path / "out")) - published).elements()
    ):
        latest[row["key"]] = max(latest.get(row["key"], 0), row["count"])
    totals = landing.counts_by_key()
    assert latest[DROPPED] == totals[DROPPED] - before[DROPPED], "the dropped key counts from zero again"
    assert latest[BUMPED] == totals[BUMPED] + BUMP
    assert {k: n for k, n in latest.items() if k not in (DROPPED, BUMPED)} == {
        k: totals[k] for k in latest if k not in (DROPPED, BUMPED)
    }


def test_a_map_in_a_key_is_refused_before_anything_is_written(spark):
    """Spark 4 groups by a map sorted by its keys: bytes transform does not reproduce, so it refuses such a key
    (a map in a value is written)."""
    found = spark.sql(
        "SELECT named_struct('m', map('b', 1, 'a', 2)) AS key, named_struct('seen', map('x', 1.5D)) AS value"
    )
    with pytest.raises(transform_rows.TransformRefused, match=r"the state key column key\.m is a map"):
        state_transform._checked_result(found, found)
    values_only = found.select(F.struct(F.lit(1).alias("k")).alias("key"), "value")
    assert state_transform._checked_result(values_only, values_only)[1][0]["name"] == "seen"
