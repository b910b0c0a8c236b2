"""The benchmark's queries as runtime pipelines (the plain-Spark side builds the same ones)."""

from __future__ import annotations

from typing import Any

SCHEMA = "id long, key string, value long"


def stateless(spark: Any) -> Any:
    landing = spark.conf.get("spark.benchmark.landing")
    per_trigger = spark.conf.get("spark.benchmark.maxFilesPerTrigger", "4")
    return spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", per_trigger).json(landing)


def stateful(spark: Any) -> Any:
    return stateless(spark).groupBy("key").count()
