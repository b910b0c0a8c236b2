"""Names derived from a task instance, for requests and savepoints that a task's tries must find again."""

from __future__ import annotations

from airflow.sdk import Context


def task_instance_name(context: Context) -> str:
    """``<dag>.<task>.<run>`` with ``.<map index>`` for a mapped task: the same for every try of the instance."""
    ti = context["ti"]
    map_index = getattr(ti, "map_index", -1)
    mapped = f".{map_index}" if isinstance(map_index, int) and map_index >= 0 else ""
    return f"{ti.dag_id}.{ti.task_id}.{ti.run_id}{mapped}"
