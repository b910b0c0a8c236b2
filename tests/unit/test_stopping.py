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


def _run(child: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", child], cwd=REPO, capture_output=True, text=True, timeout=60)


BOUND = """
import time
from spark_checkpoint_runtime.stopping import GracefulStop

stop = GracefulStop(lambda: None, 0.3, owns_process={owns})
stop.bound("a stop request", {savepoint})
time.sleep(3)
print("still alive")
"""


def test_a_stop_the_run_asks_of_itself_is_bounded_like_a_signals():
    """``bound`` (a stop request, --max-duration, a failure): the same deadline, and the log names the cause."""
    done = _run(BOUND.format(owns=True, savepoint=0.0))
    assert done.returncode == 1 and "still alive" not in done.stdout
    assert "did not stop within --stop-timeout 0.3s after a stop request; exiting with 1" in done.stderr


def test_a_stop_with_a_savepoint_also_gets_the_checkpoint_timeout():
    done = _run(BOUND.format(owns=True, savepoint=1.0))
    assert done.returncode == 1 and "still alive" not in done.stdout
    expected = "did not stop within --stop-timeout 0.3s plus --checkpoint-timeout 1s for its savepoint after a stop"
    assert expected in done.stderr


def test_a_stop_the_run_asks_of_itself_never_ends_a_callers_process():
    """In a caller's session (a notebook, the in-process tests) ending the process would end the caller."""
    done = _run(BOUND.format(owns=False, savepoint=0.0))
    assert done.returncode == 0 and "still alive" in done.stdout, done.stderr
    assert "did not stop" not in done.stderr


STUCK_AT_EXIT = """
import sys, threading, time
from concurrent.futures import ThreadPoolExecutor
from spark_checkpoint_runtime import stopping

stopping.EXIT_SECONDS = 0.5
uploads = ThreadPoolExecutor(1, thread_name_prefix="checkpoint-upload")
uploads.submit(time.sleep, 600)  # storage that never answers: interpreter exit joins this thread
uploads.shutdown(wait=False)
stopping.GracefulStop(lambda: None, 60, owns_process={owns}).finished(0)
sys.exit(0)
"""


def test_a_finished_run_whose_process_cannot_exit_ends_with_its_status():
    done = subprocess.run(
        [sys.executable, "-c", STUCK_AT_EXIT.format(owns=True)], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert "did not exit within 0.5s (threads still running: checkpoint-upload_0" in done.stderr


def test_a_process_stuck_at_exit_in_a_callers_session_is_the_callers_to_end():
    try:
        subprocess.run(
            [sys.executable, "-c", STUCK_AT_EXIT.format(owns=False)], cwd=REPO, capture_output=True, timeout=5
        )
    except subprocess.TimeoutExpired as still_running:
        assert b"did not exit" not in (still_running.stderr or b"")
    else:
        raise AssertionError("without owning its process, the job must leave its exit to the caller")
