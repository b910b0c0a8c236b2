"""The benchmark's queries as runtime pipelines (the plain-Spark side builds the same ones)."""

from __future__ import annotations

from typing import Any

SCHEMA = "id long, key string, value long"
WIDE_SCHEMA = "id long, key string, payload string"


def stateless(spark: Any) -> Any:
    landing = spark.conf.get("spark.benchmark.landing")
    per_trigger = spark.conf.get("spark.benchmark.maxFilesPerTrigger", "4")
    return spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", per_trigger).json(landing)


def stateful(spark: Any) -> Any:
    return stateless(spark).groupBy("key").count()


def wide_stateful(spark: Any) -> Any:
    """A running count and the newest payload per key: about 140 bytes of state per key, for large states."""
    from pyspark.sql import functions as F

    landing = spark.conf.get("spark.benchmark.landing")
    per_trigger = spark.conf.get("spark.benchmark.maxFilesPerTrigger", "1")
    events = spark.readStream.schema(WIDE_SCHEMA).option("maxFilesPerTrigger", per_trigger).parquet(landing)
    return events.groupBy("key").agg(F.count("*").alias("count"), F.max_by("payload", "id").alias("payload"))
