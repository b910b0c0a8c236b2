"""The state stores and stateful operator families the runtime must snapshot, and what a correct output is.

Shared by the in-process tests (``test_state_stores.py``) and the crash chains (``test_state_chaos.py``).
Each family names an example pipeline, its output mode and a check of the published output against every
input row the landing folder wrote.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from examples.pipelines import EVENT_TIME_BASE, SESSION_CLUSTER, SESSION_GAP_SECONDS
from tests.support.helpers import final_counts, published_rows
from tests.support.landing import Landing

ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
HDFS = "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"
STORES: dict[str, dict[str, str]] = {
    "hdfs": {},
    "rocksdb": {"spark.sql.streaming.stateStore.providerClass": ROCKSDB},
    "rocksdb-changelog": {
        "spark.sql.streaming.stateStore.providerClass": ROCKSDB,
        "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
        # A zip every 3 versions, so chains of a zip plus changelogs appear within a short test.
        "spark.sql.streaming.stateStore.minDeltasForSnapshot": "3",
        "spark.sql.streaming.stateStore.maintenanceInterval": "1s",
    },
    "rocksdb-v2": {
        "spark.sql.streaming.stateStore.providerClass": ROCKSDB,
        "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
        "spark.sql.streaming.stateStore.checkpointFormatVersion": "2",
        "spark.sql.streaming.stateStore.minDeltasForSnapshot": "3",
        "spark.sql.streaming.stateStore.maintenanceInterval": "1s",
    },
}
STORE_CONFS = {key for confs in STORES.values() for key in confs}


def event_seconds(row_id: int) -> int:
    """The event time (seconds) ``examples.pipelines.event_time_column`` gives an id."""
    return row_id + (row_id // SESSION_CLUSTER) * SESSION_GAP_SECONDS + EVENT_TIME_BASE


def _seconds(value) -> int:
    return int(value.timestamp()) if hasattr(value, "timestamp") else int(value)


def check_counts(output: Path, landing: Landing) -> list[str]:
    got, expected = final_counts(output), landing.counts_by_key()
    return [f"key {k}: {got.get(k)} != {n}" for k, n in expected.items() if got.get(k) != n]


def check_windowed_counts(output: Path, landing: Landing) -> list[str]:
    expected = Counter((event_seconds(r["id"]) // 10 * 10, r["key"]) for r in landing.rows)
    got: dict[tuple[int, str], int] = {}
    for row in published_rows(output):
        key = (_seconds(row["window_start"]), row["key"])
        got[key] = max(got.get(key, 0), row["count"])
    return [f"window {k}: {got.get(k)} != {n}" for k, n in expected.items() if got.get(k) != n]


def check_distinct_pairs(output: Path, landing: Landing) -> list[str]:
    published = Counter((r["key"], r["value"]) for r in published_rows(output))
    expected = {(r["key"], r["value"]) for r in landing.rows}
    problems = [f"pair {p} published {n} times" for p, n in published.items() if n > 1]
    return problems + [f"pairs differ: missing {expected - set(published)}, extra {set(published) - expected}"] * (
        set(published) != expected
    )


def check_joined(output: Path, landing: Landing) -> list[str]:
    rows = published_rows(output)
    published = Counter(r["id"] for r in rows)
    expected = {r["id"] for r in landing.rows}
    problems = [f"id {i} published {n} times" for i, n in published.items() if n > 1]
    problems += [f"id {r['id']} joined the wrong copy" for r in rows if r["right_value"] != r["value"] * 10]
    return problems + [f"{len(expected - set(published))} ids missing"] * (set(published) != expected)


def check_outer_joined(output: Path, landing: Landing) -> list[str]:
    rows = published_rows(output)
    published = Counter(r["id"] for r in rows)
    matched = {r["id"] for r in landing.rows if r["value"] % 2 == 0}  # odd ones wait for the watermark (1 h)
    problems = [f"id {i} published {n} times" for i, n in published.items() if n > 1]
    problems += [f"id {r['id']} has right_id {r['right_id']}" for r in rows if r["right_id"] != r["id"]]
    differ = sorted(matched ^ set(published))[:10]
    return problems + [f"matched ids differ: {differ} (published {len(published)}, expected {len(matched)})"] * bool(
        differ
    )


def check_sessions(output: Path, landing: Landing) -> list[str]:
    """Sessions are emitted once closed: each emitted one exactly once with its exact count; every session of
    the first burst (closed long before the end) emitted."""
    expected: dict[tuple[int, str], int] = {}
    for row in landing.rows:
        burst = row["id"] // SESSION_CLUSTER
        firsts = [
            event_seconds(r["id"])
            for r in landing.rows
            if r["key"] == row["key"] and r["id"] // SESSION_CLUSTER == burst
        ]
        key = (min(firsts), row["key"])
        expected[key] = expected.get(key, 0) + 1
    published = Counter((_seconds(r["session_start"]), r["key"]) for r in published_rows(output))
    counts = {(_seconds(r["session_start"]), r["key"]): r["count"] for r in published_rows(output)}
    problems = [f"session {s} emitted {n} times" for s, n in published.items() if n > 1]
    problems += [f"session {s}: {counts[s]} != {expected.get(s)}" for s in counts if counts[s] != expected.get(s)]
    first_burst = {s for s in expected if s[0] < EVENT_TIME_BASE + SESSION_CLUSTER}
    return problems + [f"first burst sessions missing: {first_burst - set(counts)}"] * bool(first_burst - set(counts))


@dataclass(frozen=True)
class Family:
    """A stateful operator family: its pipeline, output mode, expected fingerprint types and output check."""

    pipeline: str
    output_mode: str
    types: tuple[str, ...]
    check: Callable[[Path, Landing], list[str]]
    rocksdb_only: bool = False
    confs: tuple[tuple[str, str], ...] = ()  # Spark confs the family's query needs, passed as --conf


# transformWithState with a TTL fails on PySpark 4.3.0 in the empty batch Spark runs after each batch.
NO_EMPTY_BATCHES = (("spark.sql.streaming.noDataMicroBatches.enabled", "false"),)

FAMILIES: dict[str, Family] = {
    "aggregation": Family("running_counts", "update", ("aggregation",), check_counts),
    "windowed-aggregation": Family("windowed_counts", "update", ("aggregation",), check_windowed_counts),
    "dedup": Family("distinct_pairs", "append", ("deduplication",), check_distinct_pairs),
    "dedup-within-watermark": Family(
        "distinct_pairs_within_watermark", "append", ("deduplication within watermark",), check_distinct_pairs
    ),
    "inner-join": Family("joined_events", "append", ("inner join",), check_joined),
    "outer-join": Family("outer_joined_events", "append", ("left outer join",), check_outer_joined),
    "session-window": Family("session_counts", "append", ("session window aggregation",), check_sessions),
    "applyInPandasWithState": Family("pandas_running_counts", "update", ("applyInPandasWithState",), check_counts),
    "transformWithState": Family(
        "transform_with_state_counts", "update", ("transformWithState",), check_counts, rocksdb_only=True
    ),
    "transformWithState-ttl": Family(
        "transform_with_state_ttl_counts",
        "update",
        ("transformWithState",),
        check_counts,
        rocksdb_only=True,
        confs=NO_EMPTY_BATCHES,
    ),
    "transformWithState-rows-ttl": Family(
        "transform_with_state_rows_ttl_counts",
        "update",
        ("transformWithState",),
        check_counts,
        rocksdb_only=True,
        confs=NO_EMPTY_BATCHES,
    ),
    "chained": Family("distinct_counts", "update", ("aggregation", "deduplication"), check_counts),
}
# Every conf a store or a family sets: tests that share a session unset them afterwards.
STATE_CONFS = sorted({*STORE_CONFS, *(key for family in FAMILIES.values() for key, _ in family.confs)})


def store_args(store: str, family: Family | None = None) -> list[str]:
    """``--conf`` options selecting ``store``, and those ``family``'s query needs."""
    confs = [*STORES[store].items(), *(family.confs if family else ())]
    return [item for key, value in confs for item in ("--conf", f"{key}={value}")]
