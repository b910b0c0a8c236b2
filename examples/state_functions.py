"""Example state functions for the runtime's ``transform`` command and ``TransformStateOperator``.

A state function takes one store's state rows as a DataFrame (``key``, ``value``, ``partition_id``) and returns
the new rows with the same ``key`` and ``value`` columns. It runs in the transform's own Spark session
(``rows.sparkSession``), whose confs come from the task's ``conf``.
"""

from __future__ import annotations

from typing import Any

DROP_KEYS_CONF = "spark.example.dropKeys"


def drop_keys(rows: Any) -> Any:
    """Drop the state of the keys listed, comma-separated, in the Spark conf ``spark.example.dropKeys`` (matched
    on the first key column, ``key`` in ``running_counts``): the job counts them from zero again."""
    from pyspark.sql import functions as F

    keys = [k.strip() for k in rows.sparkSession.conf.get(DROP_KEYS_CONF, "").split(",") if k.strip()]
    first = rows.schema["key"].dataType.fieldNames()[0]
    # coalesce: a null key column is not in the list (isin alone gives null, and the filter would drop it).
    listed = F.coalesce(F.col("key").getField(first).isin(keys), F.lit(False))
    return rows.where(~listed) if keys else rows
