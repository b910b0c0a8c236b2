"""Durations and byte sizes as people write and read them.

Durations follow Flink's syntax (``500ms``, ``10s``, ``1min``, ``2 h``, ``1d``); a bare number is
milliseconds, as in Flink. Values are returned in seconds (float).
"""

from __future__ import annotations

import re

_UNITS: dict[str, float] = {
    "ns": 1e-9,
    "nano": 1e-9,
    "nanos": 1e-9,
    "nanosecond": 1e-9,
    "nanoseconds": 1e-9,
    "us": 1e-6,
    "micro": 1e-6,
    "micros": 1e-6,
    "microsecond": 1e-6,
    "microseconds": 1e-6,
    "ms": 1e-3,
    "milli": 1e-3,
    "millis": 1e-3,
    "millisecond": 1e-3,
    "milliseconds": 1e-3,
    "s": 1.0,
    "sec": 1.0,
    "secs": 1.0,
    "second": 1.0,
    "seconds": 1.0,
    "m": 60.0,
    "min": 60.0,
    "mins": 60.0,
    "minute": 60.0,
    "minutes": 60.0,
    "h": 3600.0,
    "hour": 3600.0,
    "hours": 3600.0,
    "d": 86400.0,
    "day": 86400.0,
    "days": 86400.0,
}

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$")


def parse_duration(text: str | int | float, *, name: str = "duration") -> float:
    """Parse ``text`` into seconds. Raises ``ValueError`` naming ``name`` and the accepted forms."""
    if isinstance(text, bool):
        raise ValueError(f"{name}: {text!r} is not a duration; use forms like 500ms, 10s, 1min")
    if isinstance(text, int | float):
        if text < 0:
            raise ValueError(f"{name}: {text!r} is negative; durations must be >= 0")
        return float(text) / 1000.0
    match = _DURATION.match(str(text))
    if not match:
        raise ValueError(f"{name}: {text!r} is not a duration; use forms like 500ms, 10s, 1min")
    number, unit = match.groups()
    unit = unit.lower() or "ms"
    if unit not in _UNITS:
        raise ValueError(
            f"{name}: {text!r} has an unknown unit {unit!r}; use ms, s, min, h or d (e.g. 500ms, 10s, 1min)"
        )
    return float(number) * _UNITS[unit]


def format_duration(seconds: float) -> str:
    """Render seconds compactly for logs: ``850ms``, ``12.3s``, ``4min 05s``."""
    if seconds < 1:
        return f"{seconds * 1000:.0f}ms"
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, rest = divmod(int(seconds), 60)
    return f"{minutes}min {rest:02d}s"


def format_bytes(size: int) -> str:
    """Render a byte count with a binary unit: ``512 B``, ``1.2 KiB``, ``3.4 MiB``."""
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{int(value)} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")
