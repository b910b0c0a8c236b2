"""Writing Spark's ``UnsafeRow`` bytes from values: the inverse of ``key_partitioning.read_row``.

A state store keys its state by the exact bytes of the key's ``UnsafeRow`` (the HDFS-backed store's map
compares rows byte for byte), so a key written here must be the very bytes Spark's ``UnsafeProjection``
writes for it, or the next batch would not find it and would count the key from zero beside it. The layout
(``UnsafeRowWriter``): a null bitset of 64-bit words; one 8-byte little-endian slot per field, zeroed before
a narrower value is written; a variable-length region where each string, binary, large decimal or nested
struct, array or map starts at an 8-byte boundary, zero-padded, its slot holding ``offset << 32 | size`` (the
offset from the row's start); arrays (``write_array``) and maps (``write_map``) have layouts of their own. A
null field sets its bit and zeroes its slot, but a decimal above 18 digits keeps its 16 reserved bytes and its
offset (Spark reserves them so the value can be set in place). Tests check the bytes against the rows Spark's
projection writes.

Values come in ``read_row``'s form: integers for the integral types, dates (days), timestamps (microseconds)
and decimals of up to 18 digits (unscaled); ``bytes`` (or ``str``, written as UTF-8) for strings and
binaries; an unscaled integer or ``BigInteger.toByteArray()`` bytes for larger decimals; a sequence for a
struct or an array; (key, value) pairs or a dict for a map; None for null.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any

from spark_checkpoint_runtime.key_partitioning import (
    MAX_LONG_DIGITS,
    UnsupportedKeyType,
    _decimal_precision_scale,
    element_width,
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
    variable = _write_values(values, [field["type"] for field in fields], bitset, 0, slots, 8, in_row=True)
    return bytes(bitset) + bytes(slots) + bytes(variable)


def write_array(values: Sequence[Any], element_type: Any) -> bytes:
    """The ``UnsafeArrayData`` bytes of ``values`` (``UnsafeArrayWriter``): the element count as 8 bytes, a null
    bitset of 64-bit words, each element in ``element_width`` bytes (a primitive's size, else an 8-byte slot),
    zero-padded to 8 bytes, then the variable-length region, offsets counted from the array's start."""
    count = len(values)
    header = bytearray(8 + ((count + 63) // 64) * 8)
    struct.pack_into("<q", header, 0, count)
    width = element_width(element_type)
    slots = bytearray(_padded_size(width * count))
    variable = _write_values(values, [element_type] * count, header, 8, slots, width, in_row=False)
    return bytes(header) + bytes(slots) + bytes(variable)


def write_map(entries: Any, data_type: dict[str, Any]) -> bytes:
    """The ``UnsafeMapData`` bytes of a map's entries (pairs, or a dict): the key array's size as 8 bytes, the
    key array, the value array."""
    pairs = map_entries(entries)
    keys = write_array([key for key, _ in pairs], data_type["keyType"])
    items = write_array([item for _, item in pairs], data_type["valueType"])
    return struct.pack("<q", len(keys)) + keys + items


def map_entries(value: Any) -> list[tuple[Any, Any]]:
    """A map's (key, value) pairs in order: ``read_row`` gives pairs, a caller may give a dict."""
    return list(value.items()) if isinstance(value, dict) else [(key, item) for key, item in value]


def _padded_size(size: int) -> int:
    return size + (-size % 8)


def _write_values(
    values: Sequence[Any],
    types: Sequence[Any],
    bitset: bytearray,
    bitset_start: int,
    slots: bytearray,
    width: int,
    in_row: bool,
) -> bytearray:
    """Fill ``slots`` (and the null bits) with ``values``; the variable-length region that follows them.

    A slot is ``width`` bytes (8 in a row); a variable-length value's slot holds ``offset << 32 | size``,
    its offset counted from the start of the row or array (``bitset`` begins it)."""
    fixed_size = len(bitset) + len(slots)
    variable = bytearray()
    for index, (value, data_type) in enumerate(zip(values, types, strict=True)):
        name = type_name(data_type)
        slot = index * width
        large_decimal = name.startswith("decimal") and _decimal_precision_scale(name)[0] > MAX_LONG_DIGITS
        if value is None or name in ("null", "void"):  # NullType ("void" in its JSON since Spark 3.5)
            bitset[bitset_start + index // 8] |= 1 << (index % 8)
            if large_decimal and in_row:  # its reserved bytes and offset stay, as Spark writes a null one
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
            # A row reserves 16 bytes (the value may be set in place); an array pads the bytes to a word.
            stored = data + bytes(LARGE_DECIMAL_BYTES - len(data)) if in_row else _padded(data)
        elif name == "struct":
            data = stored = write_row(value, data_type["fields"])
        elif name == "array":
            data = stored = write_array(value, data_type["elementType"])
        elif name == "map":
            data = stored = write_map(value, data_type)
        else:
            raise UnsupportedKeyType(f"a state column of type {name!r} cannot be written here")
        struct.pack_into("<Q", slots, slot, ((fixed_size + len(variable)) << 32) | len(data))
        variable += stored
    return variable
