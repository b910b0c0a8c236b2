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


def total_count(spark: Any) -> Any:
    """A running count of every event: a global aggregation, whose key has no columns (use --output-mode update)."""
    return events(spark).groupBy().count()


def first_events(spark: Any) -> Any:
    """The first ``spark.example.limit`` events (default 30) and no more: a streaming limit, whose state (the rows
    emitted so far) Spark keeps in partition 0 (use --output-mode append)."""
    return events(spark).limit(int(spark.conf.get("spark.example.limit", "30")))


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


def counts_by_key_path(spark: Any) -> Any:
    """A running count per key path (an array grouping key), with the largest ``[value, id]`` pair seen and the
    first event as a map: state whose key holds an array and whose value holds an array and a map (use
    --output-mode update)."""
    from pyspark.sql import functions as F

    return (
        events(spark)
        .groupBy(F.array(F.col("key"), F.lit("all")).alias("path"))
        .agg(
            F.count("*").alias("count"),
            F.max(F.array("value", "id")).alias("largest"),
            F.first(F.create_map(F.col("key"), F.col("value"))).alias("first"),
        )
    )


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


# --- Every stateful operator family (tests and the state-store matrix use these) ----------------------------
# Event time is derived from the id: ids grow, so no event is late. ``SESSION_CLUSTER`` ids form one burst of
# activity, followed by a gap of ``SESSION_GAP_SECONDS``: one session per key per burst.
SESSION_CLUSTER = 30
SESSION_GAP_SECONDS = 100
EVENT_TIME_BASE = 1_700_000_000  # 2023-11-14: well clear of the epoch, where a watermark starts


def event_time_column(F: Any) -> Any:
    """Seconds since the epoch from the id, with a quiet gap after every ``SESSION_CLUSTER`` ids."""
    gaps = F.floor(F.col("id") / SESSION_CLUSTER) * SESSION_GAP_SECONDS
    return F.timestamp_seconds(F.col("id") + gaps + F.lit(EVENT_TIME_BASE))


def timed_events(spark: Any, delay: str = "1 hour") -> Any:
    """``events`` with an ``event_time`` and a watermark ``delay`` behind it (ids grow: nothing is ever late)."""
    from pyspark.sql import functions as F

    return events(spark).withColumn("event_time", event_time_column(F)).withWatermark("event_time", delay)


def windowed_counts(spark: Any) -> Any:
    """Counts per key and 10-second event-time window, with a watermark (use --output-mode update)."""
    from pyspark.sql import functions as F

    return (
        timed_events(spark)
        .groupBy(F.window("event_time", "10 seconds"), "key")
        .count()
        .select(F.col("window.start").alias("window_start"), "key", "count")
    )


def distinct_pairs(spark: Any) -> Any:
    """The first event of each (key, value) pair: ``dropDuplicates`` (append)."""
    return events(spark).dropDuplicates(["key", "value"])


def distinct_pairs_within_watermark(spark: Any) -> Any:
    """Like ``distinct_pairs`` with ``dropDuplicatesWithinWatermark`` (the watermark is an hour: none expire)."""
    return timed_events(spark).dropDuplicatesWithinWatermark(["key", "value"]).drop("event_time")


def joined_events(spark: Any) -> Any:
    """A stream-stream inner join: every event meets its own copy read by a second source (append)."""
    from pyspark.sql import functions as F

    left = events(spark)
    right = events(spark).select(F.col("id").alias("right_id"), (F.col("value") * 10).alias("right_value"))
    return left.join(right, left.id == right.right_id, "inner").drop("right_id")


def outer_joined_events(spark: Any) -> Any:
    """A stream-stream left outer join on event time: events meet the even-valued copies (append)."""
    from pyspark.sql import functions as F

    left = timed_events(spark)
    right = (
        timed_events(spark)
        .where(F.col("value") % 2 == 0)
        .select(F.col("id").alias("right_id"), F.col("event_time").alias("right_time"))
    )
    condition = (left.id == right.right_id) & F.expr("right_time BETWEEN event_time AND event_time + interval 1 hour")
    return left.join(right, condition, "leftOuter").select("id", "key", "value", "right_id")


def session_counts(spark: Any) -> Any:
    """Events per key and session (gap 10 s of event time) with ``session_window`` (append).

    The watermark follows the newest event closely, so a burst's sessions are emitted once the next burst arrives.
    """
    from pyspark.sql import functions as F

    return (
        timed_events(spark, "0 seconds")
        .groupBy(F.session_window("event_time", "10 seconds"), "key")
        .count()
        .select(F.col("session_window.start").alias("session_start"), "key", "count")
    )


def pandas_running_counts(spark: Any) -> Any:
    """``running_counts`` kept by ``applyInPandasWithState`` (use --output-mode update)."""
    import pandas as pd
    from pyspark.sql.streaming.state import GroupStateTimeout

    def count(key: tuple, batches: Any, state: Any) -> Any:
        total = state.get[0] if state.exists else 0
        for batch in batches:
            total += len(batch)
        state.update((total,))
        yield pd.DataFrame({"key": [key[0]], "count": [total]})

    return (
        events(spark)
        .groupBy("key")
        .applyInPandasWithState(count, "key string, count long", "count long", "Update", GroupStateTimeout.NoTimeout)
    )


def transform_with_state_counts(spark: Any) -> Any:
    """``running_counts`` kept by ``transformWithStateInPandas`` with value, list and map state and an event-time timer.

    The RocksDB state store is required (Spark's rule for transformWithState); use --output-mode update.
    """
    from examples.processors import CountingProcessor

    return (
        timed_events(spark)
        .groupBy("key")
        .transformWithStateInPandas(CountingProcessor(), "key string, count long", "Update", "EventTime")
    )


def transform_with_state_ttl_counts(spark: Any) -> Any:
    """``transform_with_state_counts`` with a TTL on every state variable and a processing-time timer.

    Needs the RocksDB state store and, on PySpark 4.3.0, ``spark.sql.streaming.noDataMicroBatches.enabled=false``
    (see ``examples.processors.ExpiringCountingProcessor``); use --output-mode update.
    """
    from examples.processors import ExpiringCountingProcessor

    return (
        timed_events(spark)
        .groupBy("key")
        .transformWithStateInPandas(ExpiringCountingProcessor(), "key string, count long", "Update", "ProcessingTime")
    )


def transform_with_state_rows_ttl_counts(spark: Any) -> Any:
    """``transform_with_state_ttl_counts`` through the row-based ``transformWithState`` (Spark 4.1+), which
    hands the processor ``Row`` objects: the same state, TTLs and timer, the same needs."""
    from examples.processors import ExpiringRowCountingProcessor

    return (
        timed_events(spark)
        .groupBy("key")
        .transformWithState(ExpiringRowCountingProcessor(), "key string, count long", "Update", "ProcessingTime")
    )


def distinct_counts(spark: Any) -> Any:
    """Two stateful operators chained: ``dropDuplicates`` by id, then a count per key (use --output-mode update)."""
    return events(spark).dropDuplicates(["id"]).groupBy("key").count()
