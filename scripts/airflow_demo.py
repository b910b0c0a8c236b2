"""The Airflow demo: the ``scheduled_streaming`` example DAG, run twice with ``airflow dags test``.

Run 1 drains the events that have landed (available-now), a deferrable sensor confirms its checkpoint
and retention keeps 3. More events land; run 2 restores from run 1's checkpoint, continues the running
counts, and retention runs again. The demo then checks the counts against the input and prints where the
checkpoints and the exactly-once output are. ``bash scripts/demo.sh`` sets up everything first.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from tests.support.landing import Landing  # noqa: E402

HOME = Path(os.environ["CHECKPOINT_DEMO_HOME"])
LANDING, ROOT, OUTPUT = HOME / "landing", HOME / "checkpoints", HOME / "output"
JOB = "event-counts"
KEYS = ["alpha", "beta", "gamma", "delta", "epsilon"]


def dags_test(run: int) -> None:
    command = [str(Path(sys.executable).parent / "airflow"), "dags", "test", "scheduled_streaming"]
    print(f"\n== run {run}: {' '.join(command)}", flush=True)
    log = HOME / f"dags-test-{run}.log"
    with open(log, "w") as handle:
        result = subprocess.run(command, cwd=REPO, stdout=handle, stderr=subprocess.STDOUT)
    text = log.read_text()
    for line in text.splitlines():
        if "Completed checkpoint" in line or "restoring job" in line or "starts fresh" in line:
            print("   " + line.split("INFO ", 1)[-1].split(" [airflow.", 1)[0].strip())
    if result.returncode != 0 or "state=failed" in text or "DagRunState.FAILED" in text:
        print(f"airflow dags test failed; see {log}", file=sys.stderr)
        sys.exit(1)
    print(f"   all tasks succeeded (full log: {log})")


def main() -> int:
    for folder in (LANDING, ROOT, OUTPUT):
        shutil.rmtree(folder, ignore_errors=True)
    landing = Landing(LANDING, keys=KEYS)
    landing.add_files(5, rows=50)
    dags_test(1)
    landing.add_files(3, rows=50)
    dags_test(2)

    import pyarrow.dataset as ds

    largest: dict[str, int] = {}
    for row in ds.dataset(str(OUTPUT), format="parquet").to_table().to_pylist():
        largest[row["key"]] = max(largest.get(row["key"], 0), row["count"])
    checkpoints = sorted((ROOT / JOB).glob("chk-*/_metadata"), key=lambda p: int(p.parent.name[4:]))
    latest = json.loads(checkpoints[-1].read_text())
    print("\n== result")
    print(f"   input rows per key:      {dict(sorted(landing.counts_by_key().items()))}")
    print(f"   largest published count: {dict(sorted(largest.items()))}")
    print(f"   checkpoints kept:        {[p.parent.name for p in checkpoints]}")
    print(
        f"   latest:                  chk-{latest['id']} (batch {latest['batch_id']}), restored from "
        f"{(latest['restored_from'] or {}).get('path', 'nothing')}"
    )
    print(f"   checkpoints are in:      {ROOT / JOB}")
    print(f"   committed output is in:  {OUTPUT}")
    print(f"   Airflow home (SQLite):   {os.environ['AIRFLOW_HOME']}")
    if largest != landing.counts_by_key():
        print("   MISMATCH between counts and input", file=sys.stderr)
        return 1
    print("   every key's count equals its input rows: exactly once across both runs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
