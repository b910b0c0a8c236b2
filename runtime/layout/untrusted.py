"""Reading JSON that anyone with write access to the store could have written.

Every reader of the format (``_metadata``, control requests and responses, run reports, heartbeats, lease
files) goes through ``read_json_object`` or ``parse_json_object``: the size is checked before the bytes are
read, and non-finite numbers (``NaN``, ``Infinity``, ``1e400``), integers beyond 64 bits, nesting deeper
than any file we write, and anything but a JSON object are refused with one line saying what was wrong.
Callers turn that into "damaged" or "rejected" and carry on with the rest.
"""

from __future__ import annotations

import json
import math
import re
from itertools import accumulate
from typing import Any

import fsspec
from fsspec.implementations.local import LocalFileSystem

from spark_checkpoint_runtime.layout.errors import CheckpointFormatError

MAX_DEPTH = 32  # our files nest a few levels; a deeper one is not ours
MAX_INT = 2**63 - 1


class UntrustedJson(CheckpointFormatError):
    """JSON from storage that is not a well-formed, reasonably sized JSON object; the message says why."""


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"non-finite number {name}")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"number {text[:40]} is out of range")
    return value


def _bounded_int(text: str) -> int:
    if len(text) > 20:
        raise ValueError(f"integer {text[:24]}... is out of range")
    value = int(text)
    if abs(value) > MAX_INT:
        raise ValueError(f"integer {text} is out of range")
    return value


def _depth(value: Any) -> int:
    """Nesting depth, without recursion (a hostile file must not exhaust the stack)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        deepest = max(deepest, level)
        if level > MAX_DEPTH:
            return level
        if isinstance(item, dict):
            stack.extend((v, level + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, level + 1) for v in item)
    return deepest


def parse_json_object(raw: bytes | str, *, what: str) -> dict[str, Any]:
    """Parse ``raw`` as a JSON object under the rules above; raise ``UntrustedJson`` naming ``what``."""
    try:
        text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
        # A bracket run deeper than MAX_DEPTH is refused before the parser recurses into it.
        brackets = _bracket_depth(text)
        if brackets > MAX_DEPTH:
            raise ValueError(f"nested deeper than {MAX_DEPTH} levels")
        data = json.loads(text, parse_constant=_refuse_constant, parse_float=_finite_float, parse_int=_bounded_int)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise UntrustedJson(f"{what} is not valid JSON we wrote: {exc}") from None
    if not isinstance(data, dict):
        raise UntrustedJson(f"{what} is not a JSON object")
    # Parsed JSON nests a value at most one level below its innermost bracket: only a file close to the limit
    # is walked (a walk of a large _metadata costs more than parsing it).
    if brackets >= MAX_DEPTH and _depth(data) > MAX_DEPTH:
        raise UntrustedJson(f"{what} is nested deeper than {MAX_DEPTH} levels")
    return data


# A JSON string (its escapes included; one left open runs to the end, so that every quote starts a match that
# succeeds: a hostile run of escaped quotes costs one pass, not one per quote), and anything not a bracket.
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*(?:"|\\?\Z)', re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_BRACKET_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


def _bracket_depth(text: str) -> int:
    """The deepest run of open brackets outside strings (a cheap pre-check, not a parser).

    Done with regular expressions and C iterators, not a loop over characters: ``_metadata`` at 200 partitions
    is a few hundred kilobytes, read after every checkpoint, and a loop in Python took longer than parsing it.
    """
    brackets = _NOT_BRACKET.sub("", _STRING.sub("", text))
    return max(accumulate(map(_BRACKET_STEP.__getitem__, brackets), initial=0))


READ_CHUNK = 1024 * 1024


def read_at_most(fs: fsspec.AbstractFileSystem, path: str, max_bytes: int) -> bytes:
    """The first ``max_bytes + 1`` bytes of ``path`` (one ranged GET on object storage, where a size check
    first would cost a HEAD more): more than ``max_bytes`` back means the file is too large.
    ``FileNotFoundError`` passes through.
    """
    if isinstance(fs, LocalFileSystem):
        # A local read of n bytes allocates n first: a 64 MiB cap would allocate 64 MiB for every small file.
        with fs.open(path, "rb") as handle:
            chunks, left = [], max_bytes + 1
            while left > 0 and (chunk := handle.read(min(READ_CHUNK, left))):
                chunks.append(chunk)
                left -= len(chunk)
            return b"".join(chunks)
    try:
        return fs.cat_file(path, start=0, end=max_bytes + 1)
    except FileNotFoundError:
        raise
    except OSError:
        if fs.size(path):  # S3 refuses a range of an empty object (InvalidRange); any other error stands
            raise
        return b""


def read_json_object(fs: fsspec.AbstractFileSystem, path: str, *, max_bytes: int, what: str) -> dict[str, Any]:
    """Read ``path`` (no more than ``max_bytes``) and parse it; ``FileNotFoundError`` passes through."""
    raw = read_at_most(fs, path, max_bytes)
    if len(raw) > max_bytes:
        raise UntrustedJson(f"{what} is larger than any we write (at most {max_bytes} bytes)")
    return parse_json_object(raw, what=what)


def int_field(data: dict[str, Any], key: str, *, default: int | None = None, minimum: int = 0) -> int:
    """``data[key]`` as an integer from ``minimum`` to 2**63-1 (not a bool, not a float); ``ValueError`` if not."""
    value = data.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= MAX_INT:
        raise ValueError(f"{key} must be an integer from {minimum}, not {value!r}")
    return value
