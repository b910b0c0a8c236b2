"""Durations at the Airflow boundary, as DAG authors write them.

Airflow users write ``timeout=300`` meaning seconds, or a ``timedelta``. The runtime follows Flink, where a
bare number is milliseconds. Every duration argument of this provider's operators, sensors and triggers (the
sensors' inherited ``timeout`` and ``poke_interval`` too) goes through ``to_seconds``, which takes a
``timedelta``, a number of seconds (also as a rendered template, ``"300"``), or a string with a unit
(``"500ms"``, ``"10s"``, ``"5min"``, ``"1h"``, ``"7d"``); ``for_runtime`` passes it on to the runtime with an
explicit unit, so nothing is read in milliseconds by accident. (``execution_timeout`` and ``retry_delay`` are
Airflow's own and stay ``timedelta``.)
"""

from __future__ import annotations

import math
import re
from datetime import timedelta
from typing import Any

from spark_checkpoint_runtime.durations import parse_duration

Duration = timedelta | int | float | str

_PLAIN_NUMBER = re.compile(r"^\s*\d+(\.\d+)?\s*$")


def to_seconds(value: Duration, *, name: str) -> float:
    """``value`` in seconds; ``ValueError`` naming ``name`` and the accepted forms when it is not a duration."""
    if isinstance(value, timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, bool):
        raise ValueError(f"{name}: {value!r} is not a duration; pass seconds, a timedelta, or e.g. '10s', '5min'")
    elif isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str) and _PLAIN_NUMBER.match(value):
        seconds = float(value)
    else:
        seconds = parse_duration(str(value), name=name)
    if not math.isfinite(seconds) or seconds < 0:
        raise ValueError(f"{name}: {value!r} must be a duration of zero or more seconds")
    return seconds


def optional_seconds(value: Duration | None, *, name: str) -> float | None:
    """``to_seconds``, with None or an empty rendered template meaning "not set"."""
    return None if value is None or value == "" else to_seconds(value, name=name)


def sensor_durations(kwargs: dict[str, Any]) -> dict[str, Any]:
    """A sensor's keyword arguments with Airflow's own durations (``timeout``, ``poke_interval``) in seconds,
    also where they come from ``default_args``, so that they too take ``"5min"``, not only a number or a
    ``timedelta``."""

    def converted(values: dict[str, Any]) -> dict[str, Any]:
        return {
            key: to_seconds(value, name=key) if key in ("timeout", "poke_interval") and value is not None else value
            for key, value in values.items()
        }

    kwargs = converted(kwargs)
    if isinstance(kwargs.get("default_args"), dict):
        kwargs["default_args"] = converted(kwargs["default_args"])
    return kwargs


def for_runtime(value: Duration, *, name: str) -> str:
    """The runtime's spelling of a duration: seconds with an explicit unit (``"300s"``)."""
    return f"{to_seconds(value, name=name):g}s"
