"""The runtime in-process against one shared local SparkSession: retention, incremental checkpoints,
damaged-checkpoint fallback, compatibility checks, sink modes."""

from __future__ import annotations

import json
import os
import threading
import time
from collections import Counter

import pytest

from spark_checkpoint_runtime.errors import ExistingOutput
from spark_checkpoint_runtime.fingerprint import IncompatibleRestore
from spark_checkpoint_runtime.layout import JobFolder
from tests.support.helpers import final_counts, published_rows, tree_state
from tests.support.helpers import run_job as run
from tests.support.state_matrix import ROCKSDB

pytestmark = pytest.mark.spark


def test_retention_keeps_num_retained_and_exactly_the_referenced_shared_files(spark, tmp_path, landing):
    landing.add_files(6)
    result = run(
        spark,
        "retained",
        tmp_path,
        landing,
        pipeline="examples.pipelines:running_counts",
        output_mode="update",
        num_retained="2",
    )
    assert len(result["checkpoints_completed"]) >= 5
    storage = JobFolder(str(tmp_path / "root"), "retained")
    folders = sorted(p.name for p in (tmp_path / "root" / "retained").glob("chk-*"))
    assert folders == [f"chk-{i}" for i in result["checkpoints_completed"][-2:]]
    referenced = {f.path for meta in storage.checkpoints.completed() for f in meta.files if f.shared}
    on_disk = set(storage.checkpoints.shared_files())
    assert referenced and referenced == on_disk, "no unreferenced shared file, none referenced missing"
    assert (tmp_path / "work" / "retained").exists() and not any((tmp_path / "work" / "retained").iterdir())


def test_incremental_checkpoint_writes_a_small_part_of_a_large_state(spark, tmp_path, landing):
    landing.add_file(rows=40_000, keys=[f"key-{n}" for n in range(40_000)])
    first = run(
        spark, "incremental", tmp_path, landing, pipeline="examples.pipelines:running_counts", output_mode="update"
    )
    landing.add_file(rows=5, keys=["key-1", "key-2"])
    second = run(
        spark, "incremental", tmp_path, landing, pipeline="examples.pipelines:running_counts", output_mode="update"
    )
    assert second["restored_from"]["id"] == first["checkpoint_id"]
    meta = json.loads((tmp_path / "root" / "incremental" / f"chk-{second['checkpoint_id']}" / "_metadata").read_text())
    assert meta["state_bytes"] > 150_000
    assert meta["bytes_written"] < meta["state_bytes"] / 20, (meta["bytes_written"], meta["state_bytes"])
    reused = [f for f in meta["files"] if f["shared"] and f"/{first['run_id']}/" in f["path"]]
    assert reused, "state files of the first run are referenced, not uploaded again"
    counts = {r["key"]: r["count"] for r in published_rows(tmp_path / "out") if r["key"] in ("key-1", "key-2")}
    assert max(counts.values()) >= 3  # counts continued from the restored state, not from empty


@pytest.mark.parametrize("damage", ["truncated _metadata", "missing shared file"])
def test_damaged_newest_checkpoint_falls_back_to_the_previous_one(spark, tmp_path, landing, caplog_info, damage):
    landing.add_files(3)
    first = run(spark, "damaged", tmp_path, landing, pipeline="examples.pipelines:running_counts", output_mode="update")
    newest, previous = first["checkpoints_completed"][-1], first["checkpoints_completed"][-2]
    job = tmp_path / "root" / "damaged"
    meta_path = job / f"chk-{newest}" / "_metadata"
    if damage == "truncated _metadata":
        meta_path.write_text(meta_path.read_text()[:100])
        reason = "not valid JSON"
    else:
        files = json.loads(meta_path.read_text())["files"]
        older = {f["path"] for f in json.loads((job / f"chk-{previous}" / "_metadata").read_text())["files"]}
        only_newest = [f["path"] for f in files if f["shared"] and f["path"] not in older]
        (job / only_newest[0]).unlink()
        reason = f"missing {only_newest[0]}"
    landing.add_files(2)
    second = run(
        spark, "damaged", tmp_path, landing, pipeline="examples.pipelines:running_counts", output_mode="update"
    )
    assert second["restored_from"]["id"] == previous
    assert f"skipping damaged checkpoint chk-{newest}" in caplog_info.text and reason in caplog_info.text
    assert second["checkpoint_id"] > newest, "ids keep increasing past the damaged one"
    largest = final_counts(tmp_path / "out")
    assert largest == landing.counts_by_key()
    assert any((tmp_path / "out" / "_rolled_back").rglob("*.parquet")), "output after the fallback point moved aside"


def test_incompatible_plan_is_refused_before_anything_is_written(spark, tmp_path, landing):
    landing.add_files(2)
    run(spark, "compat", tmp_path, landing, pipeline="examples.pipelines:running_counts", output_mode="update")
    before = tree_state(tmp_path / "root"), tree_state(tmp_path / "out")
    landing.add_files(1)
    with pytest.raises(IncompatibleRestore) as refused:
        run(
            spark,
            "compat",
            tmp_path,
            landing,
            pipeline="examples.pipelines:running_counts_by_value",
            output_mode="update",
        )
    message = str(refused.value)
    assert message.startswith("incompatible restore from file://")
    assert "key: [key: string] became [value: long]" in message
    with pytest.raises(IncompatibleRestore, match=r"state schema: \[count\(1: integer\)\] became"):
        run(
            spark,
            "compat",
            tmp_path,
            landing,
            pipeline="examples.pipelines:running_counts_with_total",
            output_mode="update",
        )
    with pytest.raises(IncompatibleRestore, match="conf spark.sql.shuffle.partitions: 2 became 3"):
        run(
            spark,
            "compat",
            tmp_path,
            landing,
            pipeline="examples.pipelines:running_counts",
            output_mode="update",
            conf="spark.sql.shuffle.partitions=3",
        )
    spark.conf.set("spark.sql.shuffle.partitions", "2")
    assert (tree_state(tmp_path / "root"), tree_state(tmp_path / "out")) == before
    # A filter in front of the same aggregation keeps the state: allowed.
    result = run(
        spark,
        "compat",
        tmp_path,
        landing,
        pipeline="examples.pipelines:running_counts_of_big_values",
        output_mode="update",
    )
    assert result["restored_from"] is not None and result["batches"] == 1
    # The report says where the restart's time went, step by step, in the order the steps ran.
    steps = result["step_seconds"]
    assert list(steps)[:4] == ["plan", "session", "pipeline", "settle"]
    assert {"working_copy", "query", "final_checkpoint", "shutdown", "release"} <= set(steps)
    assert all(seconds >= 0 for seconds in steps.values()) and steps["query"] > 0


def test_at_least_once_publishes_every_batch_and_spark_reads_the_output(spark, tmp_path, landing):
    landing.add_files(3)
    result = run(spark, "alo", tmp_path, landing, checkpointing_mode="at-least-once", checkpoint_interval="1h")
    assert result["batches"] == 3 and result["rows"] == 30
    output = str(tmp_path / "out")
    assert sorted(r.id for r in spark.read.parquet(output).collect()) == list(range(30))
    assert len(result["checkpoints_completed"]) == 2  # the first periodic one, then the final one
    meta = json.loads((tmp_path / "root" / "alo" / f"chk-{result['checkpoint_id']}" / "_metadata").read_text())
    assert meta["checkpointing_mode"] == "at-least-once" and meta["batch_id"] == 2


def test_exactly_once_output_holds_only_committed_batches(spark, tmp_path, landing):
    """Staged output stays invisible until a checkpoint covers it; readers see only committed rows."""
    landing.add_files(2)
    run(spark, "eo", tmp_path, landing, checkpoint_interval="1h")
    output = tmp_path / "out"
    staged = output / "_staging" / "batch-7"
    staged.mkdir(parents=True)
    (staged / "part-00000-leftover.parquet").write_bytes(b"not parquet: a crashed batch's staging")
    assert sorted(r.id for r in spark.read.parquet(str(output)).collect()) == list(range(20))
    assert sorted(r["id"] for r in published_rows(output)) == list(range(20))
    landing.add_files(1)
    run(spark, "eo", tmp_path, landing, checkpoint_interval="1h")  # restore aborts the staged leftover
    assert not staged.exists()
    assert sorted(r["id"] for r in published_rows(output)) == list(range(30))


def test_externalized_retention_delete_on_cancellation_discards_checkpoints_not_output(spark, tmp_path, landing):
    landing.add_files(2)
    result = run(spark, "ext", tmp_path, landing, externalized_retention="delete-on-cancellation")
    assert result["status"] == "finished"
    assert not list((tmp_path / "root" / "ext").glob("chk-*"))
    assert sorted(r["id"] for r in published_rows(tmp_path / "out")) == list(range(20))


def test_a_state_store_with_an_unknown_file_layout_is_refused_naming_it(spark, tmp_path, landing):
    from spark_checkpoint_runtime.state_files import UnsupportedStateStore

    landing.add_files(1)
    provider = "com.example.streaming.CustomStateStoreProvider"
    try:
        with pytest.raises(UnsupportedStateStore, match=f"state store provider {provider}: its file layout is unknown"):
            run(
                spark,
                "custom",
                tmp_path,
                landing,
                pipeline="examples.pipelines:running_counts",
                output_mode="update",
                conf=f"spark.sql.streaming.stateStore.providerClass={provider}",
            )
    finally:
        spark.conf.unset("spark.sql.streaming.stateStore.providerClass")
    assert not (tmp_path / "root").exists() and not (tmp_path / "work").exists()


def test_rocksdb_format_v2_changelogs_in_a_codec_whose_lineage_cannot_be_read_are_refused_before_the_run(
    spark, tmp_path, landing
):
    """Fresh, the session's codec decides; restored, the codec the snapshot's query pinned (Spark keeps it)."""
    from dataclasses import replace

    from spark_checkpoint_runtime.layout import METADATA_FILE
    from spark_checkpoint_runtime.state_files import UnsupportedStateStore
    from spark_checkpoint_runtime.state_files.lineage import CODEC_CONF

    landing.add_files(1)
    confs = {
        "spark.sql.streaming.stateStore.providerClass": ROCKSDB,
        "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
        "spark.sql.streaming.stateStore.checkpointFormatVersion": "2",
    }
    counts = {"pipeline": "examples.pipelines:running_counts", "output_mode": "update"}
    try:
        for key, value in confs.items():
            spark.conf.set(key, value)
        spark.conf.set(CODEC_CONF, "snappy")
        with pytest.raises(UnsupportedStateStore, match="codec=snappy with RocksDB changelogs in checkpoint format v2"):
            run(spark, "v2", tmp_path, landing, **counts)
        assert not (tmp_path / "root").exists() and not (tmp_path / "work").exists()
        spark.conf.unset(CODEC_CONF)
        assert run(spark, "v2", tmp_path, landing, **counts)["status"] == "finished"
        # A snapshot whose query pinned snappy (taken before this check existed): its restore is refused too,
        # although the session now says nothing (Spark would write snappy again).
        storage = JobFolder(str(tmp_path / "root"), "v2")
        newest = storage.checkpoints.newest_metadata_id()
        latest = storage.checkpoints.read(newest)
        pinned = {**latest.fingerprint["pinned_confs"], CODEC_CONF: "snappy"}
        edited = replace(latest, fingerprint={**latest.fingerprint, "pinned_confs": pinned})
        (tmp_path / "root" / "v2" / f"chk-{newest}" / METADATA_FILE).write_bytes(edited.to_bytes())
        with pytest.raises(UnsupportedStateStore, match="codec=snappy .* restored query keeps the codec"):
            run(spark, "v2", tmp_path, landing, **counts)
    finally:
        for key in (*confs, CODEC_CONF):
            spark.conf.unset(key)


def test_failed_checkpoints_beyond_tolerance_fail_the_job_and_publish_nothing(spark, tmp_path, landing):
    from spark_checkpoint_runtime.errors import JobFailed

    landing.add_files(4)
    job = tmp_path / "root" / "failing"
    job.mkdir(parents=True)
    (job / "shared").write_text("a file where the shared folder belongs: every state upload fails")
    with pytest.raises(JobFailed, match=r"consecutive failed checkpoint\(s\) exceed --tolerable-failed-checkpoints 1"):
        run(
            spark,
            "failing",
            tmp_path,
            landing,
            pipeline="examples.pipelines:running_counts",
            output_mode="update",
            tolerable_failed_checkpoints="1",
        )
    assert not list(job.glob("chk-*/_metadata")), "a failed checkpoint never counts as complete"
    assert published_rows(tmp_path / "out") == [], "exactly-once: nothing published without a checkpoint"


def test_max_duration_stops_a_busy_continuous_job_within_a_batch(spark, tmp_path, landing):
    """Back-to-back batches (a backlog, trigger interval 0) leave no idle gap: the stop must not wait for
    the backlog to drain. The batch after the stop is refused, nothing of it is staged, and the next run
    continues exactly where the final checkpoint left off."""
    landing.add_files(150, rows=5)
    total = len(landing.rows)
    # Hostile control requests waiting for the job: each is refused with its reason, none acted on.
    requests = tmp_path / "root" / "busy" / "_control" / "requests"
    requests.mkdir(parents=True)
    hostile = {
        "garbled": "{not json",
        "huge": json.dumps({"action": "savepoint", "target_directory": "x" * 20_000}),
        "surprise": json.dumps({"action": "savepoint", "created_ms": 1, "exec": "rm -rf /"}),
        "unknown-action": json.dumps({"action": "drop-everything"}),
        "escape": json.dumps({"action": "savepoint", "run_key": "../../etc"}),
    }
    for name, text in hostile.items():
        (requests / f"{name}.json").write_text(text)
    first = run(spark, "busy", tmp_path, landing, trigger="continuous", batch_interval="0ms", max_duration="15s")
    assert first["status"] == "cancelled"
    responses = tmp_path / "root" / "busy" / "_control" / "responses"
    reasons = {name: json.loads((responses / f"{name}.json").read_text()) for name in hostile}
    assert all(answer["status"] == "rejected" for answer in reasons.values()), reasons
    assert "not valid JSON" in reasons["garbled"]["reason"] and "at most" in reasons["huge"]["reason"]
    assert "unknown field(s) exec" in reasons["surprise"]["reason"]
    assert "unknown action" in reasons["unknown-action"]["reason"]
    assert "run key '../../etc' is not allowed" in reasons["escape"]["reason"]
    assert not (tmp_path / "root" / "busy" / "savepoints").exists()
    assert 0 < first["rows"] < total, "stopped mid-backlog instead of draining it"
    assert not any((tmp_path / "out" / "_staging").glob("batch-*"))
    try:  # available-now drains the rest, 50 files a batch
        second = run(spark, "busy", tmp_path, landing, conf="spark.example.maxFilesPerTrigger=50")
    finally:
        spark.conf.unset("spark.example.maxFilesPerTrigger")
    assert second["restored_from"]["id"] == first["checkpoint_id"]
    assert sorted(r["id"] for r in published_rows(tmp_path / "out")) == sorted(r["id"] for r in landing.rows)


def test_a_fresh_start_into_published_output_needs_an_explicit_choice(spark, tmp_path, landing):
    landing.add_files(2)
    run(spark, "fresh", tmp_path, landing)
    output = tmp_path / "out"
    before = tree_state(output)
    with pytest.raises(ExistingOutput, match=r"already holds output published up to checkpoint \d+"):
        run(spark, "fresh", tmp_path, landing, restore_from="none")
    assert tree_state(output) == before, "a refused fresh start touches nothing"
    run(spark, "fresh", tmp_path, landing, restore_from="none", existing_output="move-aside")
    published = Counter(row["id"] for row in published_rows(output))
    assert set(published.values()) == {1} and set(published) == {row["id"] for row in landing.rows}
    assert list((output / "_rolled_back").rglob("c*-b*")), "the first run's output was set aside, not deleted"


def test_a_shared_file_deleted_behind_a_running_jobs_back_never_costs_the_last_valid_checkpoint(
    spark, tmp_path, landing, caplog_info
):
    """A state file that later checkpoints keep referencing disappears mid-run. Retention keeps the newest
    valid checkpoint, the next checkpoint stores the file again, and a restore from latest is exact."""
    storage = JobFolder(str(tmp_path / "root"), "vanishing")
    landing.add_files(2)
    deleted: dict[str, str] = {}
    stop = threading.Event()

    def saboteur() -> None:
        next_file = time.monotonic()
        while not stop.is_set():
            if time.monotonic() >= next_file:
                landing.add_file()
                next_file += 0.7
            metas = storage.checkpoints.completed() if not deleted else []
            if len(metas) >= 2:
                earlier = {f.path for f in metas[0].files}
                new = [
                    f for f in metas[1].files if f.shared and f.target.startswith("state/") and f.path not in earlier
                ]
                if new:
                    os.remove(storage.job_file(new[0].path))
                    deleted["path"], deleted["target"] = new[0].path, new[0].target
            time.sleep(0.05)

    thread = threading.Thread(target=saboteur, daemon=True)
    thread.start()
    try:
        result = run(
            spark,
            "vanishing",
            tmp_path,
            landing,
            pipeline="examples.pipelines:running_counts",
            output_mode="update",
            trigger="continuous",
            batch_interval="300ms",
            max_duration="12s",
            num_retained="2",
        )
    finally:
        stop.set()
        thread.join()
    assert deleted, "the test deleted a shared state file while the job ran"
    assert "lists shared files that are gone" in caplog_info.text
    latest = storage.checkpoints.latest_valid()
    assert latest is not None and latest.metadata.id == result["checkpoint_id"]
    # Stored again under its own name, unless Spark no longer needs it by the end (a snapshot file replaced
    # its delta chain: on a loaded machine the run's batches fall differently).
    needed = [f for f in latest.metadata.files if f.target == deleted["target"]]
    assert not needed or any(f.path == deleted["path"] for f in needed), "stored again under its own name"
    landing.add_files(1)
    run(spark, "vanishing", tmp_path, landing, pipeline="examples.pipelines:running_counts", output_mode="update")
    assert final_counts(tmp_path / "out") == landing.counts_by_key()


class FailingCommitSink:
    """Stages like any sink, but publishing fails (a full disk, revoked credentials)."""

    def write(self, batch_id, df, run_id):
        df.count()

    def commit(self, staged):
        raise OSError("no space left on device (planted)")

    def recover(self, staged, lineage):
        return None


def test_a_failed_publish_after_the_final_checkpoint_fails_the_run(spark, tmp_path, landing):
    """The snapshot is durable, but its output did not reach readers: the run must not report success."""
    from spark_checkpoint_runtime.errors import JobFailed

    landing.add_files(1)
    with pytest.raises(JobFailed, match="no space left on device"):
        run(spark, "unpublished", tmp_path, landing, sink="tests.integration.test_runtime_inprocess:FailingCommitSink")


def test_spark_keeps_a_short_history_in_the_working_folder_unless_the_job_sets_its_own(spark, tmp_path, landing):
    """Restores come from the job's checkpoints, so Spark's own history in the private working folder is cut
    to ``WORKING_HISTORY_BATCHES`` batches (Spark's default, 100, only lengthens every capture's listing). A
    job that sets ``spark.sql.streaming.minBatchesToRetain`` keeps its value; the session is left as found."""
    from spark_checkpoint_runtime.run.session import (
        WORKING_HISTORY_BATCHES,
        WORKING_HISTORY_CONF,
        bounded_working_history,
        is_set,
    )

    landing.add_files(WORKING_HISTORY_BATCHES + 15)  # one file a batch
    most, stop = [0], threading.Event()

    def count_offsets() -> None:  # Spark's offset log: one file per batch it still keeps
        while not stop.is_set():
            try:
                logs = list((tmp_path / "work").glob("**/offsets/*"))
            except FileNotFoundError:  # a folder (a frozen capture) went while the walk was in it: look again
                continue
            most[0] = max(most[0], sum(1 for f in logs if f.name.isdigit()))
            time.sleep(0.02)

    watcher = threading.Thread(target=count_offsets, daemon=True)
    watcher.start()
    try:
        result = run(spark, "history", tmp_path, landing)
    finally:
        stop.set()
        watcher.join()
    assert result["batch_id"] == WORKING_HISTORY_BATCHES + 14
    # Without the cut the log would reach 25 entries. Spark purges after a batch's commit (asynchronously since
    # 3.4), so a look may see a few entries more than 10, or fewer; a loaded machine saw at most 8 in CI.
    assert 0 < most[0] <= WORKING_HISTORY_BATCHES + 5, most[0]
    assert not is_set(spark, WORKING_HISTORY_CONF), "the session is left as it was found"
    assert sorted(r["id"] for r in published_rows(tmp_path / "out")) == sorted(r["id"] for r in landing.rows)

    spark.conf.set(WORKING_HISTORY_CONF, "40")
    try:
        with bounded_working_history(spark):
            assert spark.conf.get(WORKING_HISTORY_CONF) == "40", "the job's own setting wins"
        assert spark.conf.get(WORKING_HISTORY_CONF) == "40"
    finally:
        spark.conf.unset(WORKING_HISTORY_CONF)
