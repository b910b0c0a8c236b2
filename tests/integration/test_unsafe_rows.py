"""``unsafe_rows.write_row`` writes the very bytes Spark's ``UnsafeProjection`` writes: a state key is found by
its bytes, so a transform's keys must match Spark's to the byte. Spark's own rows are the reference."""

from __future__ import annotations

import json
import struct

import pytest

from spark_checkpoint_runtime.key_partitioning import read_row
from spark_checkpoint_runtime.unsafe_rows import write_row

pytestmark = pytest.mark.spark

ROWS = [
    "1 AS i, -7L AS l, CAST(-3 AS TINYINT) AS b, CAST(300 AS SMALLINT) AS s, true AS t, false AS f",
    "'' AS empty, 'héllo' AS short, repeat('ab', 37) AS long, X'0102' AS bin, CAST(NULL AS STRING) AS nothing",
    "CAST(2.5 AS FLOAT) AS f, CAST('NaN' AS DOUBLE) AS nan, -0.0D AS neg_zero, DATE'1960-02-02' AS before_epoch",
    "TIMESTAMP'2024-01-01 00:00:00.123456' AS ts, CAST(NULL AS TIMESTAMP) AS no_ts",
    "CAST(-12.34 AS DECIMAL(10,2)) AS small, CAST(12345678901234567890.12 AS DECIMAL(30,2)) AS large, "
    "CAST(NULL AS DECIMAL(30,2)) AS no_large, CAST(-1 AS DECIMAL(38,0)) AS minus_one",
    "named_struct('start', TIMESTAMP'2024-01-01 00:00:00', 'end', CAST(NULL AS TIMESTAMP)) AS window, "
    "named_struct('a', named_struct('b', 'deep', 'c', 1)) AS nested, CAST(NULL AS STRUCT<x: INT>) AS no_struct",
    ", ".join(f"{n} AS c{n}" if n % 3 else f"CAST(NULL AS INT) AS c{n}" for n in range(70)),  # two bitset words
    "CAST(NULL AS VOID) AS dummy",
    # A NaN with its sign bit set (the negation of a NaN): Spark's row writer stores Java's one NaN.
    "-CAST('NaN' AS DOUBLE) AS neg_nan, -CAST('NaN' AS FLOAT) AS neg_float_nan",
    # Arrays: primitive elements in their own size (padded to 8 bytes), others by offset from the array's start.
    "array(1, NULL, 3) AS ints, array(true, false, NULL) AS bools, CAST(array(1, 2, 3) AS ARRAY<TINYINT>) AS tiny, "
    "CAST(array(-1, 2) AS ARRAY<SMALLINT>) AS shorts, array(2.5D, -0.0D) AS doubles, array(CAST(1 AS FLOAT)) AS f",
    "array('a', NULL, repeat('x', 20)) AS strings, array(CAST(1.5 AS DECIMAL(30,2)), NULL) AS large_decimals, "
    "array(CAST(1.5 AS DECIMAL(10,2)), NULL) AS small_decimals, array(DATE'1960-01-01', NULL) AS dates, "
    "array(TIMESTAMP'2024-01-01 00:00:00') AS timestamps, array(X'01') AS binaries",
    "array(named_struct('a', 1, 's', 'x'), NULL) AS structs, array(array(1, 2), NULL, array()) AS nested, "
    "CAST(array() AS ARRAY<STRING>) AS empty, CAST(NULL AS ARRAY<INT>) AS no_array, array(NULL) AS voids",
    "transform(sequence(1, 70), x -> IF(x % 3 = 0, NULL, x)) AS seventy",  # two words of the array's bitset
    # Maps: the key array's size, the key array, the value array.
    "map('a', 1, 'b', NULL) AS m, map(1, array('x', NULL)) AS map_of_arrays, CAST(NULL AS MAP<STRING, INT>) AS none, "
    "map() AS empty_map, map(named_struct('k', 1), map('x', 2.5D)) AS nested_map",
]


@pytest.mark.parametrize("columns", ROWS, ids=lambda text: text.split(" AS ")[-1].split(",")[0][:20])
def test_rows_written_from_their_values_are_sparks_bytes(spark, columns):
    found = spark.sql(f"SELECT {columns}")
    stored = found._jdf.queryExecution().toRdd().first()  # the row as Spark's projection wrote it
    assert stored.getClass().getSimpleName() == "UnsafeRow"
    data = bytes(stored.getBytes())
    fields = json.loads(found.schema.json())["fields"]
    values = read_row(data, fields)
    assert write_row(values, fields) == data


def test_a_nan_is_written_as_javas_one_nan_whatever_its_bits(spark):
    found = spark.sql("SELECT CAST('NaN' AS DOUBLE) AS d, CAST('NaN' AS FLOAT) AS f")
    data = bytes(found._jdf.queryExecution().toRdd().first().getBytes())
    fields = json.loads(found.schema.json())["fields"]
    negative = struct.unpack("<d", bytes.fromhex("010000000000f8ff"))[0]  # a payload and the sign bit
    assert write_row([negative, negative], fields) == data


def test_strings_and_large_decimals_are_taken_as_python_values_too(spark):
    found = spark.sql("SELECT 'naïve' AS s, CAST(-98765432109876543210 AS DECIMAL(25,0)) AS d")
    data = bytes(found._jdf.queryExecution().toRdd().first().getBytes())
    fields = json.loads(found.schema.json())["fields"]
    assert write_row(["naïve", -98765432109876543210], fields) == data


def test_values_collected_from_spark_are_written_as_sparks_bytes(spark):
    """The transform's path: a row collected to Python (a Decimal, a str, a nested Row) becomes the bytes Spark
    wrote for it, even for a decimal of 38 digits (Python's default decimal context holds 28)."""
    from spark_checkpoint_runtime.transform_rows import stored_value

    found = spark.sql(
        "SELECT CAST('12345678901234567890123456789012.345678' AS DECIMAL(38,6)) AS d, "
        "CAST('-99999999999999999999999999999999999999' AS DECIMAL(38,0)) AS lowest, "
        "named_struct('name', 'ünï', 'amount', CAST(12.5 AS DECIMAL(10,2))) AS nested"
    )
    data = bytes(found._jdf.queryExecution().toRdd().first().getBytes())
    fields = json.loads(found.schema.json())["fields"]
    (row,) = found.collect()
    assert write_row(stored_value(row, {"type": "struct", "fields": fields}), fields) == data


def test_dates_and_timestamps_collected_in_any_time_zone_are_written_as_sparks_bytes(spark):
    """Dates and timestamps, with and without time zone, reach Python as the integers Spark stores, never as
    datetimes (which pass through the local zone): the bytes do not depend on the session's time zone."""
    from spark_checkpoint_runtime.transform_rows import raw_column, stored_value

    found = spark.sql(
        "SELECT TIMESTAMP_NTZ'2024-03-10 02:30:00.123456' AS ntz, TIMESTAMP_NTZ'1900-03-01 12:00:00' AS old_ntz, "
        "TIMESTAMP_NTZ'2024-01-01 00:00:00.5' AS half, TIMESTAMP_NTZ'0999-12-31 23:59:59.12' AS year_999, "
        "TIMESTAMP'2024-03-10 10:30:00.5' AS ts, DATE'1969-12-31' AS d, "
        "named_struct('at', TIMESTAMP_NTZ'2000-01-01 00:00:00', 'n', 1) AS nested"
    )
    data = bytes(found._jdf.queryExecution().toRdd().first().getBytes())
    fields = json.loads(found.schema.json())["fields"]
    zone = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", "America/Los_Angeles")  # 2024-03-10 02:30 does not exist there
    try:
        raw = found.select(*[raw_column(found[f.name], f.dataType).alias(f.name) for f in found.schema.fields])
        (row,) = raw.collect()
    finally:
        spark.conf.set("spark.sql.session.timeZone", zone)
    assert write_row(stored_value(row, {"type": "struct", "fields": fields}), fields) == data


def test_arrays_and_maps_collected_from_spark_are_written_as_sparks_bytes(spark):
    """The transform's path for arrays and maps: collected through ``raw_column`` (a map as its entries, in stored
    order; dates and timestamps inside as integers) and written as the bytes Spark wrote, element sizes of 1, 2,
    4 and 8 bytes, floats, nested structs and arrays included."""
    from spark_checkpoint_runtime.transform_rows import raw_column, stored_value

    found = spark.sql(
        "SELECT array(DATE'1969-12-31', NULL) AS dates, array(TIMESTAMP_NTZ'2024-01-01 00:00:00.5') AS ntz, "
        "CAST(array(1, -2) AS ARRAY<SMALLINT>) AS shorts, CAST(array(1) AS ARRAY<TINYINT>) AS tiny, "
        "array(true) AS bools, array(CAST(2.5 AS FLOAT), CAST('NaN' AS FLOAT)) AS floats, "
        "map('z', named_struct('at', TIMESTAMP'2024-01-01 00:00:00', 'd', CAST(1.25 AS DECIMAL(30,2))), "
        "'a', NULL) AS unsorted, array(array('x'), NULL) AS nested, "
        "map(DATE'2020-02-02', array(1.5D, -0.0D)) AS dated"
    )
    data = bytes(found._jdf.queryExecution().toRdd().first().getBytes())
    fields = json.loads(found.schema.json())["fields"]
    raw = found.select(*[raw_column(found[f.name], f.dataType).alias(f.name) for f in found.schema.fields])
    (row,) = raw.collect()
    assert write_row(stored_value(row, {"type": "struct", "fields": fields}), fields) == data
