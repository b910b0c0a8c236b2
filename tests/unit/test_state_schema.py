"""Which stores keep their state in partition 0 alone (``state_files.schema.single_partition``), and the
timestamp_ntz text ``transform`` turns into Spark's stored microseconds."""

from __future__ import annotations

import pytest

from spark_checkpoint_runtime.state_files.schema import keyless, single_partition
from spark_checkpoint_runtime.transform_rows import TransformRefused, ntz_micros

VOID = {"name": "key", "type": "void", "nullable": True}
STRING = {"name": "key", "type": "string", "nullable": True}


def test_a_global_aggregation_and_a_limit_keep_partition_0_and_a_hashed_null_key_does_not():
    assert keyless([]) and keyless([VOID]) and not keyless([STRING])
    assert single_partition([], "stateStoreSave", higher_partitions=True)  # a global aggregation
    assert single_partition([VOID], "globalLimit", higher_partitions=True)
    # Another operator's NullType key is hashed like any key: its state is in pmod(42, N), not in partition 0.
    assert not single_partition([VOID], "symmetricHashJoin", higher_partitions=False)
    assert single_partition([STRING], "globalLimit", higher_partitions=True)  # named: a limit is one partition
    # Spark 3.5 names no operator: a NullType key with no partition folder above 0 is a limit's.
    assert single_partition([VOID], None, higher_partitions=False)
    assert not single_partition([VOID], None, higher_partitions=True)
    assert not single_partition([STRING], None, higher_partitions=False)


@pytest.mark.parametrize(
    ("text", "micros"),
    [
        ("2024-01-01 00:00:00.123456", 1_704_067_200_123_456),
        ("2024-01-01 00:00:00.5", 1_704_067_200_500_000),  # Spark trims the fraction's trailing zeros
        ("1970-01-01 00:00:00", 0),
        ("1969-12-31 23:59:59.999999", -1),
        ("1900-03-01 12:00:00", -2_203_848_000_000_000),
        ("0001-01-01 00:00:00", -62_135_596_800_000_000),
    ],
)
def test_a_timestamp_ntz_text_is_its_stored_microseconds(text, micros):
    assert ntz_micros(text) == micros


def test_a_timestamp_ntz_beyond_year_9999_is_refused():
    with pytest.raises(TransformRefused, match="outside years 1 to 9999"):
        ntz_micros("+10000-01-01 00:00:00")
