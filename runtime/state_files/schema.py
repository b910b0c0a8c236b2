"""Spark's state schema files (``state/<op>/0/[<store>/]_metadata/schema``): the key and value schemas of a store.

Spark writes them with Java's ``DataOutput``: a version string (``v1``: the two schemas' JSON as strings;
``v2``: the JSON split in chunks, for schemas above 64 KiB), each string a ``writeUTF``.
"""

from __future__ import annotations

import json
import struct
from typing import Any


class StateSchemaError(ValueError):
    """A state schema file of a version or shape this runtime cannot read."""


def read_utf(data: bytes, position: int) -> tuple[str, int]:
    """Java's ``DataInput.readUTF``: a big-endian length, then modified UTF-8 (NUL as C0 80, CESU-8 pairs)."""
    (length,) = struct.unpack_from(">H", data, position)
    raw = data[position + 2 : position + 2 + length].replace(b"\xc0\x80", b"\x00")
    return raw.decode("utf-8", "surrogatepass").encode("utf-16", "surrogatepass").decode(
        "utf-16"
    ), position + 2 + length


def key_fields(data: bytes, where: str) -> list[dict[str, Any]]:
    """The key fields (schema JSON) of the state schema file ``data`` (read from ``where``)."""
    version, position = read_utf(data, 0)
    if version == "v1":
        text, _ = read_utf(data, position)
    elif version == "v2":
        (chunks,) = struct.unpack_from(">i", data, position)
        position += 4
        parts = []
        for _ in range(chunks):
            part, position = read_utf(data, position)
            parts.append(part)
        text = "".join(parts)
    else:
        raise StateSchemaError(f"{where} is a state schema file of version {version!r}, which cannot be read here")
    return list(json.loads(text)["fields"])


SINGLE_PARTITION_OPERATORS = frozenset({"globalLimit"})  # runs as one partition, whatever its key


def keyless(fields: list[dict[str, Any]]) -> bool:
    """Whether a key of these fields (schema JSON) has nothing to partition by: no columns (a global
    aggregation), or only NullType ones (a streaming limit's ``struct<key:void>``)."""
    return all(field.get("type") in ("null", "void") for field in fields)


def single_partition(fields: list[dict[str, Any]], operator_name: str | None, higher_partitions: bool) -> bool:
    """Whether a store keeps its state in partition 0 alone, whatever the partition count.

    So does a key with no columns (a global aggregation), and a streaming limit's. A NullType key of another
    operator is hashed like any key (to ``pmod(42, N)``), so a key of only NullType columns counts only for a
    limit: named by the operator metadata (Spark 4.0+), else (Spark 3.5) known by there being no partition folder
    above 0 (``higher_partitions`` False).
    """
    if not fields:
        return True
    if operator_name is not None:
        return operator_name in SINGLE_PARTITION_OPERATORS
    return keyless(fields) and not higher_partitions
