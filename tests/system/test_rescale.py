"""Rescale across process boundaries: a running stateful job (4 partitions) stops with a savepoint;
``python -m spark_checkpoint_runtime rescale`` is SIGKILLed half-way, which leaves the source savepoint byte for
byte as it was and nothing a restore would take; run again, it writes the savepoint, and the job restored from
it runs at 8 partitions with every count exact. For each store: RocksDB killed while the rescaled savepoint's
files are written, the HDFS-backed store while our rewrite re-pins the offset log in the working folder (whose
files are hard links to the source's on local disk: a write in place there would change the source)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import psutil
import pytest

from spark_checkpoint_runtime.layout import CheckpointFormatError, ControlChannel, JobFolder
from tests.support.helpers import (
    REPO,
    Landing,
    completed_checkpoints,
    continuous_counts_args,
    final_counts,
    run_module,
    start_module,
    subprocess_env,
    tree_state,
    wait_for,
)
from tests.support.state_matrix import HDFS, ROCKSDB

pytestmark = [pytest.mark.spark, pytest.mark.slow]

PROVIDER = "spark.sql.streaming.stateStore.providerClass"
SHUFFLE = "spark.sql.shuffle.partitions"


def _stop_with_savepoint(root: Path, job: str, trigger_id: str) -> str:
    cli = ["savepoint", "--job-name", job, "--checkpoint-root", str(root), "--stop", "--trigger-id", trigger_id]
    asked = run_module([*cli, "--timeout", "3min"], timeout=240)
    assert asked.returncode == 0, asked.stderr[-3000:]
    return asked.stdout.strip().splitlines()[-1]


@pytest.mark.parametrize(
    ("store", "fault", "unfinished"),
    [
        # RocksDB: Spark's repartition, then our savepoint upload; killed after its 3rd file.
        pytest.param(ROCKSDB, "savepoint@3", True, id="rocksdb-killed-uploading"),
        # HDFS-backed: 4 old partitions moved (hits 1-4), then killed after the first offset log file is
        # re-pinned (hit 5): before any savepoint file exists.
        pytest.param(HDFS, "rescale@5", False, id="hdfs-killed-rewriting"),
    ],
)
def test_a_rescale_killed_half_way_leaves_the_source_and_a_rerun_runs_the_job_at_the_new_count(
    tmp_path: Path, landing: Landing, store: str, fault: str, unfinished: bool
):
    root, work, output = tmp_path / "root", tmp_path / "work", tmp_path / "out"
    job = f"counts-{store.rsplit('.', 1)[-1].removesuffix('StateStoreProvider').lower()}"  # its own temp folders
    landing.add_files(4)
    args = continuous_counts_args(job, root, work, landing, output, batch_interval="200ms")
    v1 = start_module(args, conf={SHUFFLE: "4", PROVIDER: store}, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    control = ControlChannel(JobFolder(str(root), job))
    wait_for(lambda: completed_checkpoints(root, job) and control.live_runs(), 180, "v1 running", v1)
    source_url = _stop_with_savepoint(root, job, "before-rescale")
    _, stderr = v1.communicate(timeout=120)
    assert v1.returncode == 0, stderr[-3000:]
    source = Path(source_url.removeprefix("file://"))
    before = tree_state(source)

    rescale = ["rescale", "--job-name", job, "--checkpoint-root", str(root), "--from", source_url, "--partitions", "8"]
    private = Path(tempfile.gettempdir())
    folders_before = set(private.glob(f"rescale-{job}-p*"))
    killed = subprocess.run(
        [sys.executable, "-m", "spark_checkpoint_runtime", *rescale],
        cwd=REPO,
        env={**subprocess_env(), "CHECKPOINT_FAULTS": fault},
        capture_output=True,
        text=True,
        timeout=300,
        start_new_session=True,  # the fault kills the whole group: the Python driver and its Spark JVM
    )
    assert killed.returncode == -9, killed.stderr[-3000:]
    assert tree_state(source) == before, "the killed rescale changed its source savepoint"
    assert f"SIGKILL at {fault}" in killed.stderr, killed.stderr[-3000:]
    # Its private folder (the materialised snapshot, as large as the state) outlived it; the next rescale removes it.
    orphans = [
        p
        for p in set(private.glob(f"rescale-{job}-p*")) - folders_before
        if not psutil.pid_exists(int(re.search(r"-p(\d+)-", p.name)[1]))
    ]
    assert orphans, "the killed rescale left no private folder"
    halves = [p for p in (root / job / "savepoints").iterdir() if p.name.startswith("savepoint-rescale-")]
    if unfinished:
        assert (
            len(halves) == 1
            and not (halves[0] / "_metadata").exists()
            and any(p.is_file() for p in halves[0].rglob("*"))
        )
        with pytest.raises(
            CheckpointFormatError, match="is an unfinished snapshot: the folder has files but no _metadata"
        ):
            JobFolder(str(root), job).resolve_snapshot(str(halves[0]))
    else:
        assert halves == [], "a rescale killed before its savepoint's first file left a savepoint folder"
    listed = run_module(["list", "--job-name", job, "--checkpoint-root", str(root), "--json"])
    assert all(str(half) not in listed.stdout for half in halves) and source_url in listed.stdout

    again = run_module(rescale, timeout=300)
    assert again.returncode == 0, again.stderr[-3000:]
    assert not [p for p in orphans if p.exists()], "the killed rescale's private folder outlived the next rescale"
    rescaled = again.stdout.strip().splitlines()[-1]
    meta = json.loads((Path(rescaled.removeprefix("file://")) / "_metadata").read_text())
    assert meta["fingerprint"]["pinned_confs"][SHUFFLE] == "8" and meta["restored_from"]["path"] == source_url
    assert tree_state(source) == before

    # The job restored from the rescaled savepoint: 4 partitions asked beside it is refused, 8 runs.
    refused = run_module([*args, "--restore-from", rescaled, "--conf", f"{SHUFFLE}=4", "--conf", f"{PROVIDER}={store}"])
    assert refused.returncode == 3 and f"conf {SHUFFLE}: 8 became 4" in refused.stderr, refused.stderr[-2000:]
    landing.add_files(3)
    v2 = start_module(
        [*args, "--restore-from", rescaled],
        conf={SHUFFLE: "8", PROVIDER: store},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    wait_for(lambda: len(completed_checkpoints(root, job)) and v2.poll() is None and control.live_runs(), 180, "v2", v2)
    wait_for(lambda: final_counts(output) == landing.counts_by_key(), 180, "every count after the rescale", v2)
    _stop_with_savepoint(root, job, "after-rescale")
    _, stderr = v2.communicate(timeout=120)
    assert v2.returncode == 0, stderr[-3000:]
    storage = JobFolder(str(root), job)
    newest = storage.checkpoints.read(storage.checkpoints.ids()[-1])
    assert newest.fingerprint["pinned_confs"][SHUFFLE] == "8" and newest.restored_from["id"] == meta["id"]
    assert final_counts(output) == landing.counts_by_key()
