"""``python -m spark_checkpoint_runtime state``: a snapshot's state rows and its per-partition summary, read
with Spark's state data source over a local materialisation of our snapshot (segments included)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spark_checkpoint_runtime import state_inspection
from spark_checkpoint_runtime.fingerprint import FORMAT_VERSION_CONF
from spark_checkpoint_runtime.layout import JobFolder
from tests.integration.test_state_stores import clean_state_confs, run_family  # noqa: F401 - a fixture
from tests.support.state_matrix import FAMILIES, STATE_CONFS

pytestmark = [pytest.mark.spark, pytest.mark.usefixtures("clean_state_confs")]


def _state(spark, capsys, tmp_path: Path, job: str, *more: str) -> tuple[int, list[str], str]:
    argv = ["--job-name", job, "--checkpoint-root", str(tmp_path / "root"), *more]
    code = state_inspection.main(argv, spark)
    captured = capsys.readouterr()
    return code, [line for line in captured.out.splitlines() if line.strip()], captured.err


def test_the_state_rows_of_a_merged_checkpoint_are_the_running_counts(spark, tmp_path, landing, capsys):
    landing.add_files(4)
    run_family(spark, tmp_path, landing, FAMILIES["aggregation"], "hdfs", "counts", "--file-merging", "on")
    landing.add_files(2)
    done = run_family(spark, tmp_path, landing, FAMILIES["aggregation"], "hdfs", "counts", "--file-merging", "on")

    code, lines, err = _state(spark, capsys, tmp_path, "counts", "--json", "--limit", "10000")
    assert code == 0, err
    counts = {row["key"]["key"]: row["value"]["count"] for row in map(json.loads, lines)}
    assert counts == landing.counts_by_key()

    code, lines, err = _state(spark, capsys, tmp_path, "counts", "--summary", "--json")
    assert code == 0, err
    partitions = [json.loads(line) for line in lines]
    assert {p["operator"] for p in partitions} == {0} and {p["store"] for p in partitions} == {"default"}
    assert sum(p["rows"] for p in partitions) == len(landing.counts_by_key())
    assert len(partitions) == int(spark.conf.get("spark.sql.shuffle.partitions"))
    storage = JobFolder(str(tmp_path / "root"), "counts")
    meta = json.loads(storage.checkpoints.read(done["checkpoint_id"]).to_json())
    state_bytes = sum(
        f["size"] for f in meta["files"] if f["target"].startswith("state/0/") and "_metadata" not in f["target"]
    )
    assert sum(p["bytes"] for p in partitions) == state_bytes
    assert all(p["bytes"] > 0 for p in partitions if p["rows"])

    # An older checkpoint (the oldest retention kept) holds the state as it was then: fewer events counted.
    oldest = str(min(int(p.name[4:]) for p in (tmp_path / "root" / "counts").glob("chk-*")))
    code, lines, err = _state(
        spark, capsys, tmp_path, "counts", "--json", "--limit", "10000", "--checkpoint-id", oldest
    )
    assert code == 0, err
    assert sum(json.loads(line)["value"]["count"] for line in lines) < len(landing.rows)


def test_a_join_shows_its_four_stores_and_a_wrong_name_is_a_clear_error(spark, tmp_path, landing, capsys):
    landing.add_files(3)
    run_family(spark, tmp_path, landing, FAMILIES["inner-join"], "rocksdb", "joined")

    code, lines, err = _state(spark, capsys, tmp_path, "joined", "--summary", "--json")
    assert code == 0, err
    stores = {json.loads(line)["store"] for line in lines}
    assert stores == {
        f"{side}-{kind}" for side in ("left", "right") for kind in ("keyToNumValues", "keyWithIndexToValue")
    }
    by_store = {}
    for partition in map(json.loads, lines):
        by_store[partition["store"]] = by_store.get(partition["store"], 0) + partition["rows"]
    assert by_store["left-keyToNumValues"] == by_store["right-keyToNumValues"] == len(landing.rows)

    code, _, err = _state(spark, capsys, tmp_path, "joined", "--store-name", "nope")
    assert code == 2 and "no state for operator 0 store 'nope'" in err and "left-keyToNumValues" in err
    code, _, err = _state(spark, capsys, tmp_path, "joined", "--checkpoint-id", "999")
    assert code == 2 and "has no chk-999" in err
    code, _, err = _state(spark, capsys, tmp_path, "nothing-here")
    assert code == 2 and "no checkpoint" in err


def test_state_written_in_checkpoint_format_version_2_is_read_from_a_fresh_session(spark, tmp_path, landing, capsys):
    """Spark reads a format version 2 store only with that session conf: the command sets it from the snapshot,
    whatever its own session says, and gives the session's value back."""
    landing.add_files(3)
    run_family(spark, tmp_path, landing, FAMILIES["aggregation"], "rocksdb-v2", "counts")
    for key in STATE_CONFS:  # the command's own session has none of the job's confs
        spark.conf.unset(key)
    code, lines, err = _state(spark, capsys, tmp_path, "counts", "--json", "--limit", "10000")
    assert code == 0, err
    assert {row["key"]["key"]: row["value"]["count"] for row in map(json.loads, lines)} == landing.counts_by_key()
    assert spark.conf.get(FORMAT_VERSION_CONF, None) is None
