"""End-to-end demo of the runtime on the embedded defaults: local Spark, local files.

A running count per key over a landing folder of JSON events, submitted with ``spark-submit``:

1. a first available-now run drains 4 files and checkpoints;
2. more files arrive; a continuous run is SIGKILLed (whole process group) mid-stream;
3. more files arrive; an available-now run restores from the latest checkpoint and drains the rest.

It then checks the counts against the input and prints where checkpoints and output are.
Run it with ``bash scripts/setup.sh && .venv/bin/python scripts/runtime_demo.py``.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from tests.support.landing import Landing  # noqa: E402

BASE = REPO / "demo-output"
LANDING, ROOT, WORK, OUTPUT = BASE / "landing", BASE / "checkpoints", BASE / "work", BASE / "output"
JOB = "demo-counts"
KEYS = ["alpha", "beta", "gamma", "delta"]


def submit(trigger: str) -> subprocess.Popen:
    bin_dir = Path(sys.executable).parent
    env = {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
    }
    command = [
        str(bin_dir / "spark-submit"),
        "--master",
        "local[2]",
        "--conf",
        "spark.ui.enabled=false",
        str(REPO / "runtime" / "job.py"),
        "--job-name",
        JOB,
        "--checkpoint-root",
        str(ROOT),
        "--working-dir",
        str(WORK),
        "--pipeline",
        "examples.pipelines:running_counts",
        "--output-mode",
        "update",
        "--sink",
        f"parquet:{OUTPUT}",
        "--trigger",
        trigger,
        "--batch-interval",
        "200ms",
        "--checkpoint-interval",
        "1s",
        "--num-retained",
        "2",
        "--conf",
        f"spark.example.landing={LANDING}",
        "--conf",
        "spark.sql.shuffle.partitions=4",
    ]
    print(f"\n$ {' '.join(command)}\n", flush=True)
    return subprocess.Popen(command, cwd=REPO, env=env, start_new_session=True)


def completed() -> list[int]:
    return sorted(int(p.parent.name[4:]) for p in (ROOT / JOB).glob("chk-*/_metadata"))


def main() -> int:
    shutil.rmtree(BASE, ignore_errors=True)
    landing = Landing(LANDING, keys=KEYS)

    print("== 1. available-now run over 4 files")
    landing.add_files(4, rows=25)
    if submit("available-now").wait() != 0:
        return 1

    print("== 2. continuous run, SIGKILLed mid-stream")
    landing.add_files(6, rows=25)
    process = submit("continuous")
    before = completed()[-1]
    deadline = time.monotonic() + 180
    while completed()[-1] <= before and time.monotonic() < deadline and process.poll() is None:
        time.sleep(0.2)
    time.sleep(0.7)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    print(f"\n   killed the whole process group; completed checkpoints now: {completed()}")

    print("== 3. available-now run restores from the latest checkpoint and drains the rest")
    landing.add_files(3, rows=25)
    if submit("available-now").wait() != 0:
        return 1

    import pyarrow.dataset as ds

    largest: dict[str, int] = {}
    for row in ds.dataset(str(OUTPUT), format="parquet").to_table().to_pylist():
        largest[row["key"]] = max(largest.get(row["key"], 0), row["count"])
    latest = json.loads((ROOT / JOB / f"chk-{completed()[-1]}" / "_metadata").read_text())
    print("\n== result")
    print(f"   input rows per key:          {dict(sorted(landing.counts_by_key().items()))}")
    print(f"   largest published count:     {dict(sorted(largest.items()))}")
    print(f"   checkpoints kept:            {[f'chk-{i}' for i in completed()]} (num-retained 2)")
    print(
        f"   latest checkpoint:           chk-{latest['id']} covers batch {latest['batch_id']}, "
        f"restored from {latest['restored_from']['path'] if latest['restored_from'] else 'nothing'}"
    )
    print(f"   checkpoints are in:          {ROOT / JOB}")
    print(f"   committed output is in:      {OUTPUT}  (spark.read.parquet / pyarrow.dataset)")
    if largest != landing.counts_by_key():
        print("   MISMATCH: counts differ from the input", file=sys.stderr)
        return 1
    print("   every key's count equals its number of input rows: nothing lost, nothing counted twice")
    return 0


if __name__ == "__main__":
    sys.exit(main())
