"""``python -m spark_checkpoint_runtime rescale``: a savepoint whose state has another partition count, written
over a local materialisation of our snapshot (Spark's offline state repartition for RocksDB, our own rewrite for
the HDFS-backed store); the job restored from it runs at the new count and its output stays exact."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from spark_checkpoint_runtime import rescale, state_inspection
from spark_checkpoint_runtime.fingerprint import IncompatibleRestore
from spark_checkpoint_runtime.layout import JobFolder
from tests.integration.test_state_stores import clean_state_confs, run_family  # noqa: F401 - a fixture
from tests.support.state_matrix import FAMILIES

pytestmark = [pytest.mark.spark, pytest.mark.usefixtures("clean_state_confs")]

SHUFFLE = "spark.sql.shuffle.partitions"


@pytest.fixture
def partitions(spark):
    """Set the shared session's partition count for a run; the test default comes back afterwards."""
    before = spark.conf.get(SHUFFLE)
    yield lambda count: spark.conf.set(SHUFFLE, str(count))
    spark.conf.set(SHUFFLE, before)


def _command(module, spark, capsys, root: Path, job: str, *more: str) -> tuple[int, list[str], str]:
    code = module.main(["--job-name", job, "--checkpoint-root", str(root), *more], spark)
    captured = capsys.readouterr()
    return code, [line for line in captured.out.splitlines() if line.strip()], captured.err


def _local(url: str) -> Path:
    return Path(url.removeprefix("file://").removeprefix("file:"))


def _files(folder: Path) -> dict[str, tuple[int, int, str]]:
    """Every file under ``folder`` with its size, inode and digest: a new file, or one rewritten in place
    (through a hard link of the materialised copy: same inode, maybe same size), shows here."""
    return {
        str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_ino, hashlib.sha256(p.read_bytes()).hexdigest())
        for p in folder.rglob("*")
        if p.is_file()
    }


def _rows_by_store(spark, capsys, root: Path, job: str, *which: str) -> tuple[list[dict], dict]:
    """A snapshot's ``state --summary``: its partitions, and its rows per (operator, store)."""
    code, lines, err = _command(state_inspection, spark, capsys, root, job, *which, "--summary", "--json")
    assert code == 0, err
    found = [json.loads(line) for line in lines]
    rows: dict[tuple[int, str], int] = {}
    for p in found:
        rows[(p["operator"], p["store"])] = rows.get((p["operator"], p["store"]), 0) + p["rows"]
    return found, rows


def _variables(spark, capsys, root: Path, job: str, *which: str) -> dict[str, tuple[list[str], set[int]]]:
    """transformWithState's rows (without their partition: a TTL's expiry is in the value) and the partitions
    they are in, per state variable (the example processor's three) and for its timers."""
    found = {}
    for name, option in (("count", ()), ("recent", ()), ("per_value", ()), ("timers", ("--timers",))):
        variable = option or ("--state-var", name)
        argv = [*which, *variable, "--json", "--limit", "1000000"]
        code, lines, err = _command(state_inspection, spark, capsys, root, job, *argv)
        assert code == 0, err
        rows = [json.loads(line) for line in lines]
        content = sorted(json.dumps({k: v for k, v in row.items() if k != "partition_id"}) for row in rows)
        found[name] = (content, {row["partition_id"] for row in rows})
    return found


@pytest.mark.parametrize(
    ("family_name", "store", "old", "new"),
    [
        pytest.param("aggregation", "rocksdb", 4, 8, id="aggregation-rocksdb-4-to-8"),
        pytest.param("aggregation", "rocksdb", 8, 3, id="aggregation-rocksdb-8-to-3", marks=pytest.mark.matrix),
        pytest.param("dedup", "rocksdb", 4, 8, id="dedup-rocksdb-4-to-8", marks=pytest.mark.matrix),
        pytest.param("inner-join", "rocksdb", 8, 3, id="inner-join-rocksdb-8-to-3"),
        pytest.param("transformWithState", "rocksdb", 4, 8, id="transformWithState-rocksdb-4-to-8"),
        pytest.param("transformWithState-ttl", "rocksdb", 4, 8, id="transformWithState-ttl-rocksdb-4-to-8"),
        # The row-based API (PySpark 4.1+) stores the same variables, TTLs and timers through another Python path.
        pytest.param(
            "transformWithState-rows-ttl",
            "rocksdb",
            8,
            3,
            id="transformWithState-rows-ttl-rocksdb-8-to-3",
            marks=pytest.mark.matrix,
        ),
        # The HDFS-backed store (Spark's default): our own rewrite, keyed by Spark's hash of each key.
        pytest.param("aggregation", "hdfs", 4, 8, id="aggregation-hdfs-4-to-8"),
        pytest.param("inner-join", "hdfs", 8, 3, id="inner-join-hdfs-8-to-3"),
        pytest.param("session-window", "hdfs", 4, 8, id="session-window-hdfs-4-to-8"),
        pytest.param("aggregation", "hdfs", 8, 3, id="aggregation-hdfs-8-to-3", marks=pytest.mark.matrix),
        *(
            pytest.param(name, store, 4, 8, id=f"{name}-{store}-4-to-8", marks=pytest.mark.matrix)
            for store in ("rocksdb", "hdfs")
            for name in (
                "windowed-aggregation",
                "dedup-within-watermark",
                "outer-join",
                "applyInPandasWithState",
                "chained",
                *(("session-window",) if store == "rocksdb" else ("dedup",)),
            )
        ),
        pytest.param("outer-join", "hdfs", 8, 3, id="outer-join-hdfs-8-to-3", marks=pytest.mark.matrix),
        pytest.param("dedup", "hdfs", 8, 3, id="dedup-hdfs-8-to-3", marks=pytest.mark.matrix),
    ],
)
def test_a_rescaled_savepoint_runs_at_the_new_count_and_the_output_stays_exact(
    spark, tmp_path, landing, capsys, partitions, family_name, store, old, new
):
    family, root, job = FAMILIES[family_name], tmp_path / "root", "stateful"
    partitions(old)
    landing.add_files(3)
    first = run_family(spark, tmp_path, landing, family, store, job)
    source = root / job / f"chk-{first['checkpoint_id']}"
    before = _files(root / job)

    code, lines, err = _command(rescale, spark, capsys, root, job, "--from", "latest", "--partitions", str(new))
    assert code == 0, err
    savepoint = lines[-1]
    assert f"to {new} partitions" in err
    meta = json.loads((_local(savepoint) / "_metadata").read_text())
    assert meta["kind"] == "savepoint" and meta["fingerprint"]["pinned_confs"][SHUFFLE] == str(new)
    assert (
        meta["restored_from"]["path"].endswith(str(source)) and meta["restored_from"]["rescaled_from_partitions"] == old
    )
    assert meta["id"] > first["checkpoint_id"]
    # Spark's repartition writes one more batch; our rewrite rescales the source's batch in place.
    assert meta["batch_id"] > first["batch_id"] if store == "rocksdb" else meta["batch_id"] == first["batch_id"]
    after = _files(root / job)
    assert {k: v for k, v in after.items() if k in before} == before, "the source snapshot's files were changed"

    # Every state row is in one of the new partitions, and none went missing.
    source_id = ("--checkpoint-id", str(first["checkpoint_id"]))
    if family_name.startswith("transformWithState"):  # Spark's state data source reads one variable at a time
        after = _variables(spark, capsys, root, job, "--savepoint", savepoint)
        before = _variables(spark, capsys, root, job, *source_id)
        # Every variable's rows, values and (with a TTL) expiry, and every timer, carried over exactly.
        assert {name: rows for name, (rows, _) in after.items()} == {n: r for n, (r, _) in before.items()}
        assert all(rows for rows, _ in after.values()), after
        if family_name.endswith("-ttl"):
            assert all("ttlExpirationMs" in row for row in after["count"][0]), after["count"][0][:2]
        # The summary counts a transformWithState store's rows over its variables, per new partition.
        found, rows_after = _rows_by_store(spark, capsys, root, job, "--savepoint", savepoint)
        assert {p["partition"] for p in found} == set(range(new))
        assert sum(rows_after.values()) == sum(len(rows) for name, (rows, _) in after.items() if name != "timers")
        assert all(partitions <= set(range(new)) for _, partitions in after.values())
    else:
        found, rows_after = _rows_by_store(spark, capsys, root, job, "--savepoint", savepoint)
        assert {p["partition"] for p in found} == set(range(new))
        _, rows_before = _rows_by_store(spark, capsys, root, job, *source_id)
        assert rows_after == rows_before and sum(rows_after.values()) > 0

    # The old count beside the rescaled savepoint is a clear error before anything runs.
    with pytest.raises(IncompatibleRestore, match=f"conf {SHUFFLE}: {new} became {old}"):
        run_family(spark, tmp_path, landing, family, store, job, "--restore-from", savepoint)

    partitions(new)
    landing.add_files(3)
    second = run_family(spark, tmp_path, landing, family, store, job, "--restore-from", savepoint)
    assert second["restored_from"]["id"] == meta["id"]
    problems = family.check(tmp_path / "out", landing)
    assert not problems, problems[:10]
    latest = JobFolder(str(root), job).checkpoints.read(second["checkpoint_id"])
    assert latest.fingerprint["pinned_confs"][SHUFFLE] == str(new)


def test_what_cannot_be_rescaled_is_refused_before_anything_is_written(spark, tmp_path, landing, capsys, partitions):
    partitions(4)
    landing.add_files(2)
    run_family(spark, tmp_path, landing, FAMILIES["aggregation"], "rocksdb", "on-rocksdb")
    root = tmp_path / "root"
    before = _files(tmp_path)

    code, _, err = _command(rescale, spark, capsys, root, "on-rocksdb", "--partitions", "4")
    assert code == 2 and "has 4 partitions already" in err
    code, _, err = _command(rescale, spark, capsys, root, "on-rocksdb", "--partitions", "0")
    assert code == 2 and "at least 1" in err
    code, _, err = _command(rescale, spark, capsys, root, "on-rocksdb", "--from", "chk-999", "--partitions", "8")
    assert code == 2 and "has no chk-999" in err
    code, _, err = _command(rescale, spark, capsys, root, "nothing-here", "--partitions", "8")
    assert code == 2 and "no checkpoint" in err
    assert _files(tmp_path) == before, "a refused rescale wrote something"

    # Files checked complete, then deleted under the rescale (a running job's retention): one line, exit 1 (a
    # retry may find a newer checkpoint), not a traceback. Only the deletion's timing is simulated here.
    def gone(*_args, **_kwargs):
        raise FileNotFoundError(str(root / "on-rocksdb" / "shared" / "r" / "1.zip"))

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(rescale, "rescale", gone)
        code, _, err = _command(rescale, spark, capsys, root, "on-rocksdb", "--partitions", "8")
    assert code == 1 and "went away while the rescale read it" in err and "Rescale a savepoint" in err

    # A trigger id names the savepoint: asked again (an Airflow retry) the same one comes back, nothing new is
    # written; the same id for another rescale is refused.
    once = ["--partitions", "8", "--trigger-id", "retry-me"]
    code, lines, err = _command(rescale, spark, capsys, root, "on-rocksdb", *once)
    assert code == 0 and lines[-1].endswith("/on-rocksdb/savepoints/savepoint-retry-me"), err
    written = _files(tmp_path)
    code, again, err = _command(rescale, spark, capsys, root, "on-rocksdb", *once)
    assert code == 0 and again[-1] == lines[-1] and _files(tmp_path) == written, err
    code, _, err = _command(rescale, spark, capsys, root, "on-rocksdb", "--partitions", "6", "--trigger-id", "retry-me")
    assert code == 2 and "already holds a savepoint" in err and "at 8 partitions" in err
