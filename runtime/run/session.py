"""Step 1 of a run: the SparkSession, the user's pipeline, and the fingerprint of its stateful plan."""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Any

from spark_checkpoint_runtime.errors import PipelineError
from spark_checkpoint_runtime.fingerprint import (
    ROCKSDB_PROVIDER,
    SNAPSHOTTABLE_PROVIDERS,
    plan_fingerprint,
    state_store_settings,
)
from spark_checkpoint_runtime.options import JobOptions
from spark_checkpoint_runtime.spark_versions import (
    NO_DATA_BATCHES_CONF,
    check_features,
    check_processing_time_state,
    check_supported,
    missing_api,
)
from spark_checkpoint_runtime.state_files import UnsupportedStateStore
from spark_checkpoint_runtime.state_files.lineage import CODEC_CONF, DEFAULT_CODEC, require_readable_codec


def create_session(options: JobOptions) -> Any:
    """A SparkSession for the job: spark-submit's settings, or local mode under ``python -m``."""
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(f"checkpointed-job:{options.job_name}")
    for key, value in options.conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return spark


#: Spark's own history in the run's private working folder, in batches. Spark keeps 100 by default so that it
#: can recover from that folder; a run here always restores from the job's checkpoints instead, and every
#: checkpoint's capture lists the working folder, so the default only makes each capture slower (about 0.5 s
#: more at 200 partitions, measured in benchmarks/long_run.py).
WORKING_HISTORY_CONF = "spark.sql.streaming.minBatchesToRetain"
WORKING_HISTORY_BATCHES = 10


@contextmanager
def bounded_working_history(spark: Any) -> Iterator[None]:
    """Spark keeps ``WORKING_HISTORY_BATCHES`` batches in the working folder while the run lasts, unless the
    job set ``spark.sql.streaming.minBatchesToRetain`` itself; the session is left as it was found."""
    if is_set(spark, WORKING_HISTORY_CONF):
        yield
        return
    spark.conf.set(WORKING_HISTORY_CONF, str(WORKING_HISTORY_BATCHES))
    try:
        yield
    finally:
        with suppress(Exception):  # a JVM already gone must not hide the run's own error and exit status
            spark.conf.unset(WORKING_HISTORY_CONF)


def is_set(spark: Any, key: str) -> bool:
    """Whether the session has ``key`` set (by the job, spark-submit or spark-defaults), not just Spark's default.

    Spark answers a missing key with the default it is given, which it first checks is a valid value: two
    different valid ones tell "unset" (each comes back) from set (the same value twice)."""
    return not (spark.conf.get(key, "1") == "1" and spark.conf.get(key, "2") == "2")


def load_pipeline(spec: str, spark: Any) -> Any:
    """Import ``module:function`` and call it with the session; it must return a streaming DataFrame."""
    module_name, _, function_name = spec.partition(":")
    try:
        function = getattr(importlib.import_module(module_name), function_name)
    except (ImportError, AttributeError) as exc:
        _explain_missing_api(exc, spark)
        raise PipelineError(
            f"--pipeline {spec!r} cannot be loaded: {exc}; ship the module with --py-files or PYTHONPATH"
        ) from None
    try:
        df = function(spark)
    except (ImportError, AttributeError) as exc:
        _explain_missing_api(exc, spark)
        raise
    if not getattr(df, "isStreaming", False):
        raise PipelineError(f"--pipeline {spec!r} returned {type(df).__name__}, not a streaming DataFrame")
    return df


def _explain_missing_api(error: Exception, spark: Any) -> None:
    """A pipeline that uses an API this Spark does not have yet fails naming the version that has it."""
    unsupported = missing_api(error, check_supported(spark.version))
    if unsupported is not None:
        raise unsupported from None


def job_fingerprint(df: Any, spark: Any, pinned: dict[str, str] | None = None) -> dict[str, Any]:
    """The stateful plan and state store settings, refused when the runtime cannot snapshot the store.

    ``pinned``: the confs Spark pinned in the snapshot the run restores (None for a fresh start)."""
    fingerprint = {**plan_fingerprint(df), "state_store": state_store_settings(spark)}
    running = check_supported(spark.version)
    check_features(running, fingerprint["state_store"], fingerprint["operators"])
    check_processing_time_state(running, fingerprint["operators"], spark.conf.get(NO_DATA_BATCHES_CONF, "true"))
    provider = fingerprint["state_store"]["provider_class"]
    if fingerprint["operators"] and fingerprint["state_store"]["provider"] not in SNAPSHOTTABLE_PROVIDERS:
        raise UnsupportedStateStore(
            f"state store provider {provider}: its file layout is unknown to the runtime, which snapshots "
            f"{' and '.join(SNAPSHOTTABLE_PROVIDERS)}; set spark.sql.streaming.stateStore.providerClass to one "
            "of them"
        )
    store = fingerprint["state_store"]
    v2_changelogs = store["checkpoint_format_version"] >= 2 and store["changelog_checkpointing"]
    if fingerprint["operators"] and store["provider"] == ROCKSDB_PROVIDER and v2_changelogs:
        # Old versions' files are told apart by the lineage in the changelogs, which the capture must read. A
        # restored query keeps the codec its offset log pinned (Spark's default where none is pinned).
        if pinned is not None:
            codec = pinned.get(CODEC_CONF) or DEFAULT_CODEC
        else:
            codec = spark.conf.get(CODEC_CONF, DEFAULT_CODEC)
        require_readable_codec(codec)
    return fingerprint
