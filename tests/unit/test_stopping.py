"""A stop that outlasts --stop-timeout ends the process itself, and says why before it does (no Spark here:
``GracefulStop`` in a real child process, which its deadline ends with ``os._exit``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.support.helpers import REPO

CHILD = """
import sys, time
from spark_checkpoint_runtime.stopping import GracefulStop

record, hang = sys.argv[1], sys.argv[2] == "hang"
def on_timeout(reason):
    if hang:  # storage that never answers
        time.sleep(600)
    with open(record, "w") as f:
        f.write(reason)

stop = GracefulStop(lambda: None, 0.3, on_timeout=on_timeout)  # the job never finishes its stop
stop._stop()
time.sleep(30)
print("still alive")
"""


def _child(record: Path, hang: bool = False) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", CHILD, str(record), "hang" if hang else "write"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_a_stop_past_its_timeout_records_why_then_exits_1(tmp_path: Path):
    done = _child(tmp_path / "reason.txt")
    assert done.returncode == 1 and "still alive" not in done.stdout
    assert (tmp_path / "reason.txt").read_text().startswith("the job did not stop within --stop-timeout 0.3s")
    assert "did not stop within --stop-timeout 0.3s; exiting with 1" in done.stderr


def test_a_record_that_hangs_does_not_keep_the_process_alive(tmp_path: Path):
    done = _child(tmp_path / "reason.txt", hang=True)
    assert done.returncode == 1 and not (tmp_path / "reason.txt").exists()
