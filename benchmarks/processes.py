"""The processes a benchmark measures: a Python driver and the JVM that PySpark starts under it."""

from __future__ import annotations

from typing import Any


def jvms_under(process: Any) -> list[Any]:
    """The Java processes started under ``process`` (a ``psutil.Process``): Spark's driver and, in local mode,
    its executors.

    Short-lived helpers come and go under the JVM (Hadoop's local file system forks ``chmod``): one that ends
    between the listing and the look at its name is skipped, not an error (it ended a 200-partition S3 run).
    """
    import psutil

    found = []
    for child in process.children(recursive=True):
        try:
            if "java" in child.name():
                found.append(child)
        except psutil.NoSuchProcess:
            continue
    return found
