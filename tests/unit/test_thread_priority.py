"""A checkpoint's threads run below the batches' CPU priority; the job's other threads keep theirs.

A real coordinator over a working folder laid out as Spark writes it (no Spark needed) takes a checkpoint: its
coordinator thread (where output is published) and its upload thread are ``BACKGROUND_NICENESS`` steps nicer
than the thread that started it, and fsspec's shared I/O thread, which the lease's requests use too, is not.
"""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path

import pytest

from spark_checkpoint_runtime.layout import JobFolder
from spark_checkpoint_runtime.thread_priority import BACKGROUND_NICENESS, MAX_NICENESS
from tests.support.coordinator import local_coordinator, spark_like_working_folder

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="a nice value per thread is Linux's")


def nice(thread: threading.Thread) -> int:
    assert thread.native_id is not None and thread.is_alive(), thread.name
    return os.getpriority(os.PRIO_PROCESS, thread.native_id)


def test_the_checkpoint_threads_run_below_the_job_and_the_shared_io_thread_does_not(tmp_path: Path):
    job = nice(threading.current_thread())
    lowered = min(MAX_NICENESS, job + BACKGROUND_NICENESS)
    storage = JobFolder(str(tmp_path / "root"), "j")
    coordinator = local_coordinator(storage, spark_like_working_folder(tmp_path, batch=2))
    publishing: list[int] = []
    coordinator.on_completed = lambda meta: publishing.append(nice(threading.current_thread()))
    coordinator.start()
    try:
        taken = coordinator.checkpoint_now(2, timeout=60)
        assert taken is not None and taken.batch_id == 2
        threads = {t.name: t for t in threading.enumerate()}
        uploads = [t for name, t in threads.items() if name.startswith("checkpoint-upload")]
        assert uploads, sorted(threads)
        assert [nice(t) for t in uploads] == [lowered] * len(uploads)
        assert nice(threads["checkpoint-coordinator"]) == lowered
        assert publishing == [lowered], "the sink publishes on the coordinator thread, lowered too"
        assert nice(threads["fsspecIO"]) == job, "started before the coordinator thread, at the job's priority"
        assert nice(threading.current_thread()) == job
    finally:
        coordinator.shutdown()
