"""Example pipelines: ``function(spark)`` returns an unstarted streaming DataFrame.

They read JSON events ``{"id": int, "key": str, "value": int}`` from a landing folder named by the Spark
conf ``spark.example.landing`` (pass ``--conf spark.example.landing=PATH``), at most
``spark.example.maxFilesPerTrigger`` files per batch (default 1, so a backlog drains in several batches).
"""

from __future__ import annotations

from typing import Any

EVENT_SCHEMA = "id long, key string, value long"


def events(spark: Any) -> Any:
    """Every event as it arrives (stateless)."""
    landing = spark.conf.get("spark.example.landing")
    per_trigger = spark.conf.get("spark.example.maxFilesPerTrigger", "1")
    return spark.readStream.schema(EVENT_SCHEMA).option("maxFilesPerTrigger", per_trigger).json(landing)


def running_counts(spark: Any) -> Any:
    """A running count of events per key (stateful; use --output-mode update)."""
    return events(spark).groupBy("key").count()


def running_counts_with_total(spark: Any) -> Any:
    """Like ``running_counts`` and also a running sum: a different state schema."""
    from pyspark.sql import functions as F

    return events(spark).groupBy("key").agg(F.count("*").alias("count"), F.sum("value").alias("total"))


def running_counts_by_value(spark: Any) -> Any:
    """A running count per value instead of per key: a changed grouping key."""
    return events(spark).groupBy("value").count()


def running_counts_of_big_values(spark: Any) -> Any:
    """``running_counts`` behind a filter: same state, so a compatible upgrade."""
    from pyspark.sql import functions as F

    return events(spark).where(F.col("value") >= 0).groupBy("key").count()


def running_counts_with_label(spark: Any) -> Any:
    """``running_counts`` plus a new projected column after the aggregation: same state, a compatible upgrade."""
    from pyspark.sql import functions as F

    return running_counts(spark).withColumn("label", F.concat(F.col("key"), F.lit(":"), F.col("count")))


def slow_events(spark: Any) -> Any:
    """``events`` where every row takes ``spark.example.slowMsPerRow`` ms (default 500): a batch that is
    still running when a stop arrives (used to show a stop bounded by ``--stop-timeout``)."""
    import time

    from pyspark.sql import functions as F

    pause = int(spark.conf.get("spark.example.slowMsPerRow", "500")) / 1000

    @F.udf("long")
    def slowly(value: int) -> int:
        time.sleep(pause)
        return value

    return events(spark).withColumn("value", slowly(F.col("value")))
