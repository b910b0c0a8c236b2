"""Issue 4's must-show: stop-with-savepoint, relocated restore, refused incompatible upgrade, retention.

v1 (a stateful running count) runs continuously in its own process;
``python -m spark_checkpoint_runtime savepoint --stop`` stops it through ``_control/`` and prints the
savepoint's path. The savepoint folder is copied elsewhere;
v2 (the same state plus a projected column) restores from the copy and the counts continue exactly; v3 (a
changed grouping key) is refused and the checkpoint root is left byte for byte as it was.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from spark_checkpoint_runtime.fingerprint import IncompatibleRestore
from spark_checkpoint_runtime.layout import ControlChannel, JobFolder
from spark_checkpoint_runtime.options import parse_options
from spark_checkpoint_runtime.retention import apply_job_retention, plan_job_retention
from spark_checkpoint_runtime.run import StreamingJob
from tests.support.helpers import (
    Landing,
    completed_checkpoints,
    continuous_counts_args,
    final_counts,
    job_args,
    kill_group,
    run_module,
    start_module,
    tree_state,
    wait_for,
)

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def _largest_counts(output: Path) -> dict[str, int]:
    largest = final_counts(output)
    return largest


def test_savepoint_upgrade_lifecycle(spark, tmp_path: Path, landing: Landing):
    root, work, output = tmp_path / "root", tmp_path / "work", tmp_path / "out"
    landing.add_files(6)
    v1_args = continuous_counts_args(
        "counts",
        root,
        work,
        landing,
        output,
        batch_interval="200ms",
        savepoint_targets=str(tmp_path / "targets"),  # savepoints may go there, besides the checkpoint root
    )
    v1 = start_module(v1_args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    control = ControlChannel(JobFolder(str(root), "counts"))
    wait_for(lambda: completed_checkpoints(root, "counts") and control.live_runs(), 180, "v1 running", v1)

    # A savepoint into a target directory while v1 keeps running.
    savepoint_cli = ["savepoint", "--job-name", "counts", "--checkpoint-root", str(root)]
    targets = ["--target-directory", str(tmp_path / "targets")]
    live = run_module([*savepoint_cli, *targets, "--trigger-id", "live-1", "--timeout", "3min"], timeout=240)
    assert live.returncode == 0, live.stderr[-3000:]
    assert live.stdout.strip().splitlines()[-1] == f"file://{tmp_path}/targets/savepoint-live-1"
    assert (tmp_path / "targets" / "savepoint-live-1" / "_metadata").exists() and v1.poll() is None

    # Stop-with-savepoint from the command line: the path is the last line; v1 exits 0.
    asked = run_module([*savepoint_cli, "--stop", "--trigger-id", "upgrade-1", "--timeout", "3min"], timeout=240)
    assert asked.returncode == 0, asked.stderr[-3000:]
    savepoint_url = asked.stdout.strip().splitlines()[-1]
    assert savepoint_url.endswith("/counts/savepoints/savepoint-upgrade-1")
    stdout, stderr = v1.communicate(timeout=120)
    assert v1.returncode == 0, stderr[-3000:]
    v1_result = json.loads(stdout.strip().splitlines()[-1].removeprefix("result: "))
    assert v1_result["status"] == "cancelled" and v1_result["savepoint_path"] == savepoint_url
    savepoint = Path(savepoint_url.removeprefix("file://"))
    meta = json.loads((savepoint / "_metadata").read_text())
    assert meta["kind"] == "savepoint" and all(not f["shared"] for f in meta["files"])
    assert all(not f["path"].startswith(("/", "..")) for f in meta["files"]), "relative paths: relocatable"
    assert not any((output / "_staging").glob("batch-*")), "the savepoint committed the sink"
    # Asking again with the same trigger id returns the same savepoint (the job is gone by now).
    again = run_module([*savepoint_cli, "--trigger-id", "upgrade-1"], timeout=120)
    assert again.returncode == 0 and again.stdout.strip().splitlines()[-1] == savepoint_url
    # No job running: a new savepoint request fails clearly instead of waiting forever.
    orphan = run_module(savepoint_cli, timeout=120)
    assert orphan.returncode == 1 and "no running job 'counts'" in orphan.stderr

    # Relocate the savepoint; v3 (changed grouping key) is refused and changes nothing.
    elsewhere = tmp_path / "archive" / "copied-savepoint"
    shutil.copytree(savepoint, elsewhere)
    landing.add_files(3)
    before = tree_state(root), tree_state(output)
    with pytest.raises(IncompatibleRestore) as refused:
        StreamingJob(
            parse_options(
                job_args(
                    "counts",
                    root,
                    work,
                    landing,
                    pipeline="examples.pipelines:running_counts_by_value",
                    output_mode="update",
                    sink=f"parquet:{output}",
                    restore_from=str(elsewhere),
                )
            ),
            spark,
        ).run()
    assert str(refused.value).startswith("incompatible restore from")
    assert "operator 0 (aggregation) key: [key: string] became [value: long]" in str(refused.value)
    assert (tree_state(root), tree_state(output)) == before

    # v2: the same state plus a projected column, restored from the copy: counts continue exactly.
    v2 = StreamingJob(
        parse_options(
            job_args(
                "counts",
                root,
                work,
                landing,
                pipeline="examples.pipelines:running_counts_with_label",
                output_mode="update",
                sink=f"parquet:{output}",
                restore_from=str(elsewhere),
                num_retained="50",  # keep v2's first checkpoint for the NO_CLAIM check below
            )
        ),
        spark,
    ).run()
    assert v2["restored_from"]["kind"] == "savepoint" and v2["restored_from"]["id"] == meta["id"]
    assert v2["checkpoint_id"] > meta["id"], "checkpoints and savepoints share one increasing counter"
    assert _largest_counts(output) == landing.counts_by_key()
    # The new column is in v2's files; readers see it when they merge schemas across files.
    merged = spark.read.option("mergeSchema", "true").parquet(str(output))
    labels = [r.label for r in merged.where("label IS NOT NULL").collect()]
    assert labels and all(label.startswith("k") and label.count(":") == 1 for label in labels)
    # NO_CLAIM: the first checkpoint after the restore references nothing of the savepoint, which is intact.
    first = json.loads((root / "counts" / f"chk-{v2['first_checkpoint_id']}" / "_metadata").read_text())
    assert all("savepoint" not in f["path"] for f in first["files"])
    assert tree_state(elsewhere) == tree_state(savepoint)

    # list / inspect show checkpoints and savepoints with sizes and durations.
    listed = run_module(["list", "--job-name", "counts", "--checkpoint-root", str(root)], timeout=120)
    assert listed.returncode == 0, listed.stderr
    assert "savepoint(s)" in listed.stdout.splitlines()[0]
    assert any(line.startswith("savepoint") and "savepoint-upgrade-1" in line for line in listed.stdout.splitlines())
    stats = json.loads(run_module(["inspect", "--job-name", "counts", "--checkpoint-root", str(root)]).stdout)
    assert stats["counts"]["savepoints"] == 1 and stats["counts"]["checkpoints"] >= 1
    assert stats["latest"]["savepoint"]["checkpoint_id"] == meta["id"]
    assert stats["summary"]["duration_ms"]["max"] is not None and stats["history"]

    # Retention with num_retained=1 keeps the savepoint (and the savepoint stays restorable).
    storage = JobFolder(str(root), "counts")
    plan = plan_job_retention(storage, num_retained=1, orphan_grace=0, now=__import__("time").time())
    apply_job_retention(storage, plan)
    assert len(completed_checkpoints(root, "counts")) == 1
    assert storage.savepoints.names() == ["savepoint-upgrade-1"]
    assert storage.resolve_snapshot(savepoint_url).metadata.kind == "savepoint"


def test_claim_mode_deletes_the_restored_savepoint_after_the_first_checkpoint(spark, tmp_path, landing):
    from spark_checkpoint_runtime.layout import SavepointFolder

    root, work, output = tmp_path / "root", tmp_path / "work", tmp_path / "out"
    landing.add_files(2)
    args = job_args(
        "claimed",
        root,
        work,
        landing,
        pipeline="examples.pipelines:running_counts",
        output_mode="update",
        sink=f"parquet:{output}",
    )
    StreamingJob(parse_options(args), spark).run()
    # Take a savepoint of the finished job's latest checkpoint by restoring it into a savepoint folder.
    storage = JobFolder(str(root), "claimed")
    latest = storage.checkpoints.latest_valid()
    folder = SavepointFolder(str(tmp_path / "sp"))
    for entry in latest.metadata.files:
        target = Path(folder.file_path(entry.target))
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(latest.file_path(entry), target)
    from dataclasses import replace

    from spark_checkpoint_runtime.layout import FileEntry

    files = [FileEntry(e.target, e.target, e.size, False) for e in latest.metadata.files]
    folder.write_metadata(replace(latest.metadata, kind="savepoint", files=files))
    landing.add_files(1)
    result = StreamingJob(
        parse_options(args + ["--restore-from", str(tmp_path / "sp"), "--claim-mode", "claim"]), spark
    ).run()
    assert result["restored_from"]["kind"] == "savepoint"
    assert not (tmp_path / "sp").exists(), "CLAIM: the job owned the savepoint and dropped it after its checkpoint"
    assert _largest_counts(output) == landing.counts_by_key()


def test_allow_non_restored_state_drops_trailing_operators_only(spark, tmp_path, landing):
    root, work = tmp_path / "root", tmp_path / "work"
    landing.add_files(2)
    stateful = job_args(
        "drop",
        root,
        work,
        landing,
        pipeline="examples.pipelines:running_counts",
        output_mode="update",
        sink=f"parquet:{tmp_path / 'out'}",
    )
    StreamingJob(parse_options(stateful), spark).run()
    stateless = job_args(
        "drop", root, work, landing, pipeline="examples.pipelines:events", sink=f"parquet:{tmp_path / 'out2'}"
    )
    with pytest.raises(IncompatibleRestore, match="stateful operators: snapshot has 1"):
        StreamingJob(parse_options(stateless), spark).run()
    landing.add_files(1)
    result = StreamingJob(parse_options(stateless + ["--allow-non-restored-state"]), spark).run()
    assert result["restored_from"] is not None and result["rows"] == 10, "continues from the offsets, new rows only"
    latest = json.loads((root / "drop" / f"chk-{result['checkpoint_id']}" / "_metadata").read_text())
    assert not any(f["target"].startswith("state/") for f in latest["files"]), "the dropped state is not carried"


@pytest.mark.parametrize("pipeline", ["running_counts", "transform_with_state_counts"])
def test_a_rocksdb_savepoint_copied_elsewhere_restores_exact_counts_and_stays_untouched(
    spark, tmp_path, landing, pipeline
):
    """A RocksDB savepoint is copied elsewhere, and the savepoint and the first run's working folder are deleted:
    the restore from the copy counts exactly and leaves the copy as it was. transformWithState names its state
    schema files by absolute path in its operator metadata: the restore must read them from its own copy."""
    from tests.support.state_matrix import STATE_CONFS, STORES, store_args

    root, work, output = tmp_path / "root", tmp_path / "work", tmp_path / "out"
    landing.add_files(5)
    common = {"pipeline": f"examples.pipelines:{pipeline}", "output_mode": "update", "sink": f"parquet:{output}"}
    log = tmp_path / "v1.log"
    with open(log, "w") as sink:  # a file, not a pipe: RocksDB logs enough to fill a pipe nobody reads yet
        v1 = start_module(
            job_args("rocks", root, work, landing, trigger="continuous", batch_interval="200ms", **common),
            conf=STORES["rocksdb-changelog"],
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        control = ControlChannel(JobFolder(str(root), "rocks"))
        running = lambda: len(completed_checkpoints(root, "rocks")) >= 3 and control.live_runs()  # noqa: E731
        wait_for(running, 180, "v1 running", v1)
        savepoint_cli = ["savepoint", "--job-name", "rocks", "--checkpoint-root", str(root), "--stop"]
        asked = run_module([*savepoint_cli, "--timeout", "3min"], timeout=240)
        assert asked.returncode == 0, asked.stderr[-3000:]
        assert v1.wait(timeout=120) == 0, log.read_text()[-3000:]
    finally:
        kill_group(v1)  # only if a step above failed: it has exited otherwise
    savepoint = Path(asked.stdout.strip().splitlines()[-1].removeprefix("file://"))
    meta = json.loads((savepoint / "_metadata").read_text())
    targets = [f["target"] for f in meta["files"]]
    assert any("/SSTs/" in t or t.endswith(".changelog") for t in targets), targets
    assert meta["fingerprint"]["state_store"]["provider"] == "RocksDBStateStoreProvider"

    if pipeline == "transform_with_state_counts":
        schemas = [t for t in targets if "/_stateSchema/" in t]
        assert schemas and any("/_metadata/v2/" in t for t in targets), targets

    elsewhere = tmp_path / "archive" / "rocks-savepoint"
    shutil.copytree(savepoint, elsewhere)
    shutil.rmtree(savepoint)  # only the copy is left
    shutil.rmtree(work)  # and nothing the first run wrote outside the checkpoint root
    copied = tree_state(elsewhere)
    landing.add_files(3)
    try:
        argv = job_args(
            "rocks", root, tmp_path / "work-v2", landing, restore_from=str(elsewhere), num_retained="50", **common
        ) + store_args("rocksdb-changelog")
        v2 = StreamingJob(parse_options(argv), spark).run()
    finally:
        for key in STATE_CONFS:
            spark.conf.unset(key)
    assert v2["restored_from"]["kind"] == "savepoint"
    assert final_counts(output) == landing.counts_by_key()
    assert tree_state(elsewhere) == copied, "NO_CLAIM: the restored savepoint is left exactly as it was"
    first = json.loads((root / "rocks" / f"chk-{v2['first_checkpoint_id']}" / "_metadata").read_text())
    assert all("rocks-savepoint" not in f["path"] for f in first["files"]), "nothing references the savepoint"
