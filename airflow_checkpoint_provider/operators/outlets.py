"""The output Asset of a checkpointed job: what its operator declares as outlet, and the event it emits.

A ``parquet:PATH`` sink's folder is the job's output. Its Asset event carries the checkpoint that committed
the rows, so a downstream DAG knows exactly which output it is reading.
"""

from __future__ import annotations

import os
from typing import Any

from airflow.sdk import Asset, AssetAlias, Context


def sink_output(sink: str) -> str | None:
    """The output folder of a ``parquet:PATH`` sink, or None (console, user sinks)."""
    kind, _, path = str(sink).partition(":")
    return path if kind == "parquet" and path else None


def asset_uri(path: str) -> str:
    """An Asset URI for an output folder: a URL as it is, a local path as ``file://``."""
    return path.rstrip("/") if "://" in path else f"file://{os.path.abspath(path)}"


def output_outlet(sink: str, job_name: str, task_id: str, dag_id: str) -> Asset | AssetAlias | None:
    """What the operator declares as its outlet: an Asset for a fixed output path, an AssetAlias where the path
    (or the job name) is templated, nothing for sinks without an output folder.

    The alias is named ``checkpoint-output:<dag_id>:<job name>`` (the task id where the job name is templated):
    scoped by DAG, so two DAGs that run jobs of one name never feed one alias by accident.
    """
    output = sink_output(sink)
    if output is None:
        return None
    if "{{" in output or "{%" in output:
        return AssetAlias(name=f"checkpoint-output:{dag_id}:{job_name if '{' not in job_name else task_id}")
    return Asset(uri=asset_uri(output))


def emit_output_events(context: Context, outlets: list[Any], sink: str, job_name: str, report: dict[str, Any]) -> None:
    """Attach the run's checkpoint to the output's Asset event (an alias event only when rows were committed)."""
    output = sink_output(sink)
    if output is None:
        return
    extra = {
        "job_name": job_name,
        "checkpoint_id": report.get("checkpoint_id"),
        "batch_id": report.get("batch_id"),
        "rows": report.get("rows"),
        "run_id": report.get("run_id"),
    }
    uri = asset_uri(output)
    for outlet in outlets:
        if isinstance(outlet, AssetAlias) and report.get("rows"):
            context["outlet_events"][outlet].add(Asset(uri=uri), extra=extra)
        elif isinstance(outlet, Asset) and outlet.uri == uri:
            context["outlet_events"][outlet].extra = extra
