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
import time
from collections import Counter
from pathlib import Path

import pytest

from spark_checkpoint_runtime.layout import CheckpointStorage, ControlChannel
from tests import figures
from tests.conftest import Landing, final_counts, job_args, kill_group, published_rows, spark_submit

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
    **extra: str,
) -> Path:
    """Run ``job`` once per entry of ``plan`` (a fault point like ``upload@2``, or RANDOM), each killed.

    ``extra`` may move the checkpoint root (``checkpoint_root="s3://..."``); ``storage_options`` go to the
    runtime in a spec file, as the provider sends them.
    """
    root, work, output, log = tmp_path / "root", tmp_path / "work", tmp_path / "out", tmp_path / "job.log"
    settings = {"sink": f"parquet:{output}", "trigger": "continuous", "batch_interval": "200ms", "num_retained": "2"}
    args = job_args(job, root, work, landing, **{**settings, **extra})
    if storage_options:
        spec = tmp_path / "spec.json"
        spec.write_text(json.dumps({"storage_options": storage_options}))
        args += ["--spec", str(spec)]
    storage = CheckpointStorage(extra.get("checkpoint_root", str(root)), job, storage_options)

    def newest() -> int:
        return max((meta.id for meta in storage.completed_checkpoints()), default=0)

    landing.add_files(3)
    plan = plan + [RANDOM] * SOAK
    fresh_starts = 0
    for number, point in enumerate(plan):
        before = newest()
        fresh_starts += before == 0
        record = tmp_path / f"fault-{number}.txt"
        env = {} if point == RANDOM else {"CHECKPOINT_FAULTS": point, "CHECKPOINT_FAULTS_RECORD": str(record)}
        process = spark_submit(args, log, env=env)
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
        figures.record_kill(point.split("@")[0])

    drain = [a if a != "continuous" else "available-now" for a in args]
    drain += ["--conf", "spark.example.maxFilesPerTrigger=25"]  # the leftover backlog in a few batches
    fresh_starts += newest() == 0
    process = spark_submit(drain, log)
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
    output = run_chain(tmp_path, landing, "chaos-stateless", plan, rng)
    published = Counter(row["id"] for row in published_rows(output))
    expected = {row["id"] for row in landing.rows}
    lost = expected - set(published)
    duplicated = sum(n - 1 for n in published.values() if n > 1)
    figures.record_rows(len(expected), len(lost), duplicated, "exactly-once")
    assert not lost, f"{len(lost)} rows lost (seed {SEED})"
    assert duplicated == 0, f"{duplicated} rows published twice (seed {SEED})"
    assert set(published) == expected


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
