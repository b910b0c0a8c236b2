"""A checkpoint's threads run below the job's CPU priority (``--checkpoint-niceness``); the job's others keep theirs.

A real coordinator over a working folder laid out as Spark writes it (no Spark needed) takes a checkpoint: its
coordinator thread (where output is published) and its upload thread run that many nice steps below the main
thread, and fsspec's shared I/O thread, which the lease's requests use too, is started at the job's priority
before them.
"""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path

import fsspec.asyn
import pytest

from spark_checkpoint_runtime.checkpoint_policy import CheckpointConfig
from spark_checkpoint_runtime.layout import JobFolder
from spark_checkpoint_runtime.options import OptionsError, options_from_mapping
from spark_checkpoint_runtime.thread_priority import BACKGROUND_NICENESS, MAX_NICENESS
from tests.support.coordinator import local_coordinator, spark_like_working_folder

linux_only = pytest.mark.skipif(sys.platform != "linux", reason="a nice value per thread is Linux's")


def nice(thread: threading.Thread) -> int:
    assert thread.native_id is not None and thread.is_alive(), thread.name
    return os.getpriority(os.PRIO_PROCESS, thread.native_id)


@pytest.fixture
def fresh_io_thread(monkeypatch: pytest.MonkeyPatch):
    """fsspec's shared I/O loop as in a fresh process: not started yet (stopped again afterwards)."""
    monkeypatch.setattr(fsspec.asyn, "loop", [None])
    monkeypatch.setattr(fsspec.asyn, "iothread", [None])
    yield
    if fsspec.asyn.loop[0] is not None:
        fsspec.asyn.loop[0].call_soon_threadsafe(fsspec.asyn.loop[0].stop)


@linux_only
@pytest.mark.parametrize("niceness", [BACKGROUND_NICENESS, 0])
def test_the_checkpoint_threads_run_below_the_job_and_the_shared_io_thread_does_not(
    tmp_path: Path, fresh_io_thread: None, niceness: int
):
    job = os.getpriority(os.PRIO_PROCESS, os.getpid())  # the main thread's
    lowered = min(MAX_NICENESS, job + niceness)
    storage = JobFolder(str(tmp_path / "root"), "j")
    working = spark_like_working_folder(tmp_path, batch=2)
    coordinator = local_coordinator(storage, working, config=CheckpointConfig(interval=3600.0, niceness=niceness))
    publishing: list[int] = []
    coordinator.on_completed = lambda meta: publishing.append(nice(threading.current_thread()))
    coordinator.start()
    try:
        taken = coordinator.checkpoint_now(2, timeout=60)
        assert taken is not None and taken.batch_id == 2
        uploads = list(coordinator._uploader._threads)
        assert uploads, "the checkpoint's files went through the upload thread"
        assert [nice(t) for t in uploads] == [lowered] * len(uploads)
        assert nice(coordinator._thread) == lowered
        assert publishing == [lowered], "the sink publishes on the coordinator thread, at its priority"
        assert nice(fsspec.asyn.iothread[0]) == job, "started by start(), before any lowered thread could"
        assert nice(threading.current_thread()) == job
    finally:
        coordinator.shutdown()


def test_checkpoint_niceness_is_a_nice_step_count_linux_accepts():
    assert options_from_mapping({"job_name": "j", "checkpoint_root": "/r", "pipeline": "m:f"}).checkpoint_niceness == 10
    for value, says in (("20", "above 19"), ("-1", "at least 0"), ("low", "whole number")):
        with pytest.raises(OptionsError, match="--checkpoint-niceness") as raised:
            options_from_mapping(
                {"job_name": "j", "checkpoint_root": "/r", "pipeline": "m:f", "checkpoint_niceness": value}
            )
        assert says in str(raised.value)
