"""The processes a benchmark measures: a Python driver and the JVM that PySpark starts under it."""

from __future__ import annotations

from typing import Any


def jvms_under(process: Any) -> list[Any]:
    """The Java processes started under ``process`` (a ``psutil.Process``): Spark's driver and, in local mode,
    its executors."""
    return [child for child in process.children(recursive=True) if "java" in child.name()]
