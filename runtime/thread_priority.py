"""The checkpoint threads' CPU priority: below the batches', so a checkpoint takes only CPU the job leaves idle.

A checkpoint's work in the job's Python process (listing the working folder, freezing and uploading files,
publishing output, retention) runs beside the batches. Where it shares cores with Spark's tasks (local mode,
or a driver that is busy planning), every CPU-second it takes while the tasks want the CPU comes out of the
batches. Linux keeps a nice value per thread, so the coordinator's threads run ``BACKGROUND_NICENESS`` steps
below the rest of the process: when the cores are busy, the batches go first and a checkpoint takes longer;
when they are not, nothing changes. Threads started from a lowered thread inherit its priority.

The lease's renewal and the job's own threads keep theirs: a renewal that waits behind busy tasks could miss
its deadline and lose the job. So does fsspec's I/O thread, through which object-store requests go.

The price, on a saturated machine only: a checkpoint (a savepoint, a final checkpoint) takes longer, and a
lowered thread preempted while it holds the GIL delays the job's Python threads until it runs again. The
at-scale benchmark measures the net effect (docs/benchmarks.md); ``--checkpoint-niceness 0`` turns it off.
"""

from __future__ import annotations

import logging
import os
import sys
import threading

import fsspec.asyn

log = logging.getLogger(__name__)

BACKGROUND_NICENESS = 10  # CFS weight 110 against 1,024 at nice 0: about a tenth of a core under contention
MAX_NICENESS = 19


def lower_this_thread(by: int = BACKGROUND_NICENESS) -> None:
    """Run the calling thread ``by`` nice steps below the process's main thread (Linux only: elsewhere nice is
    per process, and lowering the whole process would slow the batches too). Idempotent: a thread started
    from a lowered one, which inherited its priority, is not lowered again. Never fails: at worst the thread
    keeps its priority."""
    if sys.platform != "linux":
        return
    thread = threading.get_native_id()
    try:
        target = min(MAX_NICENESS, os.getpriority(os.PRIO_PROCESS, os.getpid()) + by)  # the main thread's id
        if os.getpriority(os.PRIO_PROCESS, thread) < target:
            os.setpriority(os.PRIO_PROCESS, thread, target)
    except OSError as exc:  # a sandbox that forbids it: the checkpoint runs at the job's priority
        log.debug("could not lower the priority of thread %s: %s", threading.current_thread().name, exc)


def start_shared_threads_first() -> None:
    """Start fsspec's shared event-loop thread (async stores such as s3fs do their I/O on it) from the calling
    thread, if it is not running yet.

    A thread inherits its creator's priority: were the loop first needed by a lowered checkpoint thread, every
    request of the job through it (the lease's renewals included) would run at the lowered priority.
    """
    fsspec.asyn.get_loop()
