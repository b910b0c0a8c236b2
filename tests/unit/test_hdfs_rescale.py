"""The HDFS-backed store's rescale (our own rewrite), in the parts that need no Spark: the state file records,
the schema file, which key columns are partitioned on, and the refusals that come before any state is read."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from spark_checkpoint_runtime.hdfs_rescale import key_schema, rescale_working_folder, store_folders
from spark_checkpoint_runtime.hdfs_state_files import END_MARKER, HdfsRescaleError, entries, record

STRING = {"name": "key", "type": "string", "nullable": True, "metadata": {}}
LONG = {"name": "index", "type": "long", "nullable": False, "metadata": {}}
SESSION_START = {"name": "sessionStartTime", "type": "timestamp", "nullable": False, "metadata": {}}


def _utf(text: str) -> bytes:
    raw = text.encode()
    return struct.pack(">H", len(raw)) + raw


def _schema_file(path: Path, key_fields: list[dict], chunk: int = 65535) -> None:
    """A schema file as Spark's SchemaV2Writer writes it: version, then key and value JSON in UTF chunks."""
    out = _utf("v2")
    for schema in ({"type": "struct", "fields": key_fields}, {"type": "struct", "fields": [LONG]}):
        text = json.dumps(schema)
        parts = [text[i : i + chunk] for i in range(0, len(text), chunk)]
        out += struct.pack(">i", len(parts)) + b"".join(_utf(part) for part in parts)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(out)


def encode(records: dict[bytes, bytes]) -> bytes:
    return b"".join(record(key, value) for key, value in records.items()) + END_MARKER


def test_records_round_trip_and_removals_drop_a_row_checksum():
    records = {b"k1": b"v1", b"": b"empty-key", b"k3": b""}
    assert dict(entries(encode(records), "x")) == records
    removal = struct.pack(">i", 6) + b"\x01\x02\x03\x04k1" + struct.pack(">i", -1) + struct.pack(">i", -1)
    assert list(entries(removal, "x", checksummed_rows=True)) == [(b"k1", None)]
    with pytest.raises(HdfsRescaleError, match=r"^state/0/1/3.delta: a record's key size .* runs past the file"):
        list(entries(encode(records)[:-4], "state/0/1/3.delta"))  # no end marker
    with pytest.raises(HdfsRescaleError, match="a record's key \\(-4 bytes\\) runs past the file"):
        list(entries(struct.pack(">i", -4) + END_MARKER, "x"))  # a size that would read backwards
    with pytest.raises(HdfsRescaleError, match="a record's value \\(99 bytes\\) runs past the file"):
        list(entries(struct.pack(">i", 1) + b"k" + struct.pack(">i", 99) + b"short" + END_MARKER, "x"))
    with pytest.raises(HdfsRescaleError, match="a removal in a snapshot file"):
        list(entries(struct.pack(">i", 1) + b"k" + END_MARKER + END_MARKER, "x", removals=False))


def test_the_schema_file_is_read_across_chunks(tmp_path: Path):
    _schema_file(tmp_path / "schema", [STRING, LONG], chunk=7)
    assert key_schema(tmp_path / "schema") == [STRING, LONG]


def test_a_join_partitions_by_its_keys_and_a_session_window_by_its_grouping_keys(tmp_path: Path):
    join = tmp_path / "state" / "0"
    for name in ("left-keyToNumValues", "left-keyWithIndexToValue"):
        _schema_file(join / "0" / name / "_metadata" / "schema", [STRING, LONG] if "Index" in name else [STRING])
    found = {store.store: store.partition_columns for store in store_folders(join)}
    assert found == {"left-keyToNumValues": 1, "left-keyWithIndexToValue": 1}
    session = tmp_path / "state" / "1"
    _schema_file(session / "0" / "_metadata" / "schema", [STRING, SESSION_START])  # Spark 3.5: no metadata
    assert [s.partition_columns for s in store_folders(session)] == [1]
    (session / "_metadata").mkdir()
    (session / "_metadata" / "metadata").write_text(
        'v1\n{"operatorInfo":{"operatorId":1,"operatorName":"sessionWindowStateStoreSaveExec"},'
        '"stateStoreInfo":[{"storeName":"default","numColsPrefixKey":1,"numPartitions":4}]}'
    )
    assert [s.partition_columns for s in store_folders(session)] == [1]
    plain = tmp_path / "state" / "2"
    _schema_file(plain / "0" / "_metadata" / "schema", [STRING, SESSION_START])
    assert [s.partition_columns for s in store_folders(plain)] == [1]  # Spark 3.5: read as a session window
    (plain / "_metadata").mkdir()
    (plain / "_metadata" / "metadata").write_text(
        'v1\n{"operatorInfo":{"operatorId":2,"operatorName":"stateStoreSave"},'
        '"stateStoreInfo":[{"storeName":"default","numColsPrefixKey":0,"numPartitions":4}]}'
    )
    assert [s.partition_columns for s in store_folders(plain)] == [2]  # the metadata says: every column
    limit = tmp_path / "state" / "3"
    _schema_file(limit / "0" / "_metadata" / "schema", [{"name": "key", "type": "null", "nullable": True}])
    assert [s.partition_columns for s in store_folders(limit)] == [0]  # a limit's state stays in partition 0


def test_a_query_started_before_spark_3_3_is_refused_before_any_state_is_read(tmp_path: Path):
    (tmp_path / "offsets").mkdir()
    conf = {"spark.sql.shuffle.partitions": "4", "spark.sql.streaming.statefulOperator.useStrictDistribution": "false"}
    (tmp_path / "offsets" / "5").write_text("v1\n" + json.dumps({"batchWatermarkMs": 0, "conf": conf}) + "\n{}")
    with pytest.raises(HdfsRescaleError, match="useStrictDistribution=false .* started before Spark 3.3"):
        rescale_working_folder(None, tmp_path, 5, 8)


def test_an_old_query_on_the_hdfs_store_is_refused_from_its_metadata_before_anything_is_read():
    from dataclasses import replace
    from types import SimpleNamespace

    from spark_checkpoint_runtime.rescale import RescaleRefused, check_rescalable
    from tests.support.helpers import checkpoint_metadata

    confs = {"spark.sql.shuffle.partitions": "4", "spark.sql.streaming.statefulOperator.useStrictDistribution": "false"}
    fingerprint = {"operators": [{"type": "aggregation", "key": ["key: string"]}], "pinned_confs": confs}
    source = SimpleNamespace(metadata=replace(checkpoint_metadata(3, []), fingerprint=fingerprint), url="file:///ck/j")
    with pytest.raises(RescaleRefused, match="useStrictDistribution=false .*started before Spark 3.3"):
        check_rescalable(source, 8)
    confs["spark.sql.streaming.statefulOperator.useStrictDistribution"] = "true"
    assert check_rescalable(source, 8) == 4
