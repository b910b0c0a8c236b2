"""A smoke run of the benchmarks at a tiny size (the real run: python -m benchmarks.run)."""

from __future__ import annotations

import pytest

from benchmarks.run import run_all

pytestmark = pytest.mark.spark


def test_benchmarks_run_end_to_end_at_a_tiny_size(spark, tmp_path):
    results = run_all(spark, "tiny", 1, tmp_path)
    for name in ("stateless", "stateful"):
        row = results["overhead"][name]
        assert row["rows"] == 800 and row["plain_seconds"] > 0 and row["ours_seconds"] > 0
        assert row["ratio_wall_time"] == pytest.approx(row["ours_seconds"] / row["plain_seconds"], rel=0.01)
        assert row["checkpoint_capture_ms_median"] is not None


def test_continuous_overhead_measures_steady_state_pairs(spark, tmp_path):
    from benchmarks.run import continuous_overhead

    results = continuous_overhead(spark, tmp_path, 4, 2, cases=[(False, "1s")])
    row = results["stateless @ 1s"]
    assert len(row["pair_ratios"]) == 2 and row["plain_rows_per_second"] > 0 and row["ours_rows_per_second"] > 0
    assert row["overhead_percent"] == pytest.approx((1 - row["ratio_rows_per_second"]) * 100, abs=0.1)
    assert row["plain_batches_per_minute"] > 0 and row["ours_batches_per_minute"] > 0
    # Where the time and the machine went, per side: the JVM ran the batches; a stateless query commits no state.
    assert row["plain_jvm_cpu_s_per_minute"] > 0 and row["ours_jvm_cpu_s_per_minute"] > 0
    assert row["ours_python_cpu_s_per_minute"] > 0 and row["ours_state_commit_ms_median"] == 0
    for estimate in (row["rows_per_second_ratio"], row["batches_per_minute_ratio"]):
        assert estimate["pairs"] == 2 and estimate["low"] <= estimate["median"] <= estimate["high"]
    # Every run is kept, with the side that went first: the pairs alternate.
    assert [run["first"] for run in row["runs"]] == ["plain", "ours"]
    for run, ratio in zip(row["runs"], row["pair_ratios"], strict=True):
        assert run["ours"]["rows_per_second"] / run["plain"]["rows_per_second"] == pytest.approx(ratio, abs=0.002)
        # And what the whole machine did meanwhile: its busy cores, and any time its host took (steal).
        for side in ("plain", "ours"):
            assert run[side]["machine_cpu_s_per_minute"] >= run[side]["jvm_cpu_s_per_minute"] * 0.5
            assert run[side]["steal_cpu_s_per_minute"] >= 0


def test_cpu_seconds_counts_the_s3_server_process_apart():
    from benchmarks.run import cpu_seconds
    from benchmarks.s3_requests import S3ServerProcess

    s3 = S3ServerProcess().start()
    try:
        used = cpu_seconds(s3)
    finally:
        s3.stop()
    # The server's start-up (importing moto) took CPU in its own process, not in this one's count.
    assert used["s3_server"] > 0 and set(used) == {"python", "jvm", "machine", "steal", "s3_server"}
    assert "s3_server" not in cpu_seconds()


def test_state_size_measures_checkpoint_cost_and_restore(spark, tmp_path):
    from benchmarks.state_size import measure

    result = measure(spark, tmp_path, 0.07, 1)  # 500 keys, 5 of them changed
    assert result["keys"] == 500 and result["changed_keys"] == 5
    # What Spark itself wrote for the change, from a listing of its own folder: delta files, not nothing.
    assert 0 < result["native_new_bytes"] < result["state_bytes"]
    assert 0 < result["bytes_written"] < result["state_bytes"]
    written_to_native = result["bytes_written"] / result["native_new_bytes"]
    assert result["written_to_native_ratio"] == pytest.approx(written_to_native, rel=0.01)
    # Over the whole sequence (one restart here): at least what that restart's own listing saw.
    assert result["written_sequence_bytes"] == result["bytes_written"]
    assert result["native_sequence_bytes"] >= result["native_new_bytes"] > 0
    # Over the job's life: the build wrote the whole state on both sides, every build checkpoint counted.
    assert result["written_life_bytes"] > result["written_sequence_bytes"] + result["state_bytes"] / 2
    assert result["native_life_bytes"] > result["native_sequence_bytes"] + result["state_bytes"] / 2
    assert result["restore_plain_seconds"] > 0 and result["restore_ours_seconds"] > 0
    # The ratio is of the unrounded times; the times are reported to the millisecond (about 50 ms each here).
    ours, plain = result["restore_ours_seconds"], result["restore_plain_seconds"]
    rounding = ours / plain * (0.0005 / ours + 0.0005 / plain) + 0.0005
    assert result["restore_ratios"] == [pytest.approx(ours / plain, abs=rounding)]
    assert result["capture_ms"] >= 0 and result["upload_ms"] >= 0


def test_state_size_on_s3_counts_each_phase_of_a_restart(spark, tmp_path):
    from benchmarks.s3_requests import CountingS3Server
    from benchmarks.state_size import measure

    s3 = CountingS3Server().start()
    try:
        result = measure(spark, tmp_path / "s3", 0.07, 1, s3)
    finally:
        s3.stop()
    phases = result["requests_median"]
    assert set(phases) == {"restore_and_batch", "checkpoint_upload", "after_completion"}
    assert phases["restore_and_batch"]["GET"] > 0  # the state came down from S3
    assert phases["checkpoint_upload"]["PUT"] > 0  # the changed state went up
    assert phases["after_completion"]["PUT"] > 0  # at least the _metadata


def test_retention_at_scale_makes_one_list_call():
    from benchmarks.retention_scale import measure

    small, wide = measure(60, 5, 2), measure(60, 5, 8)
    assert small["list_calls_planning"] == wide["list_calls_planning"] == 1
    assert small["deleted_checkpoints"] == 57 and small["deleted_savepoints"] == 0


def test_sensor_latency_runs_at_a_one_second_interval():
    from benchmarks.sensor_latency import measure

    results = measure(1, 1.0)
    for mode in ("poke", "deferrable"):
        assert 0 < results[mode]["median_seconds"] < 30, results


def test_rescale_measures_both_sides_in_pairs(spark, tmp_path):
    from benchmarks.rescale import measure
    from benchmarks.state_size import ROCKSDB

    provider = "spark.sql.streaming.stateStore.providerClass"
    spark.conf.set(provider, ROCKSDB)
    try:
        result = measure(spark, tmp_path, 0.07, 2, int(spark.conf.get("spark.sql.shuffle.partitions")), 3, None)
    finally:
        spark.conf.unset(provider)
    assert result["keys"] == 500 and result["to"] == 3 and len(result["samples"]) == 2
    for sample in result["samples"]:
        assert sample["plain_seconds"] > 0 and sample["ours_seconds"] > 0 and sample["rescaled_state_bytes"] > 0
    assert (
        result["ratio"]["pairs"] == 2 and result["ratio"]["low"] <= result["ratio"]["median"] <= result["ratio"]["high"]
    )


def test_rescale_of_the_hdfs_backed_store_is_measured_against_a_rebuild(spark, tmp_path):
    from benchmarks.rescale import measure

    partitions = spark.conf.get("spark.sql.shuffle.partitions")
    result = measure(spark, tmp_path, 0.07, 2, int(partitions), 3, None, "hdfs")
    assert spark.conf.get("spark.sql.shuffle.partitions") == partitions, "the rebuild left its count in the session"
    assert result["build_plain_seconds"] is None and result["to"] == 3 and len(result["samples"]) == 2
    for sample in result["samples"]:
        assert sample["plain_seconds"] > 0 and sample["ours_seconds"] > 0 and sample["rescaled_state_bytes"] > 0
