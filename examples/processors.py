"""A ``StatefulProcessor`` for ``transformWithStateInPandas`` (kept apart: it needs pyspark at import time)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pandas as pd
from pyspark.sql import Row
from pyspark.sql.streaming import StatefulProcessor, StatefulProcessorHandle
from pyspark.sql.types import LongType, StructField, StructType

# How long the expiring processor's state lives untouched: a day, so nothing expires inside a test and the
# counts stay exact, while Spark still keeps a TTL index beside each variable.
STATE_TTL_MS = 24 * 3_600_000


class CountingProcessor(StatefulProcessor):
    """A running count per key, with one state variable of each kind and an event-time timer.

    - ``count`` (value state): the running count, emitted after every batch that touches the key;
    - ``recent`` (list state): the key's last three ids;
    - ``per_value`` (map state): events per value;
    - an event-time timer two hours after the key's newest event, moved on every batch (checkpointed with the
      state; it fires only once the watermark passes it, which the test input never does). Event time, not
      processing time: processing-time timers keep Spark running empty batches, so an available-now run
      would never end.
    """

    # How long each state variable lives untouched (None: for ever).
    TTL_MS: int | None = None

    def init(self, handle: StatefulProcessorHandle) -> None:
        long_schema = StructType([StructField("v", LongType())])
        self.handle = handle
        self.count = handle.getValueState("count", long_schema, ttlDurationMs=self.TTL_MS)
        self.recent = handle.getListState("recent", long_schema, ttlDurationMs=self.TTL_MS)
        self.per_value = handle.getMapState("per_value", long_schema, long_schema, ttlDurationMs=self.TTL_MS)

    def handleInputRows(self, key: Any, rows: Iterator[pd.DataFrame], timerValues: Any) -> Iterator[pd.DataFrame]:
        total = self.count.get()[0] if self.count.exists() else 0
        ids: list[int] = list(row[0] for row in self.recent.get()) if self.recent.exists() else []
        newest = 0
        for frame in rows:
            total += len(frame)
            newest = max(newest, int(frame["event_time"].max().timestamp() * 1000))
            ids.extend(int(i) for i in frame["id"])
            for value, n in frame["value"].value_counts().items():
                previous = self.per_value.getValue((int(value),))[0] if self.per_value.containsKey((int(value),)) else 0
                self.per_value.updateValue((int(value),), (previous + int(n),))
        self.count.update((total,))
        self.recent.put([(i,) for i in ids[-3:]])
        for timer in self.handle.listTimers():
            self.handle.deleteTimer(timer)
        self.handle.registerTimer(self._next_timer(newest, timerValues))
        yield pd.DataFrame({"key": [key[0]], "count": [total]})

    def _next_timer(self, newest: int, timerValues: Any) -> int:
        """When the key's one timer fires: here in event time, two hours after its newest event."""
        return newest + 2 * 3_600_000

    def close(self) -> None:
        """Nothing to release."""


class ExpiringCountingProcessor(CountingProcessor):
    """``CountingProcessor`` with a TTL on each state variable and a processing-time timer.

    Spark allows a TTL only with ``timeMode="ProcessingTime"``. PySpark 4.3.0 fails such a query in the
    empty batch Spark runs after each one (a ``NullPointerException`` in ``PythonSQLMetrics``): run it with
    ``spark.sql.streaming.noDataMicroBatches.enabled=false``. Expired values are then dropped at the end of
    each batch that has data.
    """

    TTL_MS = STATE_TTL_MS

    def _next_timer(self, newest: int, timerValues: Any) -> int:
        # In processing-time mode (which a TTL requires) a timer is on the wall clock.
        return timerValues.getCurrentProcessingTimeInMs() + STATE_TTL_MS


class ExpiringRowCountingProcessor(ExpiringCountingProcessor):
    """``ExpiringCountingProcessor`` for the row-based ``transformWithState`` (Spark 4.1+): it gets and returns
    ``Row`` objects instead of pandas frames, over the same state variables, TTLs and timer."""

    def handleInputRows(self, key: Any, rows: Iterator[Row], timerValues: Any) -> Iterator[Row]:
        frame = pd.DataFrame([row.asDict() for row in rows])
        for out in super().handleInputRows(key, iter([frame]), timerValues):
            for record in out.to_dict("records"):
                yield Row(key=record["key"], count=int(record["count"]))
