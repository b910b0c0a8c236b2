"""The function's rows of a ``transform`` in the form Spark stores them.

A state store finds a key by its exact ``UnsafeRow`` bytes, and Spark's shuffle sends it to a partition by the
hash of its values, so the rows a function returns are collected in ``key_partitioning.read_row``'s form (dates
and timestamps as the integers Spark stores, never through Python's zoned datetimes; strings as UTF-8 bytes;
decimals unscaled), keys normalised as the operator looks them up (-0.0 as 0.0), then written by
``unsafe_rows.write_row``: on the driver for the HDFS-backed store (``stored_records``), in a UDF for RocksDB
(``encoder``). ``counted_rows`` refuses what no store may hold: a null key or value, a key given twice.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import date
from decimal import Decimal, localcontext
from typing import Any

from spark_checkpoint_runtime.key_partitioning import _decimal_precision_scale, partition_of
from spark_checkpoint_runtime.spark_versions import DEDUPLICATION_NORMALISES_FLOATS
from spark_checkpoint_runtime.unsafe_rows import map_entries, type_name, write_row

DEDUPLICATION_OPERATORS = {"dedupe", "dedupeWithinWatermark"}
_NTZ_TEXT = re.compile(r"(\d{4})-(\d{2})-(\d{2}) (\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?")
_EPOCH_DAY = date(1970, 1, 1).toordinal()


class TransformRefused(ValueError):
    """The snapshot or the function's result cannot be written as asked (nothing was saved)."""


def encoder(fields: list[dict[str, Any]], normalise: bool) -> Any:
    """A UDF writing a collected raw struct (``raw_column``'s form) as Spark's ``UnsafeRow`` bytes."""
    from pyspark.sql import functions as F

    described = {"type": "struct", "fields": fields}

    def encode(value):  # no type hints: PySpark would read them as a pandas UDF's
        stored = stored_value(value, described)
        return write_row(normalised_key(stored, described) if normalise else stored, fields)

    return F.udf(encode, "binary")


def counted_rows(result: Any) -> int:
    """The result's number of rows; refuses a null key, a null value and a key returned twice. Spark finds
    them in one pass (an aggregation, not a set of every key in this process's memory); a second query names
    the offending key."""
    from pyspark.sql import functions as F

    per_key = result.groupBy("key").agg(
        F.count(F.lit(1)).alias("rows"), F.count_if(F.col("value").isNull()).alias("null_values")
    )
    totals = per_key.agg(
        F.sum("rows").alias("rows"),
        F.max("rows").alias("most"),
        F.sum("null_values").alias("null_values"),
        F.count_if(F.col("key").isNull()).alias("null_keys"),
    ).first()
    if totals["null_keys"]:
        raise TransformRefused("the function returned a row whose key is null")
    if totals["null_values"]:
        key = result.where(F.col("value").isNull()).select("key").first()["key"]
        raise TransformRefused(f"the function returned a null value for the key {key}: drop the row")
    if (totals["most"] or 0) > 1:
        key = per_key.where("rows > 1").select("key").first()["key"]
        raise TransformRefused(f"the function returned the key {key} more than once")
    return int(totals["rows"] or 0)


def normalises_float_keys(operator_name: str | None, running: tuple[int, int, int] | None) -> bool:
    """Whether the operator looks its keys up with -0.0 as 0.0 on this Spark, so a key must be stored so.

    Aggregations (session windows too), joins and the grouped-state operators normalise their keys on every
    Spark transform runs on; deduplication does from Spark 4.2 (measured: 4.0.5 and 4.1.4 keep -0.0 and 0.0
    apart, 4.2.0 and on do not). transformWithState does not: it keys its state by the grouping key's bytes as
    the batch's rows have them (measured on 4.3.0: 0.0 in one batch and -0.0 in the next are two keys, two
    counts), so its keys are written as the function gives them, which an identity keeps byte for byte.
    """
    if operator_name and operator_name.startswith("transformWithState"):
        return False
    if operator_name in DEDUPLICATION_OPERATORS:
        return running is not None and running[:2] >= DEDUPLICATION_NORMALISES_FLOATS
    return True


def normalised_key(value: Any, data_type: Any) -> Any:
    """A key value with each float or double -0.0 as 0.0, at any depth, as Spark's lookup has it (NaN is made
    canonical by ``write_row``, as by Spark's row writer)."""
    if value is None:
        return None
    name = type_name(data_type)
    if name == "struct":
        return [normalised_key(v, f["type"]) for v, f in zip(value, data_type["fields"], strict=True)]
    if name == "array":  # Spark normalises a grouping key's array element by element
        return [normalised_key(v, data_type["elementType"]) for v in value]
    if name in ("float", "double") and value == 0.0:
        return 0.0
    return value


def raw_column(column: Any, data_type: Any) -> Any:
    """``column`` with dates as days and timestamps (with and without time zone) as microseconds (the stored
    integers), at any depth: Python's datetime would pass through the local time zone and could shift a key's
    bytes."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import ArrayType, DateType, MapType, StructType, TimestampNTZType, TimestampType

    if isinstance(data_type, TimestampType):
        return F.unix_micros(column)
    if isinstance(data_type, TimestampNTZType):  # its wall-clock text: every Spark function on it takes a zone
        return column.cast("string")
    if isinstance(data_type, DateType):
        return F.unix_date(column)
    if isinstance(data_type, StructType):
        inner = [raw_column(column.getField(f.name), f.dataType).alias(f.name) for f in data_type.fields]
        return F.when(column.isNotNull(), F.struct(*inner))
    if isinstance(data_type, ArrayType):
        return F.transform(column, lambda element: raw_column(element, data_type.elementType))
    if isinstance(data_type, MapType):  # its entries in stored order (collected as a dict, a map loses it)
        return F.transform(
            F.map_entries(column),
            lambda entry: F.struct(
                raw_column(entry["key"], data_type.keyType).alias("key"),
                raw_column(entry["value"], data_type.valueType).alias("value"),
            ),
        )
    return column


def stored_value(value: Any, data_type: Any) -> Any:
    """A collected raw value in ``read_row``'s form, which ``write_row`` writes and ``partition_of`` hashes
    (strings as UTF-8 bytes, decimals as unscaled integers)."""
    if value is None:
        return None
    name = type_name(data_type)
    if name == "struct":
        return [stored_value(v, f["type"]) for v, f in zip(value, data_type["fields"], strict=True)]
    if name == "array":
        return [stored_value(v, data_type["elementType"]) for v in value]
    if name == "map":  # raw_column's entries, or a dict
        return [
            (stored_value(k, data_type["keyType"]), stored_value(v, data_type["valueType"]))
            for k, v in map_entries(value)
        ]
    if name.startswith("decimal"):
        _, scale = _decimal_precision_scale(name)
        with localcontext() as exact:
            exact.prec = 100  # the default 28 digits would round a decimal(38, s) silently
            unscaled = Decimal(value).scaleb(scale)
        if unscaled != unscaled.to_integral_value():
            raise TransformRefused(f"the decimal {value} does not fit the state's {name}")
        return int(unscaled)
    if name == "timestamp_ntz":
        return ntz_micros(value)
    if isinstance(value, str):
        return value.encode("utf-8")  # read_row's form: hashed, and written, as its UTF-8 bytes
    if isinstance(value, bytearray):
        return bytes(value)
    return value


def ntz_micros(text: str) -> int:
    """A timestamp_ntz's stored microseconds from its wall-clock text (Spark's cast to string, the fraction's
    trailing zeros trimmed): counted from 1970-01-01 00:00 with no zone involved."""
    match = _NTZ_TEXT.fullmatch(text)
    try:
        if match is None:
            raise ValueError(text)
        year, month, day, hour, minute, second, fraction = match.groups()
        days = date(int(year), int(month), int(day)).toordinal() - _EPOCH_DAY
    except ValueError:
        raise TransformRefused(f"the timestamp_ntz {text!r} is outside years 1 to 9999, which it can write") from None
    seconds = ((days * 24 + int(hour)) * 60 + int(minute)) * 60 + int(second)
    return seconds * 1_000_000 + int((fraction or "").ljust(6, "0")[:6])


def stored_records(
    result: Any,
    key_fields: list[dict[str, Any]],
    value_fields: list[dict[str, Any]],
    columns: int,
    partitions: int,
    normalise: bool = True,
) -> Iterator[tuple[int, bytes, bytes]]:
    """Each result row (``counted_rows`` checked) as (partition, key bytes, value bytes).

    With ``normalise`` a key's -0.0 is written (and hashed) as 0.0: a function computing -0.0 would otherwise
    write a key the operator never finds, and the restored run would start that key from empty state.
    """
    key_type = {"type": "struct", "fields": key_fields}
    value_type = {"type": "struct", "fields": value_fields}
    raw = result.select(
        raw_column(result["key"], result.schema["key"].dataType).alias("key"),
        raw_column(result["value"], result.schema["value"].dataType).alias("value"),
    )
    types = [field["type"] for field in key_fields[:columns]]
    for row in raw.toLocalIterator():
        if row["key"] is None or row["value"] is None:  # counted out before; a function that is not deterministic
            raise TransformRefused("the function returned a null key or value on a second reading; nothing was saved")
        key = stored_value(row["key"], key_type)
        if normalise:
            key = normalised_key(key, key_type)
        value = stored_value(row["value"], value_type)
        # No key columns (a global aggregation): Spark keeps that state in partition 0.
        target = partition_of(key[:columns], types, partitions) if columns else 0
        yield target, write_row(key, key_fields), write_row(value, value_fields)
