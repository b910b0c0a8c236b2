"""Which checkpointed jobs a DAG's tasks run, read from the DAG's serialized form in Airflow's database (the API
server has no DAG files): what the "Checkpoints" tab of a DAG or task instance lists.

A task of this provider names its job with ``job_name`` and ``checkpoint_root``. Either may be a template; one
that uses only the DAG's params is rendered with the params' defaults (the usual way to let a person pick the
job from the trigger form). One that needs more of the run's context (a macro, a Variable) cannot be known
before the run and is left out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from jinja2 import StrictUndefined
from jinja2.sandbox import SandboxedEnvironment

from airflow_checkpoint_provider.ui.roots import ConfiguredRoot, root_index_of

_TEMPLATES = SandboxedEnvironment(undefined=StrictUndefined, autoescape=False)
PROVIDER_MODULES = "airflow_checkpoint_provider."


@dataclass(frozen=True)
class NamedJob:
    """A job a task of the DAG runs or watches. ``checkpoint_root`` None: the task takes its root from its
    storage connection."""

    task_id: str
    job_name: str
    checkpoint_root: str | None


def rendered(value: Any, params: dict[str, Any]) -> str | None:
    """``value`` with the params' defaults filled in; None when it is not a string or needs more than params."""
    if not isinstance(value, str) or not value.strip():
        return None
    if "{{" not in value and "{%" not in value:
        return value
    try:
        return _TEMPLATES.from_string(value).render(params=params).strip() or None
    except Exception:  # noqa: BLE001 - any template that needs the run's context: not knowable here
        return None


# dag_id -> ((serialized row id, dag hash), the jobs it names): a page lists the jobs of every DAG a user may
# read, and deserializing each DAG on every view costs more than the page; a new DAG version changes the key.
_NAMED: dict[str, tuple[tuple[Any, str], list[NamedJob]]] = {}


def named_jobs(dag_id: str, task_id: str | None = None) -> list[NamedJob]:
    """The jobs the DAG's provider tasks name (only task ``task_id``'s, when given), from its newest serialized
    version; empty when the DAG is unknown."""
    from airflow.models.serialized_dag import SerializedDagModel
    from airflow.utils.session import create_session

    latest = SerializedDagModel.latest_item_select_object(dag_id)
    with create_session() as session:
        row = session.execute(latest.with_only_columns(SerializedDagModel.id, SerializedDagModel.dag_hash)).first()
    if row is None:
        _NAMED.pop(dag_id, None)
        return []
    version = (row[0], row[1])
    cached = _NAMED.get(dag_id)
    if cached is None or cached[0] != version:
        model = SerializedDagModel.get(dag_id)
        if model is None:
            return []
        cached = ((model.id, model.dag_hash), _jobs_of(model.dag))
        _NAMED[dag_id] = cached
    return [job for job in cached[1] if task_id is None or job.task_id == task_id]


def _jobs_of(dag: Any) -> list[NamedJob]:
    params = dag.params.dump() if dag.params else {}
    found = []
    for task in dag.tasks:
        if not str(getattr(task, "_task_module", "") or "").startswith(PROVIDER_MODULES):
            continue
        job_name = rendered(getattr(task, "job_name", None), params)
        if job_name is None:
            continue
        root = rendered(getattr(task, "checkpoint_root", None), params)
        found.append(NamedJob(task.task_id, job_name, root.rstrip("/") or root if root else None))
    return found


def rows_of(named: list[NamedJob], rows: list[dict[str, Any]], roots: list[ConfiguredRoot]) -> list[dict[str, Any]]:
    """The job list's rows (``views.overview``) of the named jobs: the same job name, under the named root where
    the task names one (matched against the configured roots, not the rows' redacted URLs)."""
    wanted = {(job.job_name, _index(job.checkpoint_root, roots)) for job in named}
    return [row for row in rows if {(row["job_name"], None), (row["job_name"], row["root_index"])} & wanted]


def _index(checkpoint_root: str | None, roots: list[ConfiguredRoot]) -> int | None:
    """None for "any root" (the task takes its root from a connection); -1 for a root the pages do not show."""
    if checkpoint_root is None:
        return None
    index = root_index_of(checkpoint_root, roots)
    return -1 if index is None else index
