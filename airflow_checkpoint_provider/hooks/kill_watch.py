"""The job operator's watch for a kill request: the last resort for a driver that no longer answers.

A stop request goes to the driver through ``_control/requests/``; a frozen driver (SIGSTOP, a hung JVM)
never reads it. The Airflow task that submitted the driver is still alive, though, and it is the one
process that may kill it wherever the stopper runs: it reads ``_control/kill/<its run key>.json`` (one small
read per ``interval``), kills spark-submit with every process under it, and writes the run's report so that
whoever asked sees the kill done.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

import psutil

from spark_checkpoint_runtime.layout import ControlChannel, key_from, now_ms

log = logging.getLogger(__name__)

KILL_POLL_SECONDS = 60.0  # 1,440 small reads a day beside a running job


def stop_request_id(run: str) -> str:
    """The id of the stop request for ``run`` (its run key): one id whoever asks (a person's stop, the task's
    ``on_kill``, the trigger's), so the job answers one request."""
    return key_from(f"stop-{run}")


def record_kill(control: ControlChannel, run_key: str, error: str) -> None:
    """Write the killed run's report (``error`` says why), unless it wrote one itself, so that whoever asked
    sees the kill done."""
    if control.run_report(run_key) is None:
        control.write_run_report(run_key, {"status": "killed", "error": error, "killed_ms": now_ms()})


def kill_process_tree(pid: int) -> list[int]:
    """SIGKILL a process and every process under it (a stopped process dies of SIGKILL too). Returns the pids."""
    try:
        root = psutil.Process(pid)
        tree = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []
    for process in tree:
        try:
            process.kill()
        except psutil.NoSuchProcess:
            pass
    # Not the root: it is the caller's child, and reaping it here would hide its exit status from Popen.
    psutil.wait_procs(tree[1:], timeout=10)
    return [process.pid for process in tree]


def process_tree_killer(pid: Callable[[], int | None]) -> Callable[[], str | None]:
    """A ``KillWatch`` kill: SIGKILL the process tree of ``pid()`` (spark-submit) once it is running."""

    def kill() -> str | None:
        found = pid()
        killed = kill_process_tree(found) if found is not None else []
        return f"pids {killed}" if killed else None  # an ended process is nothing killed

    return kill


class KillWatch:
    """While a job runs, kill it when ``_control/kill/<run_key>.json`` appears.

    :param control: the job's control channel.
    :param run_key: the run key this task submitted the job with.
    :param kill_job: kills the job and says what it killed; None while there is nothing to kill yet
        (``StreamingJobHook.kill_submission``: spark-submit's process tree, or a driver on the cluster
        through its cluster manager).
    :param interval: seconds between two reads of the kill request.
    """

    def __init__(
        self, control: ControlChannel, run_key: str, kill_job: Callable[[], str | None], interval: float
    ) -> None:
        self.control = control
        self.run_key = run_key
        self.kill_job = kill_job
        self.interval = interval
        self.reason: str | None = None  # set once this watch killed the job
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="kill-watch", daemon=True)

    def __enter__(self) -> KillWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join(timeout=30)

    def _watch(self) -> None:
        while not self._done.wait(self.interval):
            try:
                request = self.control.kill_request(self.run_key)
            except Exception:  # a storage hiccup: look again next time; never fail the job for it
                log.warning("could not read the kill request of run %s", self.run_key, exc_info=True)
                continue
            if request is None:
                continue
            killed = self.kill_job()
            if killed is None:
                continue
            self.reason = str(request.get("reason") or "a kill was requested")
            log.error("killed the job (%s): %s", killed, self.reason)
            record_kill(self.control, self.run_key, f"killed by request: {self.reason}")
            return
