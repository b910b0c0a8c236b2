"""Where and on what a benchmark ran: every benchmark's JSON carries it, so a figure names its machine."""

from __future__ import annotations

import json
import os
import platform
import subprocess
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def _git(*args: str) -> str | None:
    try:
        done = subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, timeout=10)
    except OSError:
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def _java() -> str | None:
    try:
        done = subprocess.run(["java", "-version"], capture_output=True, text=True, timeout=30)
    except OSError:
        return None
    first = (done.stderr or done.stdout).splitlines()
    return first[0] if first else None


def _code_state() -> dict[str, Any]:
    return {
        "commit": _git("rev-parse", "--short", "HEAD"),
        "dirty": bool(_git("status", "--porcelain", "--untracked-files=no")),
    }


# The commit whose code this process runs: taken when the benchmark starts (its modules are loaded then), not
# when it writes its result, which may be after later commits.
CODE_AT_START = _code_state()


def provenance() -> dict[str, Any]:
    """The machine, the versions that matter and the git commit the benchmark started at (with ``dirty`` if
    the tree had changes then)."""
    memory = None
    try:
        pages, size = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
        memory = round(pages * size / 2**30, 1)
    except (ValueError, OSError):
        pass
    return {
        "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
        **CODE_AT_START,
        "machine": {
            "cpus": os.cpu_count(),
            "memory_gib": memory,
            "platform": platform.platform(),
            "processor": platform.machine(),
        },
        "versions": {
            "python": platform.python_version(),
            "java": _java(),
            **{name: _version(name) for name in ("pyspark", "apache-airflow", "fsspec", "s3fs", "moto")},
        },
    }


def write_result(path: str | Path, result: dict[str, Any]) -> None:
    """Write a benchmark's result with its provenance under ``"provenance"``."""
    Path(path).write_text(json.dumps({**result, "provenance": provenance()}, indent=1))
