"""State functions for ``transform`` tests: each takes a store's rows (``key``, ``value``, ``partition_id``)."""

from __future__ import annotations

from pyspark.sql import functions as F

DROPPED, BUMPED, BUMP = "k1", "k2", 1000


def identity(rows):
    """Every row as it is: the savepoint's state must be byte for byte the source's."""
    return rows


def _without_dropped(rows):
    """Every row but the poisoned key's (eqNullSafe: a null key is kept, where != would drop it too)."""
    return rows.where(~F.col("key.key").eqNullSafe(DROPPED))


def drop_and_bump(rows):
    """Drop a poisoned key and fix another's count (``running_counts``' state: key ``key``, value ``count``)."""
    kept = _without_dropped(rows)
    fixed = F.when(F.col("key.key") == BUMPED, F.struct((F.col("value.count") + BUMP).alias("count")))
    return kept.withColumn("value", fixed.otherwise(F.col("value")))


def bootstrap(rows):
    """Add a key no event has had, built from a batch DataFrame: the running count starts from it."""
    spark = rows.sparkSession
    seeded = spark.createDataFrame([("seeded", 7)], "k string, n long").select(
        F.struct(F.col("k").alias("key")).alias("key"), F.struct(F.col("n").alias("count")).alias("value")
    )
    return rows.select("key", "value").unionByName(seeded)


def wrong_value_type(rows):
    return rows.withColumn("value", F.struct(F.col("value.count").cast("string").alias("count")))


def duplicate_keys(rows):
    return rows.unionByName(rows)


def fails(rows):
    raise RuntimeError("poisoned row found")


def fails_in_spark(rows):
    """A Python UDF that raises on a row: the error comes from a Spark worker, when the rows are read."""

    @F.udf("long")
    def check(key):
        raise ValueError(f"cannot fix key {key}")

    return rows.withColumn("value", F.struct((F.col("value.count") + check(F.col("key.key"))).alias("count")))


def _bumped_count(value, ttl: bool):
    count = F.struct((value["v"] + BUMP).alias("v"))
    if not ttl:
        return count
    return F.struct(count.alias("value"), F.col("value.ttlExpirationMs").alias("ttlExpirationMs"))


def drop_and_bump_count(rows):
    """transformWithState's ``count`` value state (``{v}``; with a TTL ``{value: {v}, ttlExpirationMs}``, the
    expiration kept): drop a poisoned key's, fix another's."""
    ttl = "ttlExpirationMs" in rows.schema["value"].dataType.fieldNames()
    kept = _without_dropped(rows)
    count = F.col("value.value") if ttl else F.col("value")
    fixed = F.when(F.col("key.key") == BUMPED, _bumped_count(count, ttl))
    return kept.withColumn("value", fixed.otherwise(F.col("value")))


def reversed_lists(rows):
    """A list state variable's elements in reverse order (``list_value``, one row per key)."""
    return rows.withColumn("list_value", F.reverse("list_value"))


def without_expiry(rows):
    """A TTL value state's rows with their expiration taken away: refused, Spark sets one on every write."""
    return rows.withColumn("value", F.struct("value.value", F.lit(None).cast("long").alias("ttlExpirationMs")))


def keys_only(rows):
    """The keys without their values: refused, the result needs the state's value column."""
    return rows.select("key")


def drop_timers(rows):
    """Drop a poisoned key's registered timers (``key``, ``expiration_timestamp_ms``: one row per timer)."""
    return _without_dropped(rows)


def null_element(rows):
    """A list state variable with a null element appended to each key's list: refused."""
    element = rows.schema["list_value"].dataType.elementType
    return rows.withColumn("list_value", F.concat("list_value", F.array(F.lit(None).cast(element))))


def timers_twice(rows):
    """Every registered timer given twice: refused (Spark keeps one per key and time)."""
    return rows.unionByName(rows)
