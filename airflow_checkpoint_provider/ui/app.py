"""The checkpoint pages' JSON API, mounted on the Airflow API server under ``/checkpoints/`` by the plugin; the
pages themselves are a React app plugin Airflow's UI draws (``static/``).

Every ``/api/`` route needs a logged-in user (Airflow's own token: the UI's ``_token`` cookie or a Bearer
header); the app's code (``/static/``) and the redirects of older releases' page addresses carry no data and
need none. A user who may read every DAG sees every job; one who may read only some DAGs sees the jobs those DAGs name
(``dag_jobs``); "take savepoint" needs edit access to the DAG whose task runs the job, and
each savepoint asked lands in Airflow's audit log with the user. Nothing shown carries credentials
(``redaction.py``).
Storage is read in a separate process (``reader``), never in the API server's event loop and never holding
its interpreter lock: a page over tens of thousands of checkpoints does not slow the server's other pages.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import SplitResult, quote, urlsplit

from fastapi import Body, Depends, FastAPI, HTTPException, Request
from fastapi.responses import FileResponse, JSONResponse, RedirectResponse

from airflow_checkpoint_provider.redaction import public_url
from airflow_checkpoint_provider.ui import dag_jobs as dag_jobs_module
from airflow_checkpoint_provider.ui import views
from airflow_checkpoint_provider.ui.job_page import age, job_page
from airflow_checkpoint_provider.ui.reader import read
from airflow_checkpoint_provider.ui.roots import ConfiguredRoot, configured_roots
from spark_checkpoint_runtime.layout import key_from

STATIC = Path(__file__).with_name("static")


async def _user(request: Request) -> Any:
    """Airflow's logged-in user; a browser without one is sent to the login page."""
    from airflow.api_fastapi.core_api.security import get_user

    bearer = request.headers.get("authorization", "")
    credentials = None
    if bearer.lower().startswith("bearer "):
        from fastapi.security import HTTPAuthorizationCredentials

        credentials = HTTPAuthorizationCredentials(scheme="Bearer", credentials=bearer.split(" ", 1)[1])
    try:
        return await get_user(request, None, credentials)
    except HTTPException as exc:
        if exc.status_code == 401 and request.method == "GET" and "text/html" in request.headers.get("accept", ""):
            here = request.url.path + (f"?{request.url.query}" if request.url.query else "")
            login = f"{base_path()}/api/v2/auth/login?next={quote(here)}"
            raise HTTPException(status_code=303, headers={"Location": login}) from None
        raise


def _base_url() -> SplitResult:
    """``[api] base_url``, split (empty parts when it is not set)."""
    from airflow.configuration import conf

    return urlsplit(conf.get("api", "base_url", fallback="") or "")


def base_path() -> str:
    """The path of ``[api] base_url`` (empty when Airflow is served at the root)."""
    return _base_url().path.rstrip("/")


def _same_origin(request: Request) -> None:
    """Refuse a state-changing request another site's page sent (the login cookie goes along with it). The
    UI's own origin is the server's as the request reached it, or ``[api] base_url``'s (behind a proxy that
    terminates TLS, the server sees another scheme or host than the browser does)."""
    fetch_site = request.headers.get("sec-fetch-site")
    origin = request.headers.get("origin")
    if fetch_site not in (None, "same-origin", "none"):
        raise HTTPException(403, f"cross-site request refused (Sec-Fetch-Site: {fetch_site})")
    configured = _base_url()
    own = {f"{request.url.scheme}://{request.url.netloc}"}
    if configured.netloc:
        own.add(f"{configured.scheme}://{configured.netloc}")
    if origin is not None and origin not in own:
        raise HTTPException(403, f"cross-origin request refused (Origin: {origin})")


User = Annotated[Any, Depends(_user)]


def _allowed(user: Any, method: str, dag_id: str | None) -> bool:
    from airflow.api_fastapi.app import get_auth_manager
    from airflow.api_fastapi.auth.managers.models.resource_details import DagDetails

    details = None
    if dag_id:
        from airflow.models.dag import DagModel

        team = DagModel.get_team_name(dag_id) if hasattr(DagModel, "get_team_name") else None
        details = DagDetails(id=dag_id, team_name=team) if team else DagDetails(id=dag_id)
    return get_auth_manager().is_authorized_dag(method=method, details=details, user=user)


def _readable_dags(user: Any) -> set[str] | None:
    """The DAGs this user may read; None when they may read every DAG. The auth manager answers, so Airflow's
    multi-team setup (a team's DAGs for its members) is respected as it is everywhere else.

    ``is_authorized_dag(GET)`` without a DAG asks only whether the user may list DAGs, which FAB grants for
    read access to any one DAG: "every DAG" is the authorized ids covering every DAG Airflow knows.
    """
    if not _allowed(user, "GET", None):
        return set()
    from airflow.api_fastapi.app import get_auth_manager
    from airflow.models.dag import DagModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    readable = set(get_auth_manager().get_authorized_dag_ids(user=user, method="GET"))
    with create_session() as session:
        every = set(session.scalars(select(DagModel.dag_id)))
    return None if every <= readable else readable


def _require_view(user: Any) -> set[str] | None:
    """Viewing needs read access to some DAG; returns ``_readable_dags``."""
    readable = _readable_dags(user)
    if readable is not None and not readable:
        raise HTTPException(403, "viewing checkpoints needs read access to DAGs")
    return readable


def _visible(
    rows: list[dict[str, Any]], roots: list[ConfiguredRoot], readable: set[str] | None
) -> list[dict[str, Any]]:
    """The rows a user sees: every job when they may read every DAG, else the jobs the DAGs they may read name."""
    if readable is None:
        return rows
    named = [job for dag_id in sorted(readable) for job in dag_jobs_module.named_jobs(dag_id)]
    return dag_jobs_module.rows_of(named, rows, roots)


def _require_job_view(user: Any, root_index: int, job_name: str) -> None:
    """A job's page needs read access to every DAG, or to a DAG that names the job."""
    readable = _require_view(user)
    row = {"job_name": job_name, "root_index": root_index}
    if readable is not None and not _visible([row], configured_roots(), readable):
        raise HTTPException(403, f"viewing job {job_name!r} needs read access to a DAG that runs it")


def _root(index: int) -> ConfiguredRoot:
    roots = configured_roots()
    if not 0 <= index < len(roots):
        raise HTTPException(404, f"no checkpoint root {index}: [checkpoint_provider] roots lists {len(roots)}")
    return roots[index]


async def _job(
    index: int, job_name: str, limit: int = views.SHOWN_CHECKPOINTS
) -> tuple[ConfiguredRoot, dict[str, Any]]:
    root = _root(index)
    history = await read(views.job_history_if_exists, root, job_name, limit)
    if history is None:
        raise HTTPException(404, f"no job {job_name!r} under {public_url(root.url)}")
    return root, history


async def _overview() -> tuple[list[ConfiguredRoot], list[dict[str, Any]], list[str]]:
    roots = configured_roots()
    rows, errors = await read(views.overview, roots)
    return roots, rows, errors


def _shown(roots: list[ConfiguredRoot]) -> list[ConfiguredRoot]:
    """The roots as a page names them: URLs without credentials (only to show; never to read with)."""
    return [dataclasses.replace(root, url=public_url(root.url)) for root in roots]


def owning_dags(run_key: str | None) -> list[str]:
    """The DAGs whose task may run the job: those whose id is a dot-separated prefix of the run key.

    The job operator's run keys are ``<dag_id>.<task_id>.<run_id>...``; task ids can hold dots too, so more
    than one DAG can match, and every one that does is returned (a savepoint needs edit access to all).
    """
    if not run_key:
        return []
    from airflow.models.dag import DagModel
    from airflow.utils.session import create_session

    parts = run_key.split(".")
    prefixes = [".".join(parts[:n]) for n in range(1, len(parts))]
    with create_session() as session:
        return [row[0] for row in session.query(DagModel.dag_id).filter(DagModel.dag_id.in_(prefixes)).all()]


def _may_savepoint(user: Any, history: dict[str, Any]) -> bool:
    # Edit access on every DAG that may own a live run; a run no DAG owns (started outside Airflow, or a
    # key too long to carry its DAG id) needs edit access on every DAG.
    owners: set[str | None] = set()
    for run in history["live_runs"]:
        owners.update(owning_dags(run.get("run_key")) or [None])
    return bool(owners) and all(_allowed(user, "PUT", owner) for owner in owners)


AUDIT_EVENTS = {False: "checkpoint_savepoint", True: "checkpoint_stop_with_savepoint"}


def _audit(
    user: Any, root: ConfiguredRoot, job_name: str, trigger_id: str, stop: bool, history: dict[str, Any]
) -> None:
    """Record the request in Airflow's audit log (Browse > Audit Log), as Airflow's own API records actions:
    the user, the event, and one entry per DAG that may own the running job (none: one entry without)."""
    from airflow.models.log import Log
    from airflow.utils.session import create_session

    name = user.get_name() if user is not None else "anonymous"
    owners = sorted({dag for run in history["live_runs"] for dag in owning_dags(run.get("run_key"))})
    extra = json.dumps(
        {
            "job_name": job_name,
            "checkpoint_root": public_url(root.url),
            "trigger_id": trigger_id,
            "run_keys": [run.get("run_key") for run in history["live_runs"]],
            "method": "POST",
        }
    )
    with create_session() as session:
        for dag_id in owners or [None]:
            session.add(Log(event=AUDIT_EVENTS[stop], owner=name, owner_display_name=name, extra=extra, dag_id=dag_id))


# No interactive docs: they would be served without Airflow's auth.
app = FastAPI(
    title="Checkpoints",
    description="Checkpoint history, savepoints and health of checkpointed jobs",
    docs_url=None,
    redoc_url=None,
    openapi_url=None,
)


@app.middleware("http")
async def _no_framing(request: Request, call_next):
    response = await call_next(request)
    response.headers["Content-Security-Policy"] = "frame-ancestors 'self'"  # no other site frames what it serves
    return response


NO_ROOTS = (
    "No checkpoint roots are configured: set [checkpoint_provider] roots (AIRFLOW__CHECKPOINT_PROVIDER__ROOTS) to "
    "a comma-separated list of roots, each optionally followed by |connection_id."
)


def list_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A job list's rows with what the page shows of them, formatted here (``job_page.age``)."""
    return [{**row, "health_age": age(row["health"]["age_seconds"])} for row in rows]


def ui_page(path: str = "") -> str:
    """The UI's path of the checkpoint pages (a React app plugin Airflow's UI draws), under ``[api] base_url``."""
    return f"{base_path()}/plugin/checkpoints{path}"


@app.get("/")
async def job_list() -> RedirectResponse:
    """The job list is a page of Airflow's UI (a link from an older release lands there)."""
    return RedirectResponse(ui_page(), status_code=307)


async def _named_jobs(user: Any, dag_id: str, task_id: str | None) -> dict[str, Any]:
    """The jobs a DAG's tasks (or one task) name, as rows of the job list, with the lines that say so."""
    if not await asyncio.to_thread(_allowed, user, "GET", dag_id):
        raise HTTPException(403, f"viewing the checkpoints of DAG {dag_id!r} needs read access to it")
    named = await asyncio.to_thread(dag_jobs_module.named_jobs, dag_id, task_id)
    roots, rows, errors = await _overview()
    if await asyncio.to_thread(_readable_dags, user) is not None:
        errors = []  # a root's read errors name other DAGs' jobs: only who reads every DAG sees them, as on the list
    where = f"task {task_id!r} of DAG {dag_id!r}" if task_id else f"DAG {dag_id!r}"
    names = ", ".join(sorted({job.job_name for job in named}))
    return {
        "roots": roots,
        "jobs": list_rows(dag_jobs_module.rows_of(named, rows, roots)),
        "errors": errors,
        "scope": f"Jobs {where} runs: {names}" if named else "",
        "none_found": (
            NO_ROOTS
            if not roots
            else f"{where[0].upper()}{where[1:]} names no checkpointed job (or names it with a template that needs "
            "the run's context)."
            if not named
            else f"No job named by {where} under the configured roots yet ({names})."
        ),
    }


@app.get("/jobs/{root_index}/{job_name}")
async def job_detail(root_index: int, job_name: str) -> RedirectResponse:
    """A job's page is a page of Airflow's UI (a link from an older release lands there)."""
    return RedirectResponse(ui_page(f"/jobs/{root_index}/{quote(job_name)}"), status_code=307)


@app.post("/api/jobs/{root_index}/{job_name}/savepoint")
async def take_savepoint(
    request: Request, root_index: int, job_name: str, user: User, stop: Annotated[bool, Body(embed=True)] = False
) -> JSONResponse:
    """Write a savepoint request to the job's ``_control/`` (as ``spark_checkpoint_runtime savepoint`` does):
    needs edit access to the DAG that runs it, and lands in Airflow's audit log. Answers the trigger id."""
    _same_origin(request)
    await asyncio.to_thread(_require_job_view, user, root_index, job_name)
    root, history = await _job(root_index, job_name, 1)
    if not history["live_runs"]:
        raise HTTPException(409, f"job {job_name!r} has no running run to take a savepoint; start the job first")
    if not await asyncio.to_thread(_may_savepoint, user, history):
        raise HTTPException(403, f"taking a savepoint of {job_name!r} needs edit access to the DAG that runs it")
    trigger_id = key_from(f"ui-{getattr(user, 'get_name', lambda: 'user')()}-{int(time.time() * 1000)}")
    try:
        await read(views.request_savepoint, root, job_name, trigger_id, stop, retry=False)
    except LookupError as exc:  # names the root: without credentials
        raise HTTPException(409, public_url(str(exc))) from None
    await asyncio.to_thread(_audit, user, root, job_name, trigger_id, stop, history)
    what = "Savepoint and stop" if stop else "Savepoint"
    return JSONResponse(
        {
            "trigger_id": trigger_id,
            "message": f"{what} requested (trigger id {trigger_id}); it appears below once the job took it.",
        },
        status_code=202,
    )


@app.get("/api/jobs")
async def api_jobs(user: User) -> JSONResponse:
    """Every job under the configured roots, as the list page shows them."""
    readable = await asyncio.to_thread(_require_view, user)
    roots, rows, errors = await _overview()
    shown = await asyncio.to_thread(_visible, rows, roots, readable)
    errors = errors if readable is None else []  # an error line names jobs the user may not see
    none_found = NO_ROOTS if not roots else "No jobs under these roots yet."
    return JSONResponse(
        {
            "roots": [r.__dict__ for r in _shown(roots)],
            "jobs": list_rows(shown),
            "errors": errors,
            "none_found": none_found,
        }
    )


@app.get("/api/dags/{dag_id}")
async def api_dag_jobs(dag_id: str, user: User) -> JSONResponse:
    """The jobs a DAG's tasks name (what its "Checkpoints" tab shows)."""
    found = await _named_jobs(user, dag_id, None)
    return JSONResponse({**found, "roots": [r.__dict__ for r in _shown(found["roots"])]})


@app.get("/api/dags/{dag_id}/tasks/{task_id}")
async def api_task_jobs(dag_id: str, task_id: str, user: User) -> JSONResponse:
    """The job one task names (what a task instance's "Checkpoints" tab shows)."""
    found = await _named_jobs(user, dag_id, task_id)
    return JSONResponse({**found, "roots": [r.__dict__ for r in _shown(found["roots"])]})


#: The React app's modules: the entry Airflow's UI loads, and what it imports.
BUNDLE = ("checkpoints.js", "checkpoints-common.js", "checkpoints-tab.js", "checkpoints-pages.js")


@app.get("/static/{name}")
async def bundle(name: str) -> FileResponse:
    """The React app's code (no data: served without a login, as Airflow's own bundles are). Revalidated on
    every load: the modules import each other by name, so a cached old one would not fit a new one."""
    if name not in BUNDLE:
        raise HTTPException(404, f"no {name!r} here")
    return FileResponse(STATIC / name, media_type="text/javascript", headers={"Cache-Control": "no-cache"})


@app.get("/api/jobs/{root_index}/{job_name}")
async def api_job(root_index: int, job_name: str, user: User, limit: int = views.SHOWN_CHECKPOINTS) -> JSONResponse:
    """One job's history (the newest ``limit`` checkpoints), restore point, health and live runs."""
    await asyncio.to_thread(_require_job_view, user, root_index, job_name)
    history = (await _job(root_index, job_name, limit))[1]
    may = await asyncio.to_thread(_may_savepoint, user, history)
    return JSONResponse(job_page(history, can_savepoint=may))
