"""What tests share besides fixtures: paths, job options for the example pipelines, process helpers
(spark-submit, ``python -m spark_checkpoint_runtime``, kills, waits), checkpoints written without Spark."""

from __future__ import annotations

import hashlib
import os
import posixpath
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from tests.support.landing import Landing

REPO = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent
SPARK_CONF = {"spark.sql.shuffle.partitions": "2", "spark.ui.enabled": "false"}


def tree_state(root: Path) -> dict[str, tuple[int, str]]:
    """Every file under ``root`` with its size and content hash: equal values mean nothing changed."""
    state = {}
    if root.exists():
        for path in sorted(root.rglob("*")):
            if path.is_file():
                state[str(path.relative_to(root))] = (
                    path.stat().st_size,
                    hashlib.sha256(path.read_bytes()).hexdigest(),
                )
    return state


def published_rows(output: Path) -> list[dict]:
    """Rows of the committed Parquet output, read with pyarrow (as any reader would)."""
    import pyarrow.dataset as ds

    if not output.exists():
        return []
    return ds.dataset(str(output), format="parquet").to_table().to_pylist()


def final_counts(output: Path) -> dict[str, int]:
    """The largest published running count per key: what a reader of update-mode output ends up with."""
    largest: dict[str, int] = {}
    for row in published_rows(output):
        largest[row["key"]] = max(largest.get(row["key"], 0), row["count"])
    return largest


def counts_published_twice(output: Path) -> list[tuple[str, int]]:
    """Running counts in update-mode output that were published more than once. A key's count grows in every
    batch that emits it, and a batch replayed after a restore reads the offsets Spark logged for it, so emits
    the same counts: a (key, count) row seen twice is a batch, or part of one, published twice."""
    seen = Counter((row["key"], row["count"]) for row in published_rows(output))
    return sorted(pair for pair, times in seen.items() if times > 1)


def batches_published_twice(output: Path) -> dict[int, list[int]]:
    """Spark batches whose output is published under more than one checkpoint, with those checkpoints' ids.
    The Parquet sink names each published file ``c<checkpoint>-b<batch>-...``, and a restore sets aside what
    a checkpoint outside its history published, so a batch lives under one checkpoint only."""
    under: dict[int, set[int]] = {}
    for part in output.iterdir() if output.exists() else ():
        if named := re.match(r"c(\d+)-b(\d+)-", part.name):
            under.setdefault(int(named.group(2)), set()).add(int(named.group(1)))
    return {batch: sorted(ids) for batch, ids in sorted(under.items()) if len(ids) > 1}


def job_args(job: str, root: Path, work: Path, landing: Landing, **extra: str) -> list[str]:
    """Runtime options for the example pipelines, with the landing folder passed as a Spark conf."""
    args = {
        "--job-name": job,
        "--checkpoint-root": str(root),
        "--working-dir": str(work),
        "--pipeline": "examples.pipelines:events",
        "--checkpoint-interval": "1ms",
        # A killed run is waited out for the lease timeout before the next one takes over; keep that short here.
        "--lease-timeout": "4s",
        **{f"--{k.replace('_', '-')}": v for k, v in extra.items()},
    }
    argv = [item for pair in args.items() for item in pair]
    return argv + ["--conf", f"spark.example.landing={landing.path}"]


def continuous_counts_args(
    job: str, root: Path, work: Path, landing: Landing, output: Path, batch_interval: str = "500ms", **extra: str
) -> list[str]:
    """``job_args`` for a continuous running count per key (update mode), published to Parquet in ``output``,
    checkpointing every second: the stateful job most tests run beside something else."""
    return job_args(
        job,
        root,
        work,
        landing,
        pipeline="examples.pipelines:running_counts",
        output_mode="update",
        sink=f"parquet:{output}",
        trigger="continuous",
        batch_interval=batch_interval,
        checkpoint_interval="1s",
        **extra,
    )


def run_job(spark, job: str, tmp_path: Path, landing: Landing, **extra: str) -> dict:
    """Run the runtime in this process on the shared session; output goes to ``tmp_path/out``."""
    from spark_checkpoint_runtime.options import parse_options
    from spark_checkpoint_runtime.run import StreamingJob

    extra.setdefault("sink", f"parquet:{tmp_path / 'out'}")
    extra.setdefault("checkpoint_root", str(tmp_path / "root"))
    argv = job_args(job, tmp_path / "root", tmp_path / "work", landing, **extra)
    return StreamingJob(parse_options(argv), spark).run()


def subprocess_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = str(REPO)
    env["PYSPARK_PYTHON"] = sys.executable
    env["PYSPARK_DRIVER_PYTHON"] = sys.executable
    return env


def spark_submit(
    args: list[str],
    log_path: Path,
    env: dict[str, str] | None = None,
    master: str = "local[2]",
    spark_submit_path: Path | None = None,
    conf: dict[str, str] | None = None,
) -> subprocess.Popen:
    """Start ``spark-submit runtime/job.py`` in its own process group, logging to ``log_path``.

    ``env`` adds environment variables (``CHECKPOINT_FAULTS`` for a kill at a chosen point); ``master`` is
    the Spark master (a ``spark://`` standalone cluster's, in client deploy mode); ``spark_submit_path`` is
    another Spark's spark-submit (``tests.support.spark_installs``), default this venv's; ``conf`` overrides
    the test Spark settings.
    """
    command = [str(spark_submit_path or VENV_BIN / "spark-submit"), "--master", master]
    for key, value in {**SPARK_CONF, **(conf or {})}.items():
        command += ["--conf", f"{key}={value}"]
    command += [str(REPO / "runtime" / "job.py"), *args]
    handle = open(log_path, "ab")  # noqa: SIM115 - closed when the process is reaped
    handle.write(f"\n===== {' '.join(command)}\n".encode())
    handle.flush()
    return subprocess.Popen(
        command,
        cwd=REPO,
        env={**subprocess_env(), **(env or {})},
        stdout=handle,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def start_module(args: list[str], conf: dict[str, str] | None = None, **popen: object) -> subprocess.Popen:
    """Start ``python -m spark_checkpoint_runtime ARGS`` with the test Spark settings (``conf`` overrides them)."""
    settings = {**SPARK_CONF, **(conf or {})}
    command = [sys.executable, "-m", "spark_checkpoint_runtime", *args]
    command += [item for key, value in settings.items() for item in ("--conf", f"{key}={value}")]
    popen.setdefault("text", True)
    return subprocess.Popen(command, cwd=REPO, env=subprocess_env(), **popen)


def run_module(args: list[str], timeout: float = 300) -> subprocess.CompletedProcess:
    """``python -m spark_checkpoint_runtime ARGS`` to completion."""
    return subprocess.run(
        [sys.executable, "-m", "spark_checkpoint_runtime", *args],
        cwd=REPO,
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def kill_group(process: subprocess.Popen) -> None:
    """SIGKILL the whole process group (spark-submit's JVM and the Python driver)."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait(timeout=60)


def wait_for(condition: Callable[[], bool], timeout: float, what: str, process: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        if process is not None and process.poll() is not None:
            raise AssertionError(f"process exited with {process.returncode} while waiting for {what}")
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def completed_checkpoints(root: Path, job: str) -> list[int]:
    folder = root / job
    if not folder.exists():
        return []
    return sorted(int(p.parent.name[4:]) for p in folder.glob("chk-*/_metadata"))


def checkpoint_metadata(checkpoint_id: int, files: list, job: str = "j", completion_ms: int | None = None):
    """Format-valid metadata for tests that need checkpoints on disk without running Spark."""
    from spark_checkpoint_runtime.layout import CheckpointMetadata, now_ms

    completion = completion_ms if completion_ms is not None else now_ms()
    return CheckpointMetadata(
        id=checkpoint_id,
        kind="checkpoint",
        job_name=job,
        run_id="r1",
        batch_id=checkpoint_id,
        trigger_timestamp_ms=completion - 5,
        completion_timestamp_ms=completion,
        checkpointing_mode="exactly-once",
        files=files,
        state_bytes=sum(f.size for f in files if f.target.startswith("state/")),
        bytes_written=0,
    )


def write_checkpoint(storage, checkpoint_id: int, shared: list[str], completion_ms: int | None = None):
    """Write a small complete checkpoint (files, then ``_metadata``) through the format module."""
    from spark_checkpoint_runtime.layout import FileEntry

    def put(relative: str, data: bytes) -> None:  # through the job's filesystem: local disk or S3 alike
        path = storage.job_file(relative)
        storage.fs.makedirs(posixpath.dirname(path), exist_ok=True)
        storage.fs.pipe_file(path, data)

    files = []
    for name in shared:
        relative = storage.checkpoints.shared_relative_file("r1", name)
        put(relative, b"x" * 10)
        files.append(FileEntry(relative, name, 10, True))
    relative = storage.checkpoints.relative_file(checkpoint_id, "commits/0")
    put(relative, b"v1\n{}")
    files.append(FileEntry(relative, "commits/0", 5, False))
    meta = checkpoint_metadata(checkpoint_id, files, job=storage.job_name, completion_ms=completion_ms)
    storage.checkpoints.write_metadata(meta)
    return meta


S3_BUCKET = "checkpoints"
S3_SECRET = "planted-s3-secret-7f3a9c"  # must never show up in logs or _metadata
