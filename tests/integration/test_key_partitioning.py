"""The partition a state key belongs to, computed from its decoded columns, is the one Spark's own hash gives.

``key_partitioning`` reproduces ``pmod(Murmur3Hash(columns, 42), N)``, HashPartitioning's partition id; here
each type a state key can hold is checked against Spark's ``hash()`` (the same function and seed) in the
shared session, alone and in combinations, including nulls, negative zero and multi-byte strings.
"""

from __future__ import annotations

import pytest

from spark_checkpoint_runtime.key_partitioning import SEED, hash_bytes, partition_of

pytestmark = pytest.mark.spark

# (Spark SQL literal, the value as the state key stores it, its type in schema JSON)
CASES = [
    ("CAST(1 AS INT)", 1, "integer"),
    ("CAST(-1 AS INT)", -1, "integer"),
    ("CAST(2147483647 AS INT)", 2147483647, "integer"),
    ("CAST(-2147483648 AS INT)", -2147483648, "integer"),
    ("CAST(7 AS TINYINT)", 7, "byte"),
    ("CAST(-300 AS SMALLINT)", -300, "short"),
    ("CAST(1099511627776 AS BIGINT)", 1099511627776, "long"),
    ("CAST(-5 AS BIGINT)", -5, "long"),
    ("true", True, "boolean"),
    ("false", False, "boolean"),
    ("CAST(1.5 AS DOUBLE)", 1.5, "double"),
    ("CAST(-0.0 AS DOUBLE)", -0.0, "double"),
    ("CAST(0.0 AS DOUBLE)", 0.0, "double"),
    ("CAST(-2.25 AS FLOAT)", -2.25, "float"),
    ("CAST(-0.0 AS FLOAT)", -0.0, "float"),
    ("''", b"", "string"),
    ("'a'", b"a", "string"),
    ("'abc'", b"abc", "string"),
    ("'abcd'", b"abcd", "string"),
    ("'abcde'", b"abcde", "string"),
    ("'key-17'", b"key-17", "string"),
    ("'d\u00e9j\u00e0 \u65e5\u672c'", "d\u00e9j\u00e0 \u65e5\u672c".encode(), "string"),
    ("X'00FF10'", b"\x00\xff\x10", "binary"),
    ("DATE'2026-11-27'", 20784, "date"),
    ("TIMESTAMP'2026-11-27 10:00:00 UTC'", 1_795_773_600_000_000, "timestamp"),
    ("CAST(12.34 AS DECIMAL(10,2))", 1234, "decimal(10,2)"),
    ("CAST(-12.34 AS DECIMAL(10,2))", -1234, "decimal(10,2)"),
    ("CAST(123456789012345678901234.5 AS DECIMAL(38,1))", 1234567890123456789012345, "decimal(38,1)"),
    ("CAST(-1 AS DECIMAL(38,0))", -1, "decimal(38,0)"),
    ("CAST(-128 AS DECIMAL(38,0))", -128, "decimal(38,0)"),
    ("CAST(-32768 AS DECIMAL(38,0))", -32768, "decimal(38,0)"),
    ("CAST(128 AS DECIMAL(38,0))", 128, "decimal(38,0)"),
    ("CAST('NaN' AS DOUBLE)", float("nan"), "double"),
    ("CAST(NULL AS STRING)", None, "string"),
]
WINDOW = {
    "type": "struct",
    "fields": [
        {"name": "start", "type": "timestamp", "nullable": True, "metadata": {}},
        {"name": "end", "type": "timestamp", "nullable": True, "metadata": {}},
    ],
}


def _spark_hash(spark, *literals: str) -> int:
    return spark.sql(f"SELECT hash({', '.join(literals)}) AS h").first()["h"]


def _signed(value: int) -> int:
    return value - (1 << 32) if value & 0x80000000 else value


@pytest.mark.parametrize(("literal", "value", "data_type"), CASES, ids=[case[0][:40] for case in CASES])
def test_each_type_hashes_as_spark_does(spark, literal, value, data_type):
    expected = _spark_hash(spark, literal)
    for partitions in (3, 8, 200):
        assert partition_of([value], [data_type], partitions) == expected % partitions


def test_columns_hash_in_order_and_a_struct_hashes_as_its_fields(spark):
    literals = [case[0] for case in CASES[:12]]
    values = [case[1] for case in CASES[:12]]
    types = [case[2] for case in CASES[:12]]
    expected = _spark_hash(spark, *literals)
    assert partition_of(values, types, 2**31 - 1) == expected % (2**31 - 1)
    window = "named_struct('start', TIMESTAMP'2026-11-27 10:00:00 UTC', 'end', TIMESTAMP'2026-11-27 10:05:00 UTC')"
    expected = _spark_hash(spark, window, "'key-3'")
    start = 1_795_773_600_000_000
    assert partition_of([[start, start + 300_000_000], b"key-3"], [WINDOW, "string"], 7) == expected % 7


def test_the_byte_hash_is_sparks_own_variant_not_reference_murmur3():
    # Reference Murmur3 x86_32 of b"abcde" with seed 42 differs: Spark mixes each trailing byte as a word.
    assert _signed(hash_bytes(b"abcde", SEED)) != 0
    assert hash_bytes(b"abcd", SEED) != hash_bytes(b"abcd\x00", SEED)


ARRAY_CASES = [
    ("array(1, NULL, 3)", [1, None, 3], {"type": "array", "elementType": "integer", "containsNull": True}),
    ("array('a', 'bcd')", [b"a", b"bcd"], {"type": "array", "elementType": "string", "containsNull": True}),
    ("array(-0.0D, 1.5D)", [-0.0, 1.5], {"type": "array", "elementType": "double", "containsNull": False}),
    ("CAST(array() AS ARRAY<INT>)", [], {"type": "array", "elementType": "integer", "containsNull": False}),
    (
        "array(array(1L), NULL, array(2L, 3L))",
        [[1], None, [2, 3]],
        {"type": "array", "elementType": {"type": "array", "elementType": "long", "containsNull": False}},
    ),
]


@pytest.mark.parametrize(("literal", "value", "data_type"), ARRAY_CASES, ids=[case[0][:40] for case in ARRAY_CASES])
def test_arrays_hash_element_by_element_as_spark_does(spark, literal, value, data_type):
    expected = _spark_hash(spark, literal, "'after'")  # the hash goes on from the array's to the next column
    assert partition_of([value, b"after"], [data_type, "string"], 2**31 - 1) == expected % (2**31 - 1)
