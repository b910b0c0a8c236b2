"""Stopping the way supervisors stop processes: every signal ends in a graceful stop, bounded in time.

Supervisors aim at different processes. Ctrl-C sends SIGINT to the whole foreground process group; systemd
sends SIGTERM to the group; Kubernetes, docker and YARN send SIGTERM to the container's first process, the
spark-submit JVM; Airflow 3 sends SIGTERM to the task and SIGKILL about 5 s later. Each must end the same
way: finish the batch in flight, take a final checkpoint, commit, exit 0.

- The Python driver turns SIGTERM and SIGINT into a stop request.
- The JVM runs its shutdown hooks on SIGTERM or SIGINT, and one of them (SparkContext's) would stop Spark
  under the running batch. ``GracefulStop`` registers a hook with Hadoop's shutdown-hook manager, which
  runs hooks one at a time by priority, ahead of Spark's own. That hook asks the driver to stop, waits for
  the job to finish, then halts the JVM with the job's exit status (0 after a clean stop), so the JVM's
  own status (143 after SIGTERM) never hides a clean stop.
- The runtime enforces ``--stop-timeout`` itself: a stop not finished in time ends the process with
  ``EXIT_STOP_TIMEOUT``, whatever asked for it: a signal, a ``_control`` stop request, ``--max-duration``, or
  a failure (a wedged batch could otherwise hold the process, and its supervisor's wait, forever). A stop
  that takes a savepoint first also gets ``--checkpoint-timeout``. Nothing is published beyond the last
  completed checkpoint (sinks publish only after a checkpoint's ``_metadata``), so the next restore
  recomputes the rest.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from spark_checkpoint_runtime.errors import EXIT_JOB_FAILED

log = logging.getLogger(__name__)

# Runs before Spark's own hook manager (registered with Hadoop's at priority 40, FileSystem's + 30).
HOOK_PRIORITY = 100
EXIT_STOP_TIMEOUT = EXIT_JOB_FAILED
RECORD_SECONDS = 5.0  # how long a timed-out stop waits for its run report before the process ends
# How long a finished run's process may take to exit: interpreter exit joins worker threads (an upload stuck
# on storage that never answers), and a driver that never exits holds its supervisor's wait after its lease
# is gone, where no heartbeat can show it is stuck.
EXIT_SECONDS = 30.0


class _JvmHook:
    """``java.lang.Runnable`` over py4j: what Hadoop's shutdown-hook manager runs when the JVM is told to stop."""

    def __init__(self, on_shutdown: Callable[[], None]):
        self.on_shutdown = on_shutdown

    def run(self) -> None:
        self.on_shutdown()

    class Java:
        implements = ["java.lang.Runnable"]


class GracefulStop:
    """Turns SIGTERM/SIGINT (to the driver, the JVM, or both) into one graceful stop within ``timeout`` seconds.

    ``request_stop`` is the job's own "finish the batch, checkpoint, commit" request. ``on_timeout`` records the
    outcome when the stop outlasts ``timeout`` (the run report a supervisor reads), given a few seconds before
    the process ends. Call ``install`` once the SparkSession exists and ``finished(code)`` when the run's
    outcome is known; ``uninstall`` at the end. With ``owns_process`` (the job created its session, as under
    spark-submit) a stop the run begins itself is bounded too (``bound``), and a finished run's process that
    cannot exit is ended with the run's status after ``EXIT_SECONDS``.
    """

    def __init__(
        self,
        request_stop: Callable[[], None],
        timeout: float,
        on_timeout: Callable[[str], None] | None = None,
        owns_process: bool = False,
    ):
        self.request_stop = request_stop
        self.timeout = timeout
        self.on_timeout = on_timeout
        self.owns_process = owns_process  # the job created its session: its deadlines may end the process
        self._done = threading.Event()
        self._code = EXIT_STOP_TIMEOUT
        self._asked = threading.Event()
        self._jvm_stopping = threading.Event()
        self._limit = timeout  # the deadline's seconds, and how the messages name them
        self._limit_text = f"--stop-timeout {timeout:g}s"
        self._jvm: Any = None
        self._hook: Any = None  # a java.lang.Thread around the py4j proxy: one Java object, found again on removal
        self._previous: dict[int, Any] = {}

    def install(self, spark: Any, *, jvm_hook: bool) -> None:
        """Handle SIGTERM and SIGINT in Python; with ``jvm_hook``, in the JVM too (a session the job owns)."""
        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGTERM, signal.SIGINT):
                self._previous[signum] = signal.signal(signum, self._on_signal)
        if not jvm_hook:
            return
        from pyspark.java_gateway import ensure_callback_server_started

        gateway = spark.sparkContext._gateway
        ensure_callback_server_started(gateway)
        self._jvm = spark.sparkContext._jvm
        # py4j hands Java a new proxy for each call, so Hadoop could never find the proxy again to remove it.
        self._hook = self._jvm.java.lang.Thread(_JvmHook(self._on_jvm_shutdown), "checkpointed-job graceful stop")
        unit = self._jvm.java.util.concurrent.TimeUnit.SECONDS
        # Hadoop gives each hook a deadline; ours is the stop timeout plus time to halt.
        self._jvm.org.apache.hadoop.util.ShutdownHookManager.get().addShutdownHook(
            self._hook, HOOK_PRIORITY, int(self.timeout) + 10, unit
        )

    def uninstall(self) -> None:
        """Remove the JVM hook and give the previous signal handlers back (after the final checkpoint)."""
        if self._hook is not None and not self._jvm_stopping.is_set():
            try:
                self._jvm.org.apache.hadoop.util.ShutdownHookManager.get().removeShutdownHook(self._hook)
            except Exception:  # shutdown already in progress: the hook then finds the job done
                log.debug("could not remove the JVM shutdown hook", exc_info=True)
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous.clear()

    def bound(self, cause: str, savepoint_seconds: float = 0.0) -> None:
        """A stop asked some other way (``--max-duration``, a ``_control`` stop request, a failure) is under
        way, for ``cause``: give it the ``timeout`` a signal's stop has, after which the process ends. A stop
        that takes a savepoint first gets ``savepoint_seconds`` more (the checkpoint timeout that bounds any
        snapshot). The run report and the log then name ``cause``.

        Only for a job that owns its process (it created its session): in a caller's session (tests,
        notebooks) ending the process would end the caller.
        """
        if not self.owns_process or self._asked.is_set():
            return
        self._limit = self.timeout + savepoint_seconds
        if savepoint_seconds:
            self._limit_text += f" plus --checkpoint-timeout {savepoint_seconds:g}s for its savepoint"
        self._limit_text += f" after {cause}"
        self._arm()

    def finished(self, code: int) -> None:
        """The run is over with exit status ``code``: a waiting JVM hook may now end the process with it."""
        self._code = code
        self._done.set()
        if self._jvm_stopping.is_set():
            # The JVM is shutting down and its hook waits on us: end both processes now, with this status,
            # before this interpreter's exit cuts the hook's connection (the JVM would then exit 143).
            self._halt(code)
        if self.owns_process:
            threading.Thread(target=self._exit_within, args=(code,), name="exit-deadline", daemon=True).start()

    # --- internals --------------------------------------------------------------------------------------
    def _on_signal(self, signum: int, _frame: Any) -> None:
        log.info("%s received: stopping gracefully", signal.Signals(signum).name)
        self._stop()

    def _on_jvm_shutdown(self) -> None:
        self._jvm_stopping.set()
        log.info("the JVM is shutting down (a signal to spark-submit): stopping gracefully first")
        self._stop()
        if not self._done.wait(self.timeout + 5):
            log.error("the job did not stop within --stop-timeout %gs", self.timeout)
            self._record_timeout()
        self._halt(self._code if self._done.is_set() else EXIT_STOP_TIMEOUT)

    def _stop(self) -> None:
        self.request_stop()
        self._arm()

    def _arm(self) -> None:
        """Start the stop's deadline, once: whichever way the stop began first sets it."""
        if not self._asked.is_set():
            self._asked.set()
            threading.Thread(target=self._deadline, name="stop-deadline", daemon=True).start()

    def _deadline(self) -> None:
        if self._done.wait(self._limit):
            return
        log.error(
            "the job did not stop within %s; exiting with %d. Nothing after the last completed "
            "checkpoint was published; the next run restores from it",
            self._limit_text,
            EXIT_STOP_TIMEOUT,
        )
        self._record_timeout()
        self._halt(EXIT_STOP_TIMEOUT)

    def _exit_within(self, code: int) -> None:
        """End the process with ``code`` if it is still alive ``EXIT_SECONDS`` after the run finished."""
        time.sleep(EXIT_SECONDS)
        others = (threading.current_thread(), threading.main_thread())
        running = sorted(t.name for t in threading.enumerate() if t not in others)
        log.error(
            "the run ended with exit status %d, but the process did not exit within %gs (threads still running: "
            "%s); ending it with that status",
            code,
            EXIT_SECONDS,
            ", ".join(running) or "none",
        )
        self._halt(code)

    def _record_timeout(self) -> None:
        """Let ``on_timeout`` write down why the run ends, waiting at most ``RECORD_SECONDS`` (storage may hang)."""
        if self.on_timeout is None:
            return
        reason = (
            f"the job did not stop within {self._limit_text}; nothing after the last completed "
            "checkpoint was published, and the next run restores from it"
        )

        def record() -> None:
            try:
                self.on_timeout(reason)
            except Exception:  # the process ends anyway; the supervisor then sees no report
                log.warning("could not record the stop timeout", exc_info=True)

        recorder = threading.Thread(target=record, name="stop-timeout-report", daemon=True)
        recorder.start()
        recorder.join(RECORD_SECONDS)

    def _halt(self, code: int) -> None:
        for handler in logging.getLogger().handlers:
            handler.flush()
        if self._jvm is not None:
            try:
                self._drain_redirected_output()
                self._jvm.java.lang.Runtime.getRuntime().halt(code)
            except Exception:  # the JVM is gone already
                pass
        os._exit(code)

    def _drain_redirected_output(self) -> None:
        """Under spark-submit the JVM copies this process's output to its own (a "redirect output" thread):
        close ours and let that thread copy the rest, or a halt cuts off the last lines (the result line)."""
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        for fd in (1, 2):
            try:
                os.close(fd)
            except OSError:
                pass
        lang = self._jvm.java.lang
        for thread in lang.Thread.getAllStackTraces().keySet().toArray():
            if thread.getName() == "redirect output":
                thread.join(5000)
        lang.System.out.flush()
