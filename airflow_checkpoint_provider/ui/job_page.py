"""What a job's page shows, formatted on the server: the React page (``static/checkpoints-pages.js``) renders
these strings as they are, so durations, sizes and charts are formatted once, here, as the CLI formats them.

The charts are SVG built from escaped values (``charts.py``); every other value is text the page escapes.
"""

from __future__ import annotations

from typing import Any

from airflow_checkpoint_provider.ui.charts import history_charts, partition_charts
from spark_checkpoint_runtime.durations import format_bytes, format_duration


def age(seconds: float | None) -> str:
    """``"2m ago"``; empty for no age."""
    return "" if seconds is None else f"{format_duration(seconds)} ago"


def table_row(row: dict[str, Any]) -> dict[str, str]:
    """One checkpoint or savepoint as the page's table shows it, by column."""
    restored = row.get("restored_from") or {}
    duration, written, total = row.get("duration_ms"), row.get("bytes_written"), row.get("total_bytes")
    return {
        "Id": "" if row.get("id") is None else str(row["id"]),
        "Batch": "" if row.get("batch_id") is None else str(row["batch_id"]),
        "Completed": row.get("completed") or "",
        "Duration": "" if duration is None else format_duration(duration / 1000),
        "Written": "" if written is None else format_bytes(written),
        "Total": "" if total is None else format_bytes(total),
        "Restored from": f"{restored.get('kind', '')} {restored.get('id', '')}".strip() if restored else "",
        "Status": row.get("status", ""),
        "Path": row.get("path") or "",
    }


def job_page(history: dict[str, Any], *, can_savepoint: bool) -> dict[str, Any]:
    """``history`` (``views.job_history``, already without credentials) with what its page shows: the health
    line, the tables' columns and rows (newest first), the charts, and whether this user may take a savepoint."""
    health = history["health"]
    return {
        **history,
        "can_savepoint": can_savepoint,
        "display": {
            "health_age": age(health["age_seconds"]),
            "health_window": format_duration(health["window_seconds"]),
            "columns": list(table_row({})),
            "checkpoints": [table_row(row) for row in reversed(history["checkpoints"])],
            "savepoints": [table_row(row) for row in history["savepoints"]],
            "history_charts": history_charts(history["checkpoints"]),
            "partition_charts": partition_charts(history.get("partitions") or []),
        },
    }
