"""Writing Spark's ``UnsafeRow`` bytes from values: the inverse of ``key_partitioning.read_row``.

A state store keys its state by the exact bytes of the key's ``UnsafeRow`` (the HDFS-backed store's map
compares rows byte for byte), so a key written here must be the very bytes Spark's ``UnsafeProjection``
writes for it, or the next batch would not find it and would count the key from zero beside it. The layout
(``UnsafeRowWriter``): a null bitset of 64-bit words; one 8-byte little-endian slot per field, zeroed before
a narrower value is written; a variable-length region where each string, binary, large decimal or nested
struct starts at an 8-byte boundary, zero-padded, its slot holding ``offset << 32 | size`` (the offset from
the row's start). A null field sets its bit and zeroes its slot, but a decimal above 18 digits keeps its 16
reserved bytes and its offset (Spark reserves them so the value can be set in place). Tests check the bytes
against the state files Spark wrote.

Values come in ``read_row``'s form: integers for the integral types, dates (days), timestamps (microseconds)
and decimals of up to 18 digits (unscaled); ``bytes`` (or ``str``, written as UTF-8) for strings and
binaries; an unscaled integer or ``BigInteger.toByteArray()`` bytes for larger decimals; a sequence for a
struct; None for null.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any

from spark_checkpoint_runtime.key_partitioning import (
    MAX_LONG_DIGITS,
    UnsupportedKeyType,
    _decimal_precision_scale,
    java_big_integer_bytes,
)

_CANONICAL_NAN = float("nan")  # 0x7ff8000000000000 as a double, 0x7fc00000 as a float: Java's NaN
LARGE_DECIMAL_BYTES = 16  # what Spark reserves for a decimal above 18 digits (at most 38 digits fit)
_FIXED = {
    "boolean": "<?",
    "byte": "<b",
    "short": "<h",
    "integer": "<i",
    "date": "<i",
    "float": "<f",
    "long": "<q",
    "timestamp": "<q",
    "timestamp_ntz": "<q",
    "double": "<d",
}


def type_name(data_type: Any) -> str:
    """The name of a Spark type in the schema's JSON form (``"long"``, ``"decimal(10,2)"``, ``"struct"``)."""
    return data_type if isinstance(data_type, str) else str(data_type.get("type"))


def _padded(data: bytes) -> bytes:
    return data + b"\0" * (-len(data) % 8)


def write_row(values: Sequence[Any], fields: Sequence[dict[str, Any]]) -> bytes:
    """The ``UnsafeRow`` bytes of ``values`` for a struct's ``fields`` (the schema's JSON form)."""
    if len(values) != len(fields):
        raise ValueError(f"a row of {len(fields)} fields was given {len(values)} values")
    count = len(fields)
    bitset = bytearray(((count + 63) // 64) * 8)
    slots = bytearray(8 * count)
    fixed_size = len(bitset) + len(slots)
    variable = bytearray()
    for index, (value, field) in enumerate(zip(values, fields, strict=True)):
        data_type = field["type"]
        name = type_name(data_type)
        slot = index * 8
        large_decimal = name.startswith("decimal") and _decimal_precision_scale(name)[0] > MAX_LONG_DIGITS
        if value is None or name in ("null", "void"):  # NullType ("void" in its JSON since Spark 3.5)
            bitset[index // 8] |= 1 << (index % 8)
            if large_decimal:  # its reserved bytes and offset stay, as Spark writes a null one
                struct.pack_into("<Q", slots, slot, (fixed_size + len(variable)) << 32)
                variable += bytes(LARGE_DECIMAL_BYTES)
            continue
        if name in _FIXED:
            if name in ("float", "double") and value != value:
                value = _CANONICAL_NAN  # Spark's row writer stores every NaN as Java's one NaN
            struct.pack_into(_FIXED[name], slots, slot, value)
            continue
        if name.startswith("decimal") and not large_decimal:
            struct.pack_into("<q", slots, slot, int(value))
            continue
        if name in ("string", "binary"):
            data = value.encode("utf-8") if isinstance(value, str) else bytes(value)
            stored = _padded(data)
        elif large_decimal:
            data = bytes(value) if isinstance(value, bytes | bytearray) else java_big_integer_bytes(int(value))
            if len(data) > LARGE_DECIMAL_BYTES:
                raise ValueError(f"a {name} value needs {len(data)} bytes; Spark stores at most 16")
            stored = data + bytes(LARGE_DECIMAL_BYTES - len(data))
        elif name == "struct":
            data = write_row(value, data_type["fields"])
            stored = data
        else:
            raise UnsupportedKeyType(f"a state column of type {name!r} cannot be written here")
        struct.pack_into("<Q", slots, slot, ((fixed_size + len(variable)) << 32) | len(data))
        variable += stored
    return bytes(bitset) + bytes(slots) + bytes(variable)
