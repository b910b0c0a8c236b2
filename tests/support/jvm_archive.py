"""A class-data-sharing archive for the test suite's Spark JVMs: each JVM starts in about half the time.

The suite starts about forty Spark JVMs (spark-submit runs, crashes, Airflow submissions). Most of each
start is loading and verifying Spark's classes. Java's dynamic CDS archive records the classes one real run
loads; later JVMs with the same classpath map them instead (measured here: 23 s -> 11 s for a small
available-now run). The archive is built once per checkout under ``.cache/`` and handed to every JVM,
with a lighter JIT, through ``SPARK_SUBMIT_OPTS`` (spark-submit and pyspark's launcher both read it). A JVM
that cannot use the archive (another JDK, another Spark) ignores it with a warning and starts the slow
way, so nothing depends on it.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CACHE = REPO / ".cache" / "jvm"
# The tests' data is tiny: the optimizing JIT and the parallel collector would spend more CPU than they save
# (about half of each short run's CPU time, measured), and the suite runs two pytest workers on two cores.
LIGHT_JIT = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def _key() -> str:
    import pyspark

    java = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr
    return hashlib.sha256(f"{pyspark.__version__}|{pyspark.__file__}|{java}".encode()).hexdigest()[:16]


def archive_options(env: dict[str, str]) -> str | None:
    """JVM options that use the archive, building it first if needed; None if it cannot be built."""
    archive = CACHE / f"spark-{_key()}.jsa"
    if not archive.exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        partial = archive.with_suffix(f".{os.getpid()}.partial")
        if not _record(partial, env) or not partial.exists():
            partial.unlink(missing_ok=True)
            return None
        os.replace(partial, archive)
    return f"-XX:SharedArchiveFile={archive} -Xshare:auto {LIGHT_JIT}"


def _record(target: Path, env: dict[str, str]) -> bool:
    """One small stateful run of the runtime with ``-XX:ArchiveClassesAtExit`` (about 45 s)."""
    from tests.support.landing import Landing

    with tempfile.TemporaryDirectory(prefix="jvm-archive-") as folder:
        base = Path(folder)
        Landing(base / "landing").add_files(2)
        command = [
            str(Path(sys.executable).parent / "spark-submit"),
            "--master",
            "local[2]",
            "--conf",
            "spark.sql.shuffle.partitions=2",
            "--conf",
            "spark.ui.enabled=false",
            "--driver-java-options",
            f"-XX:ArchiveClassesAtExit={target}",
            str(REPO / "runtime" / "job.py"),
            *("--job-name", "archive", "--checkpoint-root", str(base / "root"), "--working-dir", str(base / "work")),
            *("--pipeline", "examples.pipelines:running_counts", "--output-mode", "update"),
            *("--trigger", "available-now", "--sink", f"parquet:{base / 'out'}"),
            *("--conf", f"spark.example.landing={base / 'landing'}"),
        ]
        result = subprocess.run(command, cwd=REPO, env=env, capture_output=True, timeout=600)
        return result.returncode == 0
