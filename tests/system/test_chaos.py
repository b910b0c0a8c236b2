"""Crash anywhere: real spark-submit runs SIGKILLed (whole process group) at chosen and random points.

Each chain runs one job again and again. Every run restores from latest and is killed, either by the
runtime's fault-injection hook (``CHECKPOINT_FAULTS``, see ``runtime/faults.py``) at a named point, or by
the test at a random moment after the run's first checkpoint. New input keeps landing while a run is up, so
batches, checkpoints, retention and sink commits keep happening. A final available-now run drains the rest.

Then: exactly-once output holds every input row once (stateless) and the running counts are exact
(stateful); at-least-once output has no row missing. ``CHAOS_SEED`` picks the random points (printed on
failure); ``CHAOS_SOAK=N`` adds N random kills to each chain (a longer soak, off by default).
"""

from __future__ import annotations

import json
import os
import random
import shutil
import time
from collections import Counter
from pathlib import Path

import pytest

from spark_checkpoint_runtime.layout import ControlChannel, JobFolder
from spark_checkpoint_runtime.sinks import ParquetSink
from tests.support import figures
from tests.support.helpers import VENV_BIN, Landing, final_counts, job_args, kill_group, published_rows, spark_submit

pytestmark = [pytest.mark.spark, pytest.mark.slow]

SEED = int(os.environ.get("CHAOS_SEED", "20261122"))
SOAK = int(os.environ.get("CHAOS_SOAK", "0"))
RANDOM = "random"  # the test kills the group itself at a random moment


def run_chain(
    tmp_path: Path,
    landing: Landing,
    job: str,
    plan: list[str],
    rng: random.Random,
    storage_options: dict | None = None,
    spark_conf: list[str] = (),
    master: str = "local[2]",
    spark_submit_path: Path | None = None,
    figure_group: str | None = None,
    **extra: str,
) -> Path:
    """Run ``job`` once per entry of ``plan`` (a fault point like ``upload@2``, or RANDOM), each killed.

    ``extra`` may move the checkpoint root (``checkpoint_root="s3://..."``); ``storage_options`` go to the
    runtime in a spec file, as the provider sends them; ``spark_conf`` adds ``--conf`` options; ``master``
    is the Spark master spark-submit runs the job on; ``spark_submit_path`` another Spark's spark-submit;
    ``figure_group`` counts the kills for a family of chains in the reliability figures.
    """
    root, work, output, log = tmp_path / "root", tmp_path / "work", tmp_path / "out", tmp_path / "job.log"
    settings = {"sink": f"parquet:{output}", "trigger": "continuous", "batch_interval": "200ms", "num_retained": "2"}
    args = job_args(job, root, work, landing, **{**settings, **extra}) + list(spark_conf)
    if storage_options:
        spec = tmp_path / "spec.json"
        spec.write_text(json.dumps({"storage_options": storage_options}))
        args += ["--spec", str(spec)]
    storage = JobFolder(extra.get("checkpoint_root", str(root)), job, storage_options)

    def newest() -> int:
        return max((meta.id for meta in storage.checkpoints.completed()), default=0)

    landing.add_files(3)
    plan = plan + [RANDOM] * SOAK
    fresh_starts = 0
    for number, point in enumerate(plan):
        before = newest()
        fresh_starts += before == 0
        record = tmp_path / f"fault-{number}.txt"
        env = {} if point == RANDOM else {"CHECKPOINT_FAULTS": point, "CHECKPOINT_FAULTS_RECORD": str(record)}
        process = spark_submit(args, log, env=env, master=master, spark_submit_path=spark_submit_path)
        kill_at = None
        asked_savepoint = False
        deadline = time.monotonic() + 240
        next_file = time.monotonic() + 2.0
        while process.poll() is None:
            now = time.monotonic()
            assert now < deadline, f"run {number} ({point}, seed {SEED}) was not killed within 240 s"
            newer = newest() > before
            if point == RANDOM and newer and kill_at is None:
                kill_at = now + rng.uniform(0.1, 2.0)
            if kill_at is not None and now >= kill_at:
                kill_group(process)
                break
            if point.startswith("savepoint@") and newer and not asked_savepoint:
                ControlChannel(storage).request(f"chaos-{number}", "savepoint")
                asked_savepoint = True
            if now >= next_file:
                landing.add_file()
                next_file = now + 2.0
            time.sleep(0.1)
        text = log.read_text(errors="replace")
        assert process.wait(timeout=60) == -9, f"run {number} ({point}) ended on its own:\n{text[-3000:]}"
        if point != RANDOM:
            fired = record.read_text() if record.exists() else ""
            assert f"fault injection: SIGKILL at {point}" in fired, f"run {number} died, but not at {point}"
        figures.record_kill(point.split("@")[0], figure_group)

    drain = [a if a != "continuous" else "available-now" for a in args]
    drain += ["--conf", "spark.example.maxFilesPerTrigger=25"]  # the leftover backlog in a few batches
    fresh_starts += newest() == 0
    process = spark_submit(drain, log, master=master, spark_submit_path=spark_submit_path)
    assert process.wait(timeout=300) == 0, log.read_text(errors="replace")[-4000:]
    text = log.read_text(errors="replace")
    # Every run restores from a checkpoint whenever one had completed (a kill inside the very first
    # checkpoint leaves none, and then the next run rightly starts fresh).
    assert text.count("starts fresh") == fresh_starts
    assert text.count("restoring job") == len(plan) + 1 - fresh_starts
    return output


def test_stateless_exactly_once_survives_kills_anywhere(tmp_path: Path, landing: Landing):
    rng = random.Random(SEED)
    plan = ["batch@2", f"upload@{rng.randint(1, 4)}", "before-metadata@1", "retention-delete@1"]
    plan += [f"sink-commit@{rng.randint(1, 3)}", "savepoint@1", RANDOM]
    _assert_exactly_once(run_chain(tmp_path, landing, "chaos-stateless", plan, rng), landing)


def test_stateful_running_counts_exact_through_kills_anywhere(tmp_path: Path, landing: Landing):
    rng = random.Random(SEED + 1)
    plan = ["upload@3", "before-metadata@2", "retention-delete@2", "sink-commit@2", "savepoint@2", RANDOM]
    output = run_chain(
        tmp_path,
        landing,
        "chaos-stateful",
        plan,
        rng,
        pipeline="examples.pipelines:running_counts",
        output_mode="update",
    )
    largest = final_counts(output)
    expected = landing.counts_by_key()
    wrong = {key: (largest.get(key), count) for key, count in expected.items() if largest.get(key) != count}
    figures.record_rows(
        len(landing.rows),
        sum(max(0, count - largest.get(key, 0)) for key, count in expected.items()),
        sum(max(0, largest.get(key, 0) - count) for key, count in expected.items()),
        "exactly-once",
    )
    assert not wrong, f"running counts (got, expected) differ (seed {SEED + 1}): {wrong}"


def test_at_least_once_loses_no_row_through_kills(tmp_path: Path, landing: Landing):
    rng = random.Random(SEED + 2)
    plan = ["sink-commit@2", "batch@2", RANDOM]
    output = run_chain(tmp_path, landing, "chaos-alo", plan, rng, checkpointing_mode="at-least-once")
    published = Counter(row["id"] for row in published_rows(output))
    expected = {row["id"] for row in landing.rows}
    lost = expected - set(published)
    figures.record_rows(
        len(expected), len(lost), sum(n - 1 for n in published.values() if n > 1), "at-least-once, allowed"
    )
    assert not lost, f"{len(lost)} rows lost in at-least-once mode (seed {SEED + 2})"


# --- Rewinds and savepoint restores: a new history, crashed at every step of its restore -------------------
REWIND_STARTED = "rewind-started"  # the test kills the run as soon as its rewind checkpoint is durable


def _drive(process, log: Path, landing: Landing, *, until=None, kill_delay: float = 0.0, timeout: float = 240) -> int:
    """Keep input landing while ``process`` runs; once ``until()`` holds, SIGKILL it after ``kill_delay`` s.

    Returns the exit status (-9 when killed, by the test or by a fault point).
    """
    deadline = time.monotonic() + timeout
    next_file = time.monotonic() + 1.0
    kill_at = None
    while process.poll() is None:
        now = time.monotonic()
        assert now < deadline, f"run did not end within {timeout}s:\n{log.read_text(errors='replace')[-3000:]}"
        if until is not None and kill_at is None and until():
            kill_at = now + kill_delay
        if kill_at is not None and now >= kill_at:
            kill_group(process)
            break
        if now >= next_file:
            landing.add_file()
            next_file = now + 1.5
        time.sleep(0.05)
    return process.wait(timeout=60)


REWINDS = "rewind chains"  # restores from an older checkpoint or a relocated savepoint, killed at each step


def _valid_ids(storage: JobFolder) -> list[int]:
    return sorted(i for i, result in storage.checkpoints.iter_valid() if not isinstance(result, Exception))


def _run_killed(args, log, landing, tmp_path, point: str, number: int, *, until=None, kill_delay=0.0) -> None:
    """One run killed at fault ``point`` (or, for REWIND_STARTED, by the test once ``until()`` holds)."""
    record = tmp_path / f"fault-{number}.txt"
    env = {} if point == REWIND_STARTED else {"CHECKPOINT_FAULTS": point, "CHECKPOINT_FAULTS_RECORD": str(record)}
    status = _drive(spark_submit(args, log, env=env), log, landing, until=until, kill_delay=kill_delay)
    assert status == -9, f"run {number} ({point}) ended with {status}:\n{log.read_text(errors='replace')[-3000:]}"
    if point != REWIND_STARTED:
        fired = record.read_text() if record.exists() else ""
        assert f"fault injection: SIGKILL at {point}" in fired, f"run {number} died, but not at {point}"
    figures.record_kill(point.split("@")[0], REWINDS)


def _assert_exactly_once(output: Path, landing: Landing) -> None:
    published = Counter(row["id"] for row in published_rows(output))
    expected = {row["id"] for row in landing.rows}
    lost = expected - set(published)
    duplicated = sum(n - 1 for n in published.values() if n > 1)
    figures.record_rows(len(expected), len(lost), duplicated, "exactly-once")
    assert not lost, f"{len(lost)} rows lost (seed {SEED})"
    assert duplicated == 0, f"{duplicated} rows published twice (seed {SEED})"
    assert set(published) == expected


def _drain(args: list[str], log: Path) -> None:
    drain = [a if a != "continuous" else "available-now" for a in args]
    drain += ["--conf", "spark.example.maxFilesPerTrigger=25"]
    process = spark_submit(drain, log)
    assert process.wait(timeout=300) == 0, log.read_text(errors="replace")[-4000:]


def _with_restore(args: list[str], restore_from: str) -> list[str]:
    return [*args, "--restore-from", restore_from]


def test_a_rewind_killed_at_every_step_of_its_restore_keeps_exactly_once(tmp_path: Path, landing: Landing):
    """A run restored from an older retained checkpoint is SIGKILLed: before its rewind checkpoint's _metadata,
    between rollback moves, between sink commit files, and right after its rewind checkpoint. A later run from
    latest drains the rest: every input row is published exactly once."""
    rng = random.Random(SEED + 3)
    job, root, output, log = "rewind", tmp_path / "root", tmp_path / "out", tmp_path / "job.log"
    settings = {"sink": f"parquet:{output}", "trigger": "continuous", "batch_interval": "200ms", "num_retained": "4"}
    args = job_args(job, root, tmp_path / "work", landing, **settings)
    storage = JobFolder(str(root), job)
    landing.add_files(3)

    def newest() -> int:
        return max(_valid_ids(storage), default=0)

    # A history with several checkpoints and published output after each.
    _drive(spark_submit(args, log), log, landing, until=lambda: newest() >= 5)
    figures.record_kill("random", REWINDS)
    plan = ["before-metadata@1", "rollback@1", REWIND_STARTED, "sink-commit@1", REWIND_STARTED]
    for number, point in enumerate(plan):
        before = newest()
        target = _valid_ids(storage)[0]  # the oldest retained checkpoint: everything after it is rewound
        assert target < before
        rewind = _with_restore(args, storage.url_of(storage.checkpoints.path(target)))
        started = (lambda b=before: newest() > b) if point == REWIND_STARTED else None
        _run_killed(rewind, log, landing, tmp_path, point, number, until=started, kill_delay=rng.uniform(0, 0.3))
        latest = storage.checkpoints.latest_valid().metadata
        if point == "before-metadata@1":
            assert latest.id == before, "killed before its first _metadata: latest still continues the old history"
        else:
            assert latest.id > before and latest.restored_from["id"] == target
            assert not latest.history.contains(before), "the abandoned branch is outside the new history"
        # Between rewinds, a run from latest adds to whichever history is current.
        _drive(spark_submit(args, log), log, landing, until=lambda b=newest(): newest() >= b + 2)
        figures.record_kill("random", REWINDS)
    _drain(args, log)
    text = log.read_text(errors="replace")
    assert "is not in the restored history" in text, "some rewind set published output aside"
    runs = text.split(f"\n===== {VENV_BIN / 'spark-submit'} ")  # each run's log starts with its command
    later_runs = "".join(runs[2:])
    assert "starts fresh" not in later_runs, "only the first run started from empty state"
    _assert_exactly_once(output, landing)


def test_a_relocated_savepoint_with_a_larger_id_restored_twice_keeps_exactly_once(tmp_path: Path, landing: Landing):
    """Job 'orders-v1' takes a savepoint (relocated afterwards) and runs on; job 'orders-v2', writing the same
    sink from an empty job folder, restores from the savepoint twice (killed mid-recovery, then right after its
    first checkpoint), then drains from latest. Ids never repeat in the sink and every row is published once."""
    output, log = tmp_path / "out", tmp_path / "job.log"
    settings = {"sink": f"parquet:{output}", "trigger": "continuous", "batch_interval": "200ms", "num_retained": "3"}
    elsewhere = {"savepoint_targets": str(tmp_path / "elsewhere")}
    v1 = job_args("orders-v1", tmp_path / "root", tmp_path / "work", landing, **settings, **elsewhere)
    v2 = job_args("orders-v2", tmp_path / "root", tmp_path / "work", landing, **settings)
    first = JobFolder(str(tmp_path / "root"), "orders-v1")
    second = JobFolder(str(tmp_path / "root"), "orders-v2")
    landing.add_files(3)

    process = spark_submit(v1, log)
    state = {}

    def savepoint_then_more() -> bool:
        if "savepoint" not in state:
            if max(_valid_ids(first), default=0) >= 2:
                ControlChannel(first).request("relocate", "savepoint", target_directory=str(tmp_path / "elsewhere"))
                state["savepoint"] = True
            return False
        answer = ControlChannel(first).response("relocate") or {}
        if answer.get("status") == "completed":
            state.setdefault("path", answer["savepoint_path"])
            state.setdefault("id", answer["savepoint_id"])
        return "id" in state and max(_valid_ids(first), default=0) >= state["id"] + 3

    _drive(process, log, landing, until=savepoint_then_more)
    figures.record_kill("random", REWINDS)
    relocated = tmp_path / "moved" / "savepoint"
    original = state["path"].removeprefix("file://")
    shutil.copytree(original, relocated)
    shutil.rmtree(original)
    published_by_v1 = ParquetSink(str(output)).highest_published_id()
    assert published_by_v1 > state["id"], "v1 published output after its savepoint"

    restore = _with_restore(v2, str(relocated))
    _run_killed(restore, log, landing, tmp_path, "rollback@1", 0)
    first_attempt = max(_valid_ids(second))  # the first attempt's checkpoint of the restored savepoint
    _run_killed(
        restore, log, landing, tmp_path, REWIND_STARTED, 1, until=lambda: max(_valid_ids(second)) > first_attempt
    )
    ids = _valid_ids(second)
    assert ids and min(ids) > published_by_v1, f"v2's ids {ids} reuse ids published by v1 (up to {published_by_v1})"
    latest = second.checkpoints.latest_valid().metadata
    assert latest.history.contains(state["id"]) and not latest.history.contains(published_by_v1)
    _drain(v2, log)
    _assert_exactly_once(output, landing)
