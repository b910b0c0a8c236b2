"""The Spark versions the runtime is tested on, each a Spark install (a venv with pip's pyspark) of its own.

The runtime ships to the user's Spark, so the version matrix runs it on each supported minor version, with
the cluster-side Python varied too (Spark 3.5 runs under Python 3.10). The newest version is the project's
own ``.venv``; the others are venvs created on first use from the registry, under ``.cache/spark-versions/``
(ignored by git, inside the checkout, so CI creates what it uses). Each has a ``spark-submit`` launcher that
sets its ``SPARK_HOME`` and the Python its driver and executors run, as a distribution's ``spark3-submit``
does: pip's own ``spark-submit`` finds its Spark through whatever ``PYSPARK_PYTHON`` the caller has set.

``python -m tests.support.spark_installs [VERSION ...]`` creates them ahead of a run.
"""

from __future__ import annotations

import fcntl
import glob
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CACHE = REPO / ".cache" / "spark-versions"


@dataclass(frozen=True)
class SparkInstall:
    """One tested Spark: the pyspark release, the Python it runs under, and what its venv needs beside it."""

    version: str
    python: str  # major.minor of the driver's and executors' Python
    pins: tuple[str, ...] = ()
    main: bool = False  # the project's own .venv

    @property
    def minor(self) -> str:
        return ".".join(self.version.split(".")[:2])

    @property
    def home(self) -> Path:
        return Path(sys.executable).parent.parent if self.main else CACHE / self.version

    @property
    def bin(self) -> Path:
        return self.home / "bin"

    @property
    def spark_submit(self) -> Path:
        return self.bin / "spark-submit" if self.main else self.home / "spark-submit"

    @property
    def python_executable(self) -> Path:
        return self.bin / "python"

    def ensure(self) -> SparkInstall:
        """Create the venv if it is missing (once, under a lock: pytest workers may ask at the same time)."""
        if self.main:
            return self
        CACHE.mkdir(parents=True, exist_ok=True)
        stamp = self.home / ".installed"
        with open(CACHE / f"{self.version}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            # The stamp names what was installed: a venv made before a dependency was added is made again.
            if not stamp.exists() or stamp.read_text() != " ".join(self.packages()):
                self._create()
                stamp.write_text(" ".join(self.packages()))
        return self

    def packages(self) -> list[str]:
        """The runtime's own dependencies (pyproject's core and spark extra) at this Spark's pins."""
        return [
            f"pyspark=={self.version}",
            "fsspec>=2024.2",
            "pyyaml>=6",
            "pyarrow>=14",
            "google-crc32c>=1.5",
            "lz4>=4",
            "zstandard>=0.22",
            *self.pins,
        ]

    def _create(self) -> None:
        shutil.rmtree(self.home, ignore_errors=True)
        subprocess.run([find_python(self.python), "-m", "venv", str(self.home)], check=True)
        pip = [str(self.python_executable), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
        subprocess.run([*pip, *self.packages()], check=True)
        # The runtime itself, as a cluster would have it (no Airflow): editable, so it is this checkout's. Under
        # scripts/setup.sh's lock: an editable install writes the egg-info into the checkout, and CI runs both.
        with open(REPO / ".cache" / "editable-install.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            subprocess.run([*pip, "--no-deps", "-e", str(REPO)], check=True)
        self._pin_python()

    def _pin_python(self) -> None:
        """The launcher: this install's Spark, run by this install's Python, whatever the caller's env says."""
        result = subprocess.run(
            [str(self.python_executable), "-c", "import pyspark, os; print(os.path.dirname(pyspark.__file__))"],
            check=True,
            capture_output=True,
            text=True,
        )
        spark_home = result.stdout.strip()
        self.spark_submit.write_text(
            "#!/bin/sh\n"
            f"# Spark {self.version} under Python {self.python}, whatever the caller's environment says.\n"
            f"export SPARK_HOME={spark_home}\n"
            f"export PYSPARK_PYTHON={self.python_executable}\n"
            f"export PYSPARK_DRIVER_PYTHON={self.python_executable}\n"
            f'exec "$SPARK_HOME/bin/spark-submit" "$@"\n'
        )
        self.spark_submit.chmod(0o755)


def find_python(minor: str) -> str:
    """An interpreter of Python ``minor`` (pyenv's, else one on PATH), or a clear error."""
    candidates = sorted(glob.glob(os.path.expanduser(f"~/.pyenv/versions/{minor}.*/bin/python{minor}")))
    on_path = shutil.which(f"python{minor}")
    for candidate in [*reversed(candidates), *([on_path] if on_path else [])]:
        probe = subprocess.run(
            [candidate, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"], capture_output=True, text=True
        )
        if probe.returncode == 0 and probe.stdout.strip() == minor:
            return candidate
    raise RuntimeError(
        f"Python {minor} is needed for the Spark version matrix and was not found (looked in ~/.pyenv/versions "
        f"and for python{minor} on PATH); install it (pyenv install {minor}) or skip with -m 'not versions'"
    )


# Oldest first. The first and the last run on every CI submission; scripts/test.sh -m versions runs all.
INSTALLS = (
    SparkInstall("3.5.9", python="3.10", pins=("pandas>=2.0,<2.3", "numpy<2")),
    SparkInstall("4.0.5", python="3.11", pins=("pandas>=2.2,<3", "protobuf>=5")),
    SparkInstall("4.1.4", python="3.11", pins=("pandas>=2.2,<3", "protobuf>=5")),
    SparkInstall("4.2.1", python="3.11", pins=("pandas>=2.2,<3", "protobuf>=5")),
    SparkInstall("4.3.0", python="3.11", main=True),
)
OLDEST, NEWEST = INSTALLS[0], INSTALLS[-1]


def install(minor: str) -> SparkInstall:
    """The tested install of Spark ``minor`` (``"3.5"``), created if missing."""
    for candidate in INSTALLS:
        if candidate.minor == minor:
            return candidate.ensure()
    raise KeyError(f"Spark {minor} is not in the test matrix ({', '.join(i.minor for i in INSTALLS)})")


if __name__ == "__main__":
    for wanted in sys.argv[1:] or [i.minor for i in INSTALLS]:
        print(f"Spark {wanted}: {install(wanted).home}")
