"""The checkpoint pages as HTML: the job list and one job's history. Every value is escaped."""

from __future__ import annotations

from html import escape
from typing import Any
from urllib.parse import quote

from airflow_checkpoint_provider.ui.charts import history_charts, partition_charts
from spark_checkpoint_runtime.durations import format_bytes, format_duration

STYLE = """
:root{--fg:#1b1b1b;--bg:#ffffff;--muted:#555;--line:#ddd;--head:#f3f5f8;--link:#1a5fb4;--good:#137333;--bad:#b3261e}
:root.dark{--fg:#e2e8f0;--bg:#111827;--muted:#a0aec0;--line:#2d3748;--head:#1f2937;--link:#90cdf4;--good:#68d391;
--bad:#fc8181;color-scheme:dark}
body{font-family:system-ui,sans-serif;margin:20px;color:var(--fg);background:var(--bg)}
a{color:var(--link)}
table{border-collapse:collapse;margin:8px 0 20px}
th,td{border-bottom:1px solid var(--line);padding:4px 10px;text-align:left;font-size:13px}
th{background:var(--head)}
.healthy{color:var(--good)}.stalled,.damaged{color:var(--bad);font-weight:600}
.no-checkpoint,.note{color:var(--muted)}.note{font-size:13px}
button{padding:6px 12px}
svg text{fill:var(--fg)}
"""

# Follow Airflow's light or dark mode: the UI frames these pages (same origin) and marks its own document
# "dark"; opened on their own, the pages follow the UI's stored choice, else the system's.
THEME = """
(function () {
  function dark() {
    try {
      var ui = window.parent !== window && window.parent.document.documentElement;
      if (ui) return ui.classList.contains("dark");
    } catch (e) {}
    var chosen = null;
    try { chosen = localStorage.getItem("theme"); } catch (e) {}
    if (chosen === "dark" || chosen === "light") return chosen === "dark";
    return window.matchMedia("(prefers-color-scheme: dark)").matches;
  }
  function apply() { document.documentElement.classList.toggle("dark", dark()); }
  apply();
  try {
    new MutationObserver(apply).observe(window.parent.document.documentElement, {attributes: true});
  } catch (e) {}
})();
"""


def _page(title: str, body: str) -> str:
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{escape(title)}</title>"
        f"<style>{STYLE}</style><script>{THEME}</script></head><body>{body}</body></html>"
    )


def job_href(row: dict[str, Any]) -> str:
    """The job page's link, relative to ``/checkpoints/``, so that it works under any ``[api] base_url`` path."""
    return f"jobs/{row['root_index']}/{quote(row['job_name'])}"


def _age(seconds: float | None) -> str:
    return "" if seconds is None else f"{format_duration(seconds)} ago"


def _health(health: dict[str, Any]) -> str:
    state = health["state"]
    return f'<span class="{escape(state.replace(" ", "-"))}" data-health="{escape(state)}">{escape(state)}</span>'


def job_list_page(rows: list[dict[str, Any]], roots: list[Any], errors: list[str]) -> str:
    """Every job under the configured roots that the user may see, one row each."""
    if not roots:
        body = (
            "<h1>Checkpoints</h1><p>No checkpoint roots are configured. Set <code>[checkpoint_provider] roots</code> "
            "(or <code>AIRFLOW__CHECKPOINT_PROVIDER__ROOTS</code>) to a comma-separated list of roots, each "
            "optionally followed by <code>|connection_id</code>.</p>"
        )
        return _page("Checkpoints", body)
    lines = [
        "<h1>Checkpoints</h1>",
        "<p class='note'>Roots: " + ", ".join(f"[{r.index}] {escape(r.url)}" for r in roots) + "</p>",
        *(f"<p class='damaged'>{escape(e)}</p>" for e in errors),
        "<table id='jobs'><tr><th>Job</th><th>Root</th><th>Health</th><th>Latest valid checkpoint</th>"
        "<th>Completed</th><th>Checkpoints</th><th>Damaged</th><th>Savepoints</th><th>Running</th></tr>",
    ]
    for row in rows:
        latest = row["latest_checkpoint_id"]
        lines.append(
            f"<tr data-job='{escape(row['job_name'])}'><td><a href='{escape(job_href(row))}'>"
            f"{escape(row['job_name'])}</a></td><td>{row['root_index']}</td><td>{_health(row['health'])}</td>"
            f"<td>{'' if latest is None else f'chk-{latest}'}</td>"
            f"<td>{escape(row['latest_completed'] or '')} {escape(_age(row['health']['age_seconds']))}</td>"
            f"<td>{row['retained_checkpoints']}</td><td>{row['damaged_checkpoints']}</td><td>{row['savepoints']}</td>"
            f"<td>{'yes (holds the lease)' if row['running'] else 'no'}</td></tr>"
        )
    lines.append("</table>")
    if not rows:
        lines.append("<p id='none-found'>No jobs under these roots yet.</p>")
    return _page("Checkpoints", "".join(lines))


def _history_rows(rows: list[dict[str, Any]], table_id: str) -> str:
    out = [
        f"<table id='{table_id}'><tr><th>Id</th><th>Batch</th><th>Completed</th><th>Duration</th>"
        "<th>Written</th><th>Total</th><th>Restored from</th><th>Status</th><th>Path</th></tr>"
    ]
    for row in rows:
        restored = row.get("restored_from") or {}
        restored_text = f"{restored.get('kind', '')} {restored.get('id', '')}".strip() if restored else ""
        duration = row.get("duration_ms")
        status = row.get("status", "")
        css = "damaged" if status.startswith("damaged") else ""
        out.append(
            f"<tr data-id='{row.get('id')}'><td>{row.get('id') if row.get('id') is not None else ''}</td>"
            f"<td>{row.get('batch_id', '')}</td><td>{escape(row.get('completed') or '')}</td>"
            f"<td>{'' if duration is None else escape(format_duration(duration / 1000))}</td>"
            f"<td>{'' if row.get('bytes_written') is None else escape(format_bytes(row['bytes_written']))}</td>"
            f"<td>{'' if row.get('total_bytes') is None else escape(format_bytes(row['total_bytes']))}</td>"
            f"<td>{escape(restored_text)}</td><td class='{css}' data-status='{escape(status)}'>{escape(status)}</td>"
            f"<td>{escape(row.get('path') or '')}</td></tr>"
        )
    out.append("</table>")
    return "".join(out)


def job_page(history: dict[str, Any], *, message: str = "", can_savepoint: bool = True) -> str:
    """One job: health, restore point, savepoint action, charts, checkpoints and savepoints."""
    point = history["restore_point"]
    health = history["health"]
    running = history["live_runs"]
    lines = [
        "<p><a href='../../'>All jobs</a></p>",
        f"<h1>{escape(history['job_name'])}</h1>",
        f"<p class='note'>{escape(history['location'])}</p>",
        f"<p>Health: {_health(health)} {escape(_age(health['age_seconds']))} (window "
        f"{escape(format_duration(health['window_seconds']))}, the health sensor's default rule)</p>",
    ]
    if point["id"] is not None:
        lines.append(
            f"<p id='restore-point'>Restore from <code>latest</code> would start from <b>chk-{point['id']}</b> "
            f"({escape(point['path'])}).</p>"
        )
    else:
        lines.append(
            "<p id='restore-point' class='damaged'>Restore from <code>latest</code> has no valid checkpoint.</p>"
        )
    if point["damaged"]:
        lines.append("<p>Skipped as damaged:</p><ul id='damaged'>")
        lines += [f"<li>chk-{d['id']}: {escape(d['reason'])}</li>" for d in point["damaged"]]
        lines.append("</ul>")
    if message:
        lines.append(f"<p id='message'><b>{escape(message)}</b></p>")
    if running:
        runs = ", ".join(escape(r.get("run_key") or r.get("run_id") or "") for r in running)
        lines.append(f"<p>Running: {runs}</p>")
        if can_savepoint:
            lines.append(
                f"<form method='post' action='{escape(quote(history['job_name']))}/savepoint'>"
                "<button id='take-savepoint' type='submit'>Take savepoint"
                "</button> <label><input type='checkbox' name='stop' value='true'> and stop the job</label></form>"
            )
    else:
        lines.append("<p class='note'>No run holds the lease: savepoints need a running job.</p>")
    shown = history["shown"]
    total = history["checkpoint_count"]
    lines.append(history_charts(history["checkpoints"]))
    if history.get("partitions"):
        lines.append(f"<h2>State of chk-{point['id']} by partition</h2>")
        lines.append(partition_charts(history["partitions"]))
    note = f" (newest {shown} of {total})" if shown < total else ""
    lines.append(f"<h2>Checkpoints{escape(note)}</h2>")
    if shown < total:
        more = min(total, shown * 10)
        lines.append(f"<p class='note'><a href='?limit={more}'>Show the newest {more}</a></p>")
    lines.append(_history_rows(list(reversed(history["checkpoints"])), "checkpoints"))
    lines.append("<h2>Savepoints</h2>")
    lines.append(_history_rows(history["savepoints"], "savepoints"))
    return _page(f"{history['job_name']}: checkpoints", "".join(lines))
