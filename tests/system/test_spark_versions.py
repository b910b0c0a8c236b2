"""The Spark version matrix: the runtime on every supported Spark, and Spark upgrades through a savepoint.

Each Spark is a venv of its own (``tests/support/spark_installs.py``: 3.5 under Python 3.10, 4.0 to 4.2
under 3.11, 4.3 the project's own). For each one: the stateful crash chain on the HDFS and the RocksDB
store (real spark-submit of that Spark, SIGKILLed twice, exact output), the in-process operator sample
under that Spark's Python, the provider's operators submitting to that Spark's spark-submit, and the
upgrade of a running job from that Spark to the newest through a savepoint, with exact counts afterwards
and the way back refused.

The default run takes the oldest Spark (the newest is the suite's own: every other test runs on it);
``scripts/test.sh -m versions`` runs all of them and records the results for ``docs/spark-versions.md``
(``tests/support/version_matrix.py``).
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
from pathlib import Path

import pytest

from spark_checkpoint_runtime.layout import ControlChannel, JobFolder
from spark_checkpoint_runtime.rocksdb_transform import STATE_REWRITER_VERSION
from spark_checkpoint_runtime.spark_versions import OFFLINE_REPARTITION, parse_version
from spark_checkpoint_runtime.state_inspection import STATE_DATA_SOURCE
from tests.support.airflow_env import load_dag, task_states, xcom
from tests.support.helpers import (
    REPO,
    Landing,
    completed_checkpoints,
    continuous_counts_args,
    final_counts,
    job_args,
    published_rows,
    spark_submit,
    subprocess_env,
    wait_for,
)
from tests.support.spark_installs import INSTALLS, NEWEST, OLDEST, SparkInstall
from tests.support.state_matrix import FAMILIES, store_args
from tests.system.test_chaos import RANDOM, SEED, run_chain

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.versions]


def versions(installs: tuple[SparkInstall, ...] | list[SparkInstall]) -> list:
    """One param per Spark; all but the oldest run only with ``-m versions``."""
    return [
        pytest.param(i, id=f"spark-{i.minor}", marks=() if i is OLDEST else pytest.mark.versions_between)
        for i in installs
    ]


@pytest.fixture
def matrix(request):
    """Records this test's Spark and check for the compatibility table; returns the entry to add details to."""

    def record(install: SparkInstall, check: str) -> dict:
        entry = {"spark": install.version, "python": install.python, "check": check, "detail": "", "notes": []}
        request.node.user_properties.append(("spark_matrix", entry))
        return entry

    return record


def newest_savepoint(root: Path, job: str):
    storage = JobFolder(str(root), job)
    return storage.savepoints.read(storage.savepoints.names()[-1])


def newest_metadata(root: Path, job: str):
    storage = JobFolder(str(root), job)
    return storage.checkpoints.read(max(completed_checkpoints(root, job)))


@pytest.mark.parametrize("store", ["hdfs", "rocksdb"])
@pytest.mark.parametrize("install", versions(INSTALLS))
def test_crash_chain_on_each_spark(tmp_path: Path, landing: Landing, matrix, install: SparkInstall, store: str):
    """Killed twice (inside a checkpoint's upload, then at random) and restored from latest: exact output."""
    matrix(install, f"crash-chain-{store}")
    install.ensure()
    family = FAMILIES["aggregation" if store == "hdfs" else "dedup"]
    rng = random.Random(f"{SEED}-{install.version}-{store}")
    output = run_chain(
        tmp_path,
        landing,
        "versions",
        [f"upload@{rng.randint(2, 3)}", RANDOM],
        rng,
        spark_conf=store_args(store),
        pipeline=f"examples.pipelines:{family.pipeline}",
        output_mode=family.output_mode,
        spark_submit_path=install.spark_submit,
    )
    problems = family.check(output, landing)
    assert not problems, f"Spark {install.version}, {store} (seed {SEED}): {problems[:10]}"
    assert newest_metadata(tmp_path / "root", "versions").spark_version == install.version
    if store == "rocksdb":
        _rescale_or_refuse(tmp_path, install)
        _transform_and_continue(tmp_path, landing, install, family, store)
    else:
        _rescale_and_continue(tmp_path, landing, install, family)
        _transform_and_continue(tmp_path, landing, install, family)


def _rescale_and_continue(tmp_path: Path, landing: Landing, install: SparkInstall, family) -> None:
    """The HDFS-backed store's state rescaled on this Spark (our own rewrite, on every version), then the job
    restored from it at the new count with more input: every count exact."""
    root = tmp_path / "root"
    args = ["rescale", "--job-name", "versions", "--checkpoint-root", str(root), "--partitions", "3"]
    log = tmp_path / "rescale.log"
    code = spark_submit(args, log, spark_submit_path=install.spark_submit).wait(timeout=300)
    text = log.read_text(errors="replace")
    assert code == 0, text[-3000:]
    storage = JobFolder(str(root), "versions")
    rescaled = storage.url_of(storage.savepoints.path(storage.savepoints.names()[-1]))
    assert rescaled in text, text[-3000:]  # the path the command printed (the log also holds Spark's lines)
    assert newest_savepoint(root, "versions").fingerprint["pinned_confs"]["spark.sql.shuffle.partitions"] == "3"
    _continue_from(tmp_path, landing, install, family, rescaled, "rescaled-run.log")
    assert newest_metadata(root, "versions").fingerprint["pinned_confs"]["spark.sql.shuffle.partitions"] == "3"
    problems = family.check(tmp_path / "out", landing)
    assert not problems, f"Spark {install.version}, rescaled HDFS state: {problems[:10]}"


def _continue_from(
    tmp_path: Path,
    landing: Landing,
    install: SparkInstall,
    family,
    savepoint: str,
    log_name: str,
    store: str = "hdfs",
    partitions: int | None = 3,
) -> None:
    """Two more files, then the job on this Spark restored from ``savepoint`` (at ``partitions``): exit 0."""
    landing.add_files(2)
    run = job_args(
        "versions",
        tmp_path / "root",
        tmp_path / "work",
        landing,
        sink=f"parquet:{tmp_path / 'out'}",
        pipeline=f"examples.pipelines:{family.pipeline}",
        output_mode=family.output_mode,
    )
    run += [*store_args(store), "--restore-from", savepoint]
    if partitions is not None:
        run += ["--conf", f"spark.sql.shuffle.partitions={partitions}"]
    log = tmp_path / log_name
    code = spark_submit(run, log, spark_submit_path=install.spark_submit).wait(timeout=300)
    assert code == 0, log.read_text(errors="replace")[-3000:]


def _transform_and_continue(
    tmp_path: Path, landing: Landing, install: SparkInstall, family, store: str = "hdfs"
) -> None:
    """``transform`` on this Spark (Spark 4.0+, where the state data source reads the rows; RocksDB state on
    4.3+, where Spark's state rewriter writes it): an identity transform of the newest checkpoint, which must
    write every key as this Spark's bytes, then the job restored from it with more input, every output exact.
    On an older Spark, a clear refusal before anything is written."""
    root = tmp_path / "root"
    savepoints = root / "versions" / "savepoints"
    before = sorted(savepoints.rglob("*"))
    args = ["transform", "--job-name", "versions", "--checkpoint-root", str(root)]
    args += ["--function", "tests.support.transforms:identity", "--trigger-id", "identity"]
    log = tmp_path / "transform.log"
    code = spark_submit(args, log, spark_submit_path=install.spark_submit).wait(timeout=300)
    text = log.read_text(errors="replace")
    running = parse_version(install.version)[:2]
    needed = STATE_REWRITER_VERSION if store == "rocksdb" else STATE_DATA_SOURCE
    if running < needed:
        needs = "needs Spark 4.0 or newer" if running < STATE_DATA_SOURCE else "needs Spark 4.3 or newer"
        assert code == 2 and needs in text, text[-3000:]
        assert sorted(savepoints.rglob("*")) == before
        return
    assert code == 0, text[-3000:]
    storage = JobFolder(str(root), "versions")
    transformed = storage.savepoints.read("savepoint-identity")
    assert transformed.restored_from["transformed_with"] == "tests.support.transforms:identity"
    identity = storage.url_of(storage.savepoints.path("savepoint-identity"))
    partitions = 3 if store == "hdfs" else None  # the HDFS chain was rescaled to 3 before
    _continue_from(tmp_path, landing, install, family, identity, "transformed-run.log", store, partitions)
    assert newest_metadata(root, "versions").restored_from["id"] == transformed.id
    problems = family.check(tmp_path / "out", landing)
    assert not problems, f"Spark {install.version}, transformed {store} state: {problems[:10]}"


def _rescale_or_refuse(tmp_path: Path, install: SparkInstall) -> None:
    """``rescale`` on this Spark: a savepoint at 4 partitions on Spark 4.3+, a clear refusal before anything is
    written on an older one."""
    savepoints = tmp_path / "root" / "versions" / "savepoints"
    before = sorted(savepoints.rglob("*")) if savepoints.exists() else []
    args = ["rescale", "--job-name", "versions", "--checkpoint-root", str(tmp_path / "root"), "--partitions", "4"]
    log = tmp_path / "rescale.log"
    code = spark_submit(args, log, spark_submit_path=install.spark_submit).wait(timeout=300)
    text = log.read_text(errors="replace")
    if parse_version(install.version)[:2] >= OFFLINE_REPARTITION:
        assert code == 0, text[-3000:]
        rescaled = newest_savepoint(tmp_path / "root", "versions")
        assert rescaled.fingerprint["pinned_confs"]["spark.sql.shuffle.partitions"] == "4"
    else:
        assert code == 2 and "needs Spark 4.3 or newer" in text, text[-3000:]
        assert (sorted(savepoints.rglob("*")) if savepoints.exists() else []) == before


def _result(log: Path) -> dict:
    lines = [line for line in log.read_text(errors="replace").splitlines() if line.startswith("result: ")]
    assert lines, log.read_text(errors="replace")[-3000:]
    return json.loads(lines[-1].removeprefix("result: "))


@pytest.mark.parametrize("install", versions(INSTALLS))
def test_clean_endings_on_each_spark(tmp_path: Path, landing: Landing, matrix, install: SparkInstall):
    """``--max-duration`` and SIGTERM end a continuous run cleanly: exit 0, every processed row published."""
    matrix(install, "clean-endings")
    install.ensure()
    root, work, output = tmp_path / "root", tmp_path / "work", tmp_path / "out"
    landing.add_files(6)
    args = job_args("endings", root, work, landing, sink=f"parquet:{output}", trigger="continuous",
                    batch_interval="200ms", checkpoint_interval="2s")  # fmt: skip
    spark_submit_path = install.spark_submit
    timed = spark_submit([*args, "--max-duration", "8s"], tmp_path / "timed.log", spark_submit_path=spark_submit_path)
    assert timed.wait(timeout=240) == 0, (tmp_path / "timed.log").read_text(errors="replace")[-3000:]
    first = _result(tmp_path / "timed.log")
    assert first["status"] == "cancelled" and first["rows"] == len(published_rows(output)) > 0, first

    landing.add_files(4)
    stopped = spark_submit(args, tmp_path / "stopped.log", spark_submit_path=spark_submit_path)
    newer = lambda: max(completed_checkpoints(root, "endings")) > first["checkpoint_id"]  # noqa: E731
    wait_for(newer, 240, "a checkpoint of the second run", stopped)
    os.killpg(stopped.pid, signal.SIGTERM)
    assert stopped.wait(timeout=180) == 0, (tmp_path / "stopped.log").read_text(errors="replace")[-3000:]
    second = _result(tmp_path / "stopped.log")
    assert second["status"] == "cancelled" and second["restored_from"]["id"] == first["checkpoint_id"]
    rows = published_rows(output)
    processed = first["rows"] + second["rows"]
    assert len(rows) == len({r["id"] for r in rows}) == processed > first["rows"], "every processed row once"
    assert not any((output / "_staging").glob("batch-*"))


# Every operator family on every store layout at least once; transformWithState and checkpoint format v2
# need Spark 4.0 and must be refused at start on 3.5.
SAMPLE = [
    "hdfs:aggregation",
    "hdfs:applyInPandasWithState",
    "hdfs:session-window",
    "hdfs:outer-join",
    "rocksdb:dedup",
    "rocksdb:inner-join",
    "rocksdb:windowed-aggregation",
    "rocksdb-changelog:dedup-within-watermark",
    "rocksdb-changelog:transformWithState",
    "rocksdb-v2:chained",
]
NEEDS_SPARK_4 = {"rocksdb-changelog:transformWithState", "rocksdb-v2:chained"}


@pytest.mark.parametrize("install", versions(INSTALLS))
def test_operator_sample_in_process_on_each_spark(tmp_path: Path, matrix, install: SparkInstall):
    """Every operator family under that Spark's own Python: snapshot, restore, exact output; or a clear refusal."""
    entry = matrix(install, "operator-sample")
    install.ensure()
    result = subprocess.run(
        [str(install.python_executable), "-m", "tests.support.operator_sample", str(tmp_path), *SAMPLE],
        cwd=REPO,
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=900,
    )
    lines = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    assert result.returncode == 0 and len(lines) == len(SAMPLE), result.stderr[-4000:]
    too_old = parse_version(install.version)[:2] < (4, 0)
    for combination, line in zip(SAMPLE, lines, strict=True):
        if too_old and combination in NEEDS_SPARK_4:
            assert line["outcome"] == "unsupported", line
            assert f"needs Spark 4.0 or newer; this job runs on Spark {install.minor}" in line["detail"], line
            entry["notes"].append(line["detail"].split(";")[0] + f" (Spark {install.minor})")
        else:
            assert line["outcome"] == "passed", f"{combination} on Spark {install.version}: {line['detail']}"
            assert line["spark_version"] == install.version
    passed = sum(line["outcome"] == "passed" for line in lines)
    entry["detail"] = f"{passed} of {len(SAMPLE)}" + (", the rest refused" if passed < len(SAMPLE) else "")


@pytest.fixture
def spark_on_path(tmp_path: Path, monkeypatch):
    """Make ``spark-submit`` on the worker's PATH the given Spark's (what a connection's spark-binary finds)."""

    def use(install: SparkInstall) -> None:
        if install.main:
            return  # the suite's own spark-submit is first on PATH already (pip's script finds its home by its path)
        folder = tmp_path / "spark-bin"
        folder.mkdir(exist_ok=True)
        (folder / "spark-submit").symlink_to(install.spark_submit)
        monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")

    return use


@pytest.mark.parametrize("install", versions(INSTALLS))
def test_airflow_operators_submit_to_each_spark(
    tmp_path: Path, landing: Landing, airflow_db, matrix, spark_on_path, install: SparkInstall
):
    """The example DAG's operator and sensor, with the connection's spark-submit being that Spark's."""
    matrix(install, "airflow-operators")
    spark_on_path(install.ensure())
    landing.add_files(3)
    conf = {
        "job_name": "counts",
        "checkpoint_root": str(tmp_path / "root"),
        "landing": str(landing.path),
        "output": str(tmp_path / "out"),
        "num_retained": 2,
    }
    run = load_dag("scheduled_streaming").test(run_conf=conf)
    assert set(task_states(run).values()) == {"success"}, task_states(run)
    job = xcom(run, "run_job")
    assert job["rows"] == 30 and xcom(run, "confirm_checkpoint")["checkpoint_id"] == job["checkpoint_id"]
    assert final_counts(tmp_path / "out") == landing.counts_by_key()
    assert newest_metadata(tmp_path / "root", "counts").spark_version == install.version


@pytest.mark.parametrize("install", versions(INSTALLS[:-1]))
def test_spark_upgrade_through_a_savepoint(
    tmp_path: Path, landing: Landing, airflow_db, matrix, monkeypatch, install: SparkInstall
):
    """A job running on an older Spark is stopped with a savepoint by the upgrade DAG and continues on the
    newest Spark (another connection) with exact counts; going back to the older Spark is refused."""
    matrix(install, "upgrade-to-newest")
    install.ensure()
    monkeypatch.setenv(
        "AIRFLOW_CONN_SPARK_NEWEST",
        json.dumps({"conn_type": "spark", "host": "local[2]", "extra": {"spark-binary": "spark-submit"}}),
    )
    root, work, output = tmp_path / "root", tmp_path / "work", tmp_path / "out"
    landing.add_files(5)
    args = continuous_counts_args("counts", root, work, landing, output, batch_interval="200ms")
    args += ["--conf", "spark.sql.shuffle.partitions=4"]  # as the example DAG's new version
    old = spark_submit(args, tmp_path / "old.log", spark_submit_path=install.spark_submit)
    control = ControlChannel(JobFolder(str(root), "counts"))
    wait_for(lambda: completed_checkpoints(root, "counts") and control.live_runs(), 240, "the old Spark's job", old)
    landing.add_files(2)

    run = load_dag("upgrade_with_savepoint").test(
        run_conf={
            "job_name": "counts",
            "checkpoint_root": str(root),
            "landing": str(landing.path),
            "output": str(output),
            "new_pipeline": "examples.pipelines:running_counts",
            "stop": True,
            "spark_conn": "spark_newest",
            "restore_source": "savepoint",
        }
    )
    assert old.wait(timeout=120) == 0, (tmp_path / "old.log").read_text(errors="replace")[-3000:]
    assert set(task_states(run).values()) == {"success"}, task_states(run)
    new_version = xcom(run, "run_new_version")
    assert new_version["restored_from"]["kind"] == "savepoint"
    assert new_version["restored_from"]["spark_version"] == install.version
    assert newest_metadata(root, "counts").spark_version == NEWEST.version
    assert final_counts(output) == landing.counts_by_key(), "the counts continued exactly across the upgrade"

    # Back to the older Spark from the newest checkpoint: refused before anything is written.
    back_args = job_args(
        "counts", root, work, landing, sink=f"parquet:{output}", output_mode="update",
        pipeline="examples.pipelines:running_counts",
    ) + ["--conf", "spark.sql.shuffle.partitions=4"]  # fmt: skip
    back = spark_submit(back_args, tmp_path / "back.log", spark_submit_path=install.spark_submit)
    assert back.wait(timeout=180) == 3
    log = (tmp_path / "back.log").read_text(errors="replace")
    assert f"the snapshot was taken on Spark {NEWEST.version} and this run uses Spark {install.version}" in log
    # From the savepoint taken before the upgrade, the older Spark takes the job back (a rewind: what the
    # newest Spark published after the savepoint is set aside and recomputed), with exact counts.
    landing.add_files(1)
    savepoint = xcom(run, "take_savepoint")
    back = spark_submit(
        [*back_args, "--restore-from", savepoint], tmp_path / "back.log", spark_submit_path=install.spark_submit
    )
    assert back.wait(timeout=240) == 0, (tmp_path / "back.log").read_text(errors="replace")[-3000:]
    assert newest_metadata(root, "counts").spark_version == install.version
    assert final_counts(output) == landing.counts_by_key(), "the rollback recomputed exactly"
