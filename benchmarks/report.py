"""The benchmark tables of README.md and docs/, generated from the benchmarks' JSON files so they cannot drift.

    .venv/bin/python -m benchmarks.report           # rewrite every generated table in README.md and docs/*.md
    .venv/bin/python -m benchmarks.report --check   # exit 1 if any of them differs from the JSON

Each table sits in its page between ``<!-- begin generated: NAME -->`` and ``<!-- end generated: NAME -->``,
indented like its opening marker, and ends with a line naming the JSON file and its provenance (commit,
date, machine), with a warning when ``runtime/`` has changed since that commit (a change whose commit says, in a
``Figures-unaffected:`` trailer, why the figures hold is named instead). The goals table shows each
goal as ``benchmarks.findings`` judges it from the same files: a goal is "met" only when every measured case
meets it. Runs a rerun superseded are kept under ``benchmarks/earlier/`` (``benchmarks.keep``); the 200-partition
throughput table shows each kept run of the same runtime as the current JSON and their pairs pooled, which its
goal judges.
This module only renders; ``benchmarks.findings`` reads the JSON, derives the figures and judges the goals.
The test suite runs ``--check``.
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.estimate import NAME as ESTIMATOR
from benchmarks.estimate import Estimate
from benchmarks.findings import (
    ANSWER_GOAL_SECONDS,
    AT_SCALE_GOAL_RATIO,
    BATCH_PATH_GOAL_MS,
    BYTES_GOAL_RATIO,
    CHECKPOINTS_PER_DAY,
    IDLE_GOAL_PER_DAY,
    KEEPS_UP_PARTITIONS,
    LONG_RUN_CHECKPOINTS,
    OVERHEAD_GOAL_PERCENT,
    REPO,
    RESTORE_AT_SCALE_GOALS,
    RESTORE_GOAL_RATIO,
    RESTORE_S3_GOAL_RATIO,
    SCALE_GOAL_P50_SECONDS,
    SCALE_GOAL_P95_SECONDS,
    SCALE_GOAL_PARTITIONS,
    SCALE_GOAL_REQUESTS,
    AtScaleCase,
    Goal,
    at_scale_cases,
    batches_estimate,
    checkpoints_made,
    deletes,
    judge_goals,
    last_id,
    load,
    restore_estimate,
    restore_ratios,
    retention_met,
    retention_runs_by_files,
    rounded,
    running_cost,
    runtime_staleness,
    storage_bound,
    throughput_estimate,
    without_deletes,
)

README = REPO / "README.md"
DOCS = REPO / "docs"


def documents() -> list[Path]:
    """Every page that may hold generated tables: README.md and docs/*.md."""
    return [README, *sorted(DOCS.glob("*.md"))]


MARKER = re.compile(
    r"^(?P<indent>[ \t]*)<!-- begin generated: (?P<name>[\w-]+) -->\n.*?^[ \t]*<!-- end generated: (?P=name) -->$",
    re.M | re.S,
)


# --- formatting ---------------------------------------------------------------------------------------


def num(value: float, digits: int = 0) -> str:
    """A number with thousands separators: ``12,345`` or ``1.23``."""
    return f"{value:,.{digits}f}"


def kib(value: float) -> str:
    return f"{num(value / 1e3, 1)} KB"


def mb(value: float) -> str:
    return f"{num(value / 1e6, 1)} MB"


def kinds(counts: dict[str, int]) -> str:
    """``LIST 3, GET 1``: the request kinds that occurred."""
    return ", ".join(f"{kind} {count:,}" for kind, count in counts.items() if count and kind != "total")


def table(header: list[str], rows: list[list[str]], align: str | None = None) -> list[str]:
    """A Markdown table; ``align`` has one letter per column: ``l`` left, ``r`` right."""
    align = align or "l" + "r" * (len(header) - 1)
    rule = ["---:" if a == "r" else "---" for a in align]
    return ["| " + " | ".join(cells) + " |" for cells in (header, rule, *rows)]


def source(name: str, data: dict[str, Any], command: str) -> str:
    """The line under a table: the command, the JSON file and where and when it was measured."""
    found = data.get("provenance")
    if not found:
        where = "no provenance recorded (measured before the benchmarks recorded it)"
    else:
        machine = found["machine"]
        dirty = " with uncommitted changes" if found.get("dirty") else ""
        versions = found["versions"]
        last, unaffected = runtime_staleness(found["commit"])
        changed = f"; **the runtime has changed since** (last at {last}): rerun to confirm" if last else ""
        if unaffected and not last:
            which = "which says" if len(unaffected) == 1 else "each of which says"
            changed = f"; the runtime has changed since only in {', '.join(unaffected)}, {which} why these figures hold"
        where = (
            f"measured {found['measured_at'][:10]} at commit {found['commit']}{dirty}; {machine['cpus']} CPUs, "
            f"{machine['memory_gib']} GiB; Spark {versions.get('pyspark')}, Python {versions.get('python')}"
            f"{changed}"
        )
    return f"<sub>`{command}` → `benchmarks/{name}`: {where}.</sub>"


def _case(name: str) -> str:
    """``stateful @ 10s`` as the tables write it: ``stateful @ 10 s``."""
    return re.sub(r"@ (\d+)s$", r"@ \1 s", name)


def _size(store: str, size: dict[str, Any]) -> str:
    """A state size case as the goals name it: ``100.0 MB``, ``RocksDB 100.0 MB``."""
    return f"{'RocksDB ' if store == 'rocksdb' else ''}{mb(size['state_bytes'])}"


def _verdict(met: bool | None) -> str:
    return "reported" if met is None else "**met**" if met else "**not met**"


# --- the tables ---------------------------------------------------------------------------------------


def request_cost() -> list[str]:
    data = load("request_cost.json")
    storage, job = data["storage"], data["running_job"]
    cost = running_cost(job)
    rows = [[name, num(c["total"]), kinds(c)] for name, c in storage.items()]
    busy = job["checkpoints_while_busy"]
    rows.append(
        [
            "a checkpoint while data arrives, net of the idle rate",
            num(job["requests_per_checkpoint_net_of_idle"]),
            f"({busy['checkpoints']} checkpoints in {busy['seconds']:g} s: {busy['requests']['total']} requests, "
            f"{kinds(busy['requests'])}, less the idle rate)",
        ]
    )
    for name, aged in job.get("checkpoint_by_age", {}).items():
        where = f"from chk-{aged['first_id']}, {aged['retained']} retained, 1 s interval, net of idle"
        rows.append(
            [f"a checkpoint, {name} ({where})", num(aged["per_checkpoint"], 1), kinds(aged["per_checkpoint_by_kind"])]
        )
    rows.append(
        ["one savepoint, net of idle", num(job["savepoint"]["net_of_idle"]), kinds(job["savepoint"]["requests"])]
    )
    idle = job["idle"]
    rows.append(["**a running job, idle, per day**", f"**{num(idle['per_day'])}**", kinds(rounded(cost.idle_per_day))])
    rows.append(
        [
            "beside it, its Airflow task's kill watch, per day",
            num(idle["job_task_kill_watch_per_day"]),
            "GET (one small read a minute)",
        ]
    )
    money = cost.dollars_per_day
    busy_money = ""
    if cost.dollars_per_checkpoint is not None and cost.dollars_per_month_checkpointing is not None:
        busy_money = (
            f" A job that checkpoints all day at the default 10 s interval adds {num(CHECKPOINTS_PER_DAY)} "
            f"checkpoints a day at ${cost.dollars_per_checkpoint:.5f} each (the older job's requests above): "
            f"${num(cost.dollars_per_month_checkpointing)} a month in all."
        )
    return [
        *table(["operation", "requests", "by kind"], rows, "lrl"),
        "",
        f"Idle, with its kill watch: {num(idle['per_day_with_job_task'])} requests a day, ${num(money, 2)} a day, "
        f"${num(money * 30, 2)} a month at S3 Standard's published prices (LIST and PUT $0.005 per 1,000; GET "
        f"and HEAD $0.0004 per 1,000; deletes free).{busy_money} Requests answered after: savepoint "
        f"{job['answered_seconds']['savepoint']:g} s, stop {job['answered_seconds']['stop']:g} s.",
        "",
        source("request_cost.json", data, "python -m benchmarks.request_cost"),
    ]


def _continuous_rows(continuous: dict[str, Any], with_overhead: bool) -> list[list[str]]:
    rows = []
    for name, r in continuous.items():
        case = _case(name)
        row = [
            case,
            num(r["plain_rows_per_second"]),
            num(r["ours_rows_per_second"]),
            f"{r['plain_batch_ms_median']} / {r['plain_batch_ms_p95']}",
            f"{r['ours_batch_ms_median']} / {r['ours_batch_ms_p95']}",
            throughput_estimate(r).text(3),
        ]
        if with_overhead:
            row.append(f"{(1 - throughput_estimate(r).median) * 100:.1f} %")
        row.append(", ".join(f"{p:.2f}" for p in r["pair_ratios"]))
        rows.append(row)
    return rows


def _available_now_rows(overhead: dict[str, Any], rows_per_second: bool) -> list[list[str]]:
    rows = []
    for name, r in overhead.items():
        row = [name, f"{r['plain_seconds']:.2f}", f"{r['ours_seconds']:.2f}", f"{r['ratio_wall_time']:.2f}"]
        if rows_per_second:
            row += [num(r["plain_rows_per_second"]), num(r["ours_rows_per_second"])]
        rows.append(row)
    return rows


def overhead(name: str, rows_per_second: bool) -> list[str]:
    data = load(name)
    rounds, seconds = data["rounds"], data["continuous_seconds"]
    cluster = " --cluster" if data.get("master", "local").startswith("standalone") else ""
    command = f"python -m benchmarks.run{cluster} --rounds {rounds} --continuous-seconds {seconds:g}"
    header = [
        f"available-now, {num(next(iter(data['overhead'].values()))['rows'])} rows, median of {rounds} A/B rounds"
    ]
    header += ["plain s", "ours s", "ours/plain (wall)"] + (["rows/s plain", "rows/s ours"] if rows_per_second else [])
    pairs = len(next(iter(data["continuous"].values()))["pair_ratios"])
    continuous = [f"continuous, {seconds:g} s runs", "rows/s plain", "rows/s ours", "batch ms p50/p95 plain"]
    continuous += ["batch ms p50/p95 ours", "ours/plain (95 % CI)"] + (["overhead"] if rows_per_second else [])
    continuous += [f"the {pairs} pairs"]
    return [
        *table(header, _available_now_rows(data["overhead"], rows_per_second)),
        "",
        *table(
            continuous, _continuous_rows(data["continuous"], rows_per_second), "l" + "r" * (len(continuous) - 2) + "l"
        ),
        "",
        source(name, data, command),
    ]


# Restore from S3 (15 ms per request) across shuffle partition counts: one state_size run per count.
RESTORE_BY_PARTITIONS = [f"state_size_p{n}_s3.json" for n in (4, 50, 200, 1000)]


def restore_by_partitions() -> list[str]:
    """Restore time from S3 at each partition count measured, ours against plain Spark's restart from local
    disk, with the requests of ours' restart and the steps where it spends the difference."""
    steps = ("plan", "settle", "working_copy", "query", "final_checkpoint")
    header = ["shuffle partitions", "state", "restore plain s", "restore ours s"]
    header += ["ours/plain (median restart, 95 % CI)", "S3 requests per restart (median)", "by kind (median)"]
    header += [f"ours `{step}` ms" for step in steps]
    rows, sources = [], []
    for name in RESTORE_BY_PARTITIONS:
        data = load(name)
        for size in data["sizes"]:
            samples = size["samples"]
            totals = [_restart_requests(sample) for sample in samples]
            by_kind = {kind: statistics.median(t.get(kind, 0) for t in totals) for kind in totals[0]}
            row = [num(data["partitions"]), mb(size["state_bytes"])]
            row += [f"{size['restore_plain_seconds']:.2f}", f"{size['restore_ours_seconds']:.2f}"]
            row += [f"**{restore_estimate(size).text(3)}**", num(by_kind["total"]), kinds(by_kind)]
            row += [num(statistics.median(s["ours_step_seconds"].get(n, 0.0) for s in samples) * 1000) for n in steps]
            rows.append(row)
        sources.append(source(name, data, state_size_command(data, name)))
    lines = table(header, rows, "rrrrrrl" + "r" * len(steps))
    for line in sources:
        lines += ["", line]
    return lines


def _restart_requests(sample: dict[str, Any]) -> dict[str, int]:
    """One restart's S3 requests by kind, with ``total``, over its phases."""
    found: dict[str, int] = {}
    for counts in sample["requests"].values():
        for kind, count in counts.items():
            found[kind] = found.get(kind, 0) + count
    return found


def state_size_command(data: dict[str, Any], name: str) -> str:
    """The command that measured ``benchmarks/<name>``, a ``benchmarks.state_size`` JSON."""
    sizes = ",".join(f"{size['size_mb_target']:g}" for size in data["sizes"])
    command = f"python -m benchmarks.state_size --sizes-mb {sizes}"
    command += f" --rounds {data['rounds']}" if data.get("rounds") else ""
    command += "".join(
        f" --{key} {data[key]}" for key in ("store", "root") if data.get(key, "hdfs") not in ("hdfs", "local")
    )
    command += f" --partitions {data['partitions']}" if data.get("partitions", 4) != 4 else ""
    command += f" --latency-ms {data['latency_ms']:g}" if data.get("latency_ms") else ""
    # Results from before the option ran at Spark's default maintenance interval.
    if (interval := data.get("maintenance_interval", "60s")) != "2s":
        command += f" --maintenance-interval {interval}"
    default = "state_size" + "".join(f"_{data[key]}" for key in ("store", "root") if data.get(key) in ("rocksdb", "s3"))
    command += f" --out benchmarks/{name}" if name != f"{default}.json" else ""
    return command


def state_size(name: str) -> list[str]:
    data = load(name)
    command = state_size_command(data, name)
    rocksdb = data.get("store") == "rocksdb"
    header = ["state", "1 % changed", "ours written per checkpoint", "Spark itself wrote", "ours / Spark"]
    header += ["native new SST", "ours / SST"] if rocksdb else []
    header += ["written / state", "capture ms", "upload ms", "restore plain s", "restore ours s"]
    header += ["ours/plain (median restart, 95 % CI)", "per-restart ratios"]
    rows = []
    for size in data["sizes"]:
        row = [mb(size["state_bytes"]), num(size["changed_keys"]), kib(size["bytes_written"])]
        row += [kib(size["native_new_bytes"]), f"{size['written_to_native_ratio']:.2f}"]
        if rocksdb:
            row += [kib(size["native_new_sst_bytes"]), f"{size['written_to_native_sst_ratio']:.2f}"]
        row += [f"{size['written_to_state_ratio'] * 100:.2f} %", num(size["capture_ms"]), num(size["upload_ms"])]
        row += [f"{size['restore_plain_seconds']:.2f}", f"{size['restore_ours_seconds']:.2f}"]
        row += [f"**{restore_estimate(size).text(3)}**", ", ".join(f"{r:.2f}" for r in restore_ratios(size))]
        rows.append(row)
    lines = table(header, rows, "r" * (len(header) - 1) + "l")
    if any("requests_median" in size for size in data["sizes"]):
        lines += ["", *table(*_s3_phase_table(data["sizes"]), "lrl")]
    steps = _restart_steps_table(data["sizes"])
    if steps is not None:
        lines += ["", *table(*steps)]
    return [*lines, "", source(name, data, command)]


def _restart_steps_table(sizes: list[dict[str, Any]]) -> tuple[list[str], list[list[str]]] | None:
    """Ours' restart step by step (the run report's ``step_seconds``), median ms over the restarts, beside
    plain Spark's whole restart; None for results from before the report had steps."""
    measured = [size for size in sizes if size["samples"] and all(s.get("ours_step_seconds") for s in size["samples"])]
    if not measured:
        return None
    names: list[str] = []
    for size in measured:
        for sample in size["samples"]:
            names += [name for name in sample["ours_step_seconds"] if name not in names]
    rows = []
    for size in measured:
        samples = size["samples"]
        row = [mb(size["state_bytes"]), num(statistics.median(s["restore_plain_seconds"] for s in samples) * 1000)]
        row += [num(statistics.median(s["restore_ours_seconds"] for s in samples) * 1000)]
        row += [num(statistics.median(s["ours_step_seconds"].get(n, 0.0) for s in samples) * 1000) for n in names]
        rows.append(row)
    header = ["state", "plain restart ms", "ours restart ms", *(f"ours `{n}` ms" for n in names)]
    return header, rows


def _s3_phase_table(sizes: list[dict[str, Any]]) -> tuple[list[str], list[list[str]]]:
    names = {
        "restore_and_batch": "restore from S3 and the batch",
        "checkpoint_upload": "the checkpoint's upload (trigger to completion)",
        "after_completion": "after it: `_metadata`, lease fence, retention, publish, run end",
    }
    rows = []
    for size in sizes:
        for phase, counts in size["requests_median"].items():
            rows.append([f"{mb(size['state_bytes'])}: {names.get(phase, phase)}", num(counts["total"]), kinds(counts)])
    return ["S3 requests per restart (median restart)", "requests", "by kind"], rows


def retention() -> list[str]:
    data = load("retention_scale.json")
    rows = []
    for files, runs in retention_runs_by_files(data):
        total = ", ".join(f"{r['total_seconds']:.1f}" for r in runs) + " s"
        rows.append(
            [
                num(files),
                ", ".join(f"{r['plan_seconds']:.1f}" for r in runs) + " s",
                ", ".join(f"{r['delete_seconds']:.1f}" for r in runs) + " s",
                total if retention_met(runs, data["goal_seconds"]) else f"**{total}**",
                num(runs[0]["list_calls_planning"]),
            ]
        )
    first = data["runs"][0]
    header = [
        "files per checkpoint",
        "plan",
        f"delete {num(first['deleted_checkpoints'])} checkpoints + {num(first['deleted_savepoints'])} savepoints",
        "total, each run",
        "storage list calls",
    ]
    s3 = data["s3"]
    return [
        *table(header, rows),
        "",
        f"On S3: {num(s3['checkpoints'])} checkpoints ({s3['files_per_checkpoint']} files each) and "
        f"{s3['savepoints']} savepoints; planning {s3['requests_planning']['total']} requests "
        f"({kinds(s3['requests_planning'])}), deleting {num(s3['deleted_files'])} files "
        f"{s3['requests_deleting']['total']} ({kinds(s3['requests_deleting'])}).",
        "",
        source("retention_scale.json", data, "python -m benchmarks.retention_scale"),
    ]


def sensor_latency() -> list[str]:
    data = load("sensor_latency.json")
    rows = []
    for mode, label in (("poke", "poke"), ("deferrable", "deferrable (trigger polls storage)")):
        r = data[mode]
        samples = ", ".join(f"{s:.1f}" for s in r["latencies_seconds"])
        rows.append([label, f"{r['median_seconds']:.1f} s", f"{r['max_seconds']:.1f} s", samples])
    return [
        *table(["mode", "median", "max", "samples"], rows, "lrrl"),
        "",
        source("sensor_latency.json", data, "python -m benchmarks.sensor_latency --samples 3"),
    ]


def rescale(name: str = "rescale.json") -> list[str]:
    data = load(name)
    store = data.get("store", "rocksdb")
    rows = []
    for size in data["sizes"]:
        ratio = Estimate.from_dict(size["ratio"])
        each = ", ".join(f"{s['ours_seconds']:.1f} / {s['plain_seconds']:.1f}" for s in size["samples"])
        rows.append(
            [
                mb(size["state_bytes"]),
                f"{size['partitions']:,} → {size['to']:,}",
                f"{size['plain_seconds']:.1f} s",
                f"{size['ours_seconds']:.1f} s",
                ratio.text(),
                each,
            ]
        )
    if store == "hdfs":
        header = ["HDFS-backed state", "partitions", "plain Spark: rebuild", "ours: rescale", "ours / plain"]
    else:
        header = ["RocksDB state", "partitions", "plain Spark", "ours", "ours / plain"]
    header.append("each pair (ours / plain, s)")
    rounds = data["sizes"][0]["rounds"] if data["sizes"] else 0
    sizes = ",".join(f"{s['size_mb_target']:g}" for s in data["sizes"])
    first = data["sizes"][0] if data["sizes"] else {"partitions": 200, "to": 400}
    command = (
        f"python -m benchmarks.rescale{' --store hdfs' if store == 'hdfs' else ''} --sizes-mb {sizes} "
        f"--rounds {rounds} --partitions {first['partitions']} --to {first['to']} --root {data['root']}"
    )
    return [*table(header, rows, "lrrrll"), "", source(name, data, command)]


def page_latency() -> list[str]:
    data = load("page_latency.json")
    idle, busy, paced = data["idle"], data["while_job_page_loads"], data["while_a_user_loads_it_every_second"]
    rows = [
        ["idle", f"{idle['p50_ms']:.1f}", f"{idle['p95_ms']:.1f}", "", ""],
        [
            f"while a client reloads the job page back to back ({num(data['job_page_loads_during'])} loads)",
            f"{busy['p50_ms']:.1f}",
            f"{busy['p95_ms']:.1f}",
            f"{data['ratio_p50']:.2f}",
            f"{data['ratio_p95']:.2f}",
        ],
        [
            f"while it loads the job page once a second ({num(data['paced_loads'])} loads)",
            f"{paced['p50_ms']:.1f}",
            f"{paced['p95_ms']:.1f}",
            f"{data['paced_ratio_p50']:.2f}",
            f"{data['paced_ratio_p95']:.2f}",
        ],
    ]
    header = [
        f"`{data['other_page']}`, {num(data['requests'])} requests, {data['api_workers']} API worker; job of "
        f"{num(data['checkpoints'])} checkpoints",
        "p50 ms",
        "p95 ms",
        "× p50",
        "× p95",
    ]
    loads = ", ".join(f"{ms:,} ms" for ms in data["job_page_ms"])
    return [
        *table(header, rows),
        "",
        f"The job page itself, first loads: {loads} (the first spawns the reader processes).",
        "",
        source("page_latency.json", data, "python -m benchmarks.page_latency"),
    ]


def _goal_row(goal: Goal) -> list[str]:
    """A goal's row: what it asks, the verdict, and what was measured."""
    f = goal.figures
    match goal.name:
        case "overhead":
            asks = f"throughput overhead at most {OVERHEAD_GOAL_PERCENT:g} % at 1 s and 10 s intervals (continuous)"
            measured = "; ".join(f"{_case(name)}: ours/plain {e.text(3)}" for name, e in f["overhead"].items())
        case "bytes":
            asks = (
                f"bytes written within {BYTES_GOAL_RATIO:g}× of what Spark itself wrote for the same changes "
                "(over the job's life, and over the restarts alone)"
            )
            measured = "; ".join(f"{_size(store, s)}: {_bytes_views(s)}" for store, s in f["sizes"])
        case "batch_path":
            asks = f"under {BATCH_PATH_GOAL_MS} ms added to the batch path (batch p95, ours − plain, continuous)"
            measured = (
                "; ".join(f"{_case(name)}: {v:+g} ms" for name, v in f["added_ms"].items())
                + f"; the capture (median up to {f['capture_ms']:g} ms, both stores) runs beside the batches"
            )
        case "restore":
            asks = f"restore at most {RESTORE_GOAL_RATIO:g}× Spark's native restart (local disk)"
            measured = "; ".join(f"{_size(store, s)}: {e.text(3)}" for store, s, e in f["restore"])
        case "restore_s3":
            asks = (
                f"restore from S3 (loopback) at most {RESTORE_S3_GOAL_RATIO:g}× plain Spark's restart from local disk"
            )
            measured = "; ".join(f"{mb(s['state_bytes'])}: {e.text(2)}" for s, e in f["restore"])
            measured += " (ours downloads the state first)"
        case "restore_at_scale":
            local, on_s3 = RESTORE_AT_SCALE_GOALS.values()  # local disk, then S3
            asks = (
                f"restore at 200 partitions at most {local:g}× Spark's native restart from local disk, at most "
                f"{on_s3:g}× from S3 (15 ms per request)"
            )
            measured = "; ".join(
                f"{'S3' if data['root'] == 's3' else 'local disk'}, {mb(size['state_bytes'])}: {e.text(3)} "
                f"(goal {bound:g}×)"
                for data, size, bound, e in f["cases"]
            )
        case "at_scale":
            asks = (
                f"batches per minute at least {AT_SCALE_GOAL_RATIO:g}× plain Spark's at 200 partitions, "
                "ours checkpointing to local disk and to S3 (plain Spark on local disk)"
            )
            measured = "; ".join(
                f"{c.root}, {_case(c.key)}, {c.partitions} partitions: {c.estimate.text(3)}"
                + (f" ({len(c.runs)} runs of one runtime pooled)" if len(c.runs) > 1 else "")
                for c in f["cases"]
            )
        case "idle":
            asks = (
                f"an idle job at most {num(IDLE_GOAL_PER_DAY)} requests a day, requests answered within "
                f"{ANSWER_GOAL_SECONDS:g} s"
            )
            answered = f["answered_seconds"]
            measured = (
                f"{num(f['per_day'])} a day with its kill watch; answered after {answered['savepoint']:g} s "
                f"(savepoint), {answered['stop']:g} s (stop)"
            )
        case "sensor_poke":
            asks = "a sensor poke with nothing new costs O(1) requests and never lists `shared/`"
            poke = f["requests"]
            measured = f"{poke['total']} request ({kinds(poke)}) beside 1,000 files of an old run in `shared/`"
        case "checkpoint_by_age":
            asks = "a checkpoint's requests do not grow with the job's age or the checkpoints retained"
            first, last = f["first"], f["last"]
            measured = (
                f"{f['young']:g} requests (deletes aside) at chk-{first['first_id']} ({first['retained']} "
                f"retained), {f['old']:g} at chk-{last['first_id']} ({last['retained']} retained)"
            )
        case "checkpoints_at_scale":
            asks = (
                f"a checkpoint at {SCALE_GOAL_PARTITIONS} partitions on S3: at most {SCALE_GOAL_REQUESTS} requests "
                f"(deletes apart), p50 under {SCALE_GOAL_P50_SECONDS:g} s, p95 under {SCALE_GOAL_P95_SECONDS:g} s"
            )
            measured = "; ".join(_scale_requests(run) for run in f["runs"])
        case "keeps_up":
            asks = f"at {num(KEEPS_UP_PARTITIONS)} partitions the job keeps up with a 10 s interval"
            measured = "; ".join(_scale_pace(run) for run in f["runs"])
        case "no_growth":
            run, first, last = f["run"], f["first"], f["last"]
            asks = (
                f"no growth over {num(LONG_RUN_CHECKPOINTS)} checkpoints at {num(run['partitions'])} partitions on S3"
            )
            measured = (
                f"measured to chk-{checkpoints_made(run)}: chk-{first['first_id']}: "
                f"{first['requests_per_checkpoint']:g} requests, p50 {first['checkpoint_seconds']['p50']:g} s; "
                f"chk-{last['first_id']}: "
                f"{last['requests_per_checkpoint']:g} requests, p50 {last['checkpoint_seconds']['p50']:g} s; "
                f"stored / live bytes at most {max(_stored_share(w) for w in run['windows']):.2f}"
            )
        case "storage_bound":
            run, worst = f["run"], f["worst"]
            asks = (
                "storage proportional to live state: at most twice the bytes retained checkpoints reference, "
                "plus the dead floor (1 MiB) of each referenced segment"
            )
            measured = (
                f"at most {mb(worst['stored_bytes'])} stored for {mb(worst['live_bytes'])} live in "
                f"{worst['segments_referenced']} segments (chk-{worst['first_id']}, bound "
                f"{mb(storage_bound(worst))}), over {num(checkpoints_made(run))} checkpoints"
            )
        case "retention":
            asks = f"retention of 10,000 checkpoints under {f['goal_seconds']:g} s in every run"
            measured = (
                f"slowest run {f['slowest']:.1f} s; one list call per plan; on S3 one delete request per 1,000 keys"
            )
        case _:
            raise KeyError(f"benchmarks.report cannot render goal {goal.name!r}")
    return [asks, _verdict(goal.met), measured]


def _scale_requests(run: dict[str, Any]) -> str:
    """One ``benchmarks.scale`` run's requests and seconds per checkpoint, as the goal judges them."""
    if run.get("failed"):
        return f"{run.get('query', 'count')}: no checkpoint measured ({run['failed']})"
    by_kind = run["requests_per_checkpoint_by_kind"]
    seconds = run["checkpoint_seconds"]
    return (
        f"{run.get('query', 'count')}, {run.get('store', 'hdfs')} (`{run['results']}`): "
        f"{without_deletes(by_kind):g} requests "
        f"(+{deletes(by_kind):g} batched deletes; S3 at 15 ms per request), p50 {seconds['p50']:g} s, "
        f"p95 {seconds['p95']:g} s over "
        f"{run['checkpoints']} checkpoints"
    )


def _scale_pace(run: dict[str, Any]) -> str:
    """One ``benchmarks.scale`` run's pace: checkpoint durations against its interval, and trigger gaps."""
    if run.get("failed"):
        return f"no checkpoint measured ({run['failed']})"
    seconds, gaps = run["checkpoint_seconds"], run.get("trigger_gap_seconds") or {}
    text = (
        f"{run['checkpoints']} checkpoint{'s' if run['checkpoints'] != 1 else ''} while data arrived (each must be "
        f"done within the interval), p95 {seconds['p95']:g} s, max {seconds['max']:g} s "
        f"(interval {run.get('interval_seconds', 10):g} s)"
    )
    if gaps.get("max") is not None:
        text += f"; triggers {gaps['p50']:g} s apart (median), {gaps['max']:g} s at most"
    if run.get("batches_covered"):
        text += f"; {run['batches_covered']} batches covered"
    return text


def _stored_share(window: dict[str, Any]) -> float:
    return window["stored_bytes"] / window["live_bytes"] if window["live_bytes"] else 0.0


def _bytes_views(size: dict[str, Any]) -> str:
    """The bytes goal's views of one size: the job's life and the restarts alone where measured, the worst one."""
    views = []
    if "written_to_native_life_ratio" in size:
        views.append(f"life {size['written_to_native_life_ratio']:.2f}×")
    if "written_to_native_sequence_ratio" in size:
        views.append(f"restarts {size['written_to_native_sequence_ratio']:.2f}×")
    views.append(f"worst single restart {size['written_to_native_ratio_max']:.2f}×")
    return ", ".join(views)


def goals() -> list[str]:
    """The goals table: each goal as ``benchmarks.findings`` judged it."""
    return [
        *table(["goal", "verdict", "measured"], [_goal_row(goal) for goal in judge_goals()], "lll"),
        "",
        f"Every ratio is ours/plain Spark from paired runs: the {ESTIMATOR}, printed as median (low–high, "
        "pairs). A ratio goal is met only when the interval's far end meets it, judged before rounding: a far "
        "end printed equal to its goal can still miss it.",
    ]


def _goal_short(goal: Goal) -> str:
    """A goal in a few words, for the README (the benchmarks page's goals table says it in full)."""
    match goal.name:
        case "overhead":
            return f"throughput overhead at most {OVERHEAD_GOAL_PERCENT:g} % (1 s and 10 s intervals)"
        case "bytes":
            return f"bytes written within {BYTES_GOAL_RATIO:g}× of Spark's own"
        case "batch_path":
            return f"under {BATCH_PATH_GOAL_MS} ms added to a batch (p95)"
        case "restore":
            return f"restore at most {RESTORE_GOAL_RATIO:g}× Spark's native restart (local disk)"
        case "restore_s3":
            return f"restore from S3 at most {RESTORE_S3_GOAL_RATIO:g}× a native restart from local disk"
        case "restore_at_scale":
            local, on_s3 = RESTORE_AT_SCALE_GOALS.values()  # local disk, then S3
            return f"restore at 200 partitions at most {local:g}× native (local disk), {on_s3:g}× (S3)"
        case "at_scale":
            return f"batches per minute at least {AT_SCALE_GOAL_RATIO:g}× plain Spark's at 200 partitions"
        case "idle":
            return f"an idle job at most {num(IDLE_GOAL_PER_DAY)} requests a day"
        case "sensor_poke":
            return "a sensor poke costs O(1) requests"
        case "checkpoint_by_age":
            return "a checkpoint's requests do not grow with age or retained checkpoints"
        case "checkpoints_at_scale":
            return (
                f"a checkpoint at {SCALE_GOAL_PARTITIONS} partitions on S3: at most {SCALE_GOAL_REQUESTS} requests, "
                f"p50 under {SCALE_GOAL_P50_SECONDS:g} s, p95 under {SCALE_GOAL_P95_SECONDS:g} s"
            )
        case "keeps_up":
            return f"{num(KEEPS_UP_PARTITIONS)} partitions keep up with a 10 s interval"
        case "no_growth":
            return f"no growth over {num(LONG_RUN_CHECKPOINTS)} checkpoints"
        case "storage_bound":
            return "storage proportional to live state"
        case "retention":
            return f"retention of 10,000 checkpoints under {goal.figures['goal_seconds']:g} s"
    return _goal_row(goal)[0]


def headline() -> list[str]:
    """The README's headline: the reliability run's totals, then each goal and its verdict (figures in the docs)."""
    judged = judge_goals()
    met = sum(1 for goal in judged if goal.met)
    figures = load("reliability.json")["figures"]
    duplicated = figures.get("rows duplicated (exactly-once)", 0)
    return [
        f"In one fresh-clone run of the tests: {num(figures['kills survived'])} SIGKILLs survived, "
        f"{num(figures['rows checked'])} rows checked, {num(figures['rows lost'])} lost, {num(duplicated)} "
        "published twice ([reliability](docs/reliability.md)).",
        "",
        *table(["goal", "verdict"], [[_goal_short(goal), _goal_row(goal)[1]] for goal in judged], "ll"),
        "",
        f"{met} of {len(judged)} goals met, each judged by the far end of a bootstrap 95 % confidence interval of "
        "paired runs against plain Spark; the figures are in [the benchmarks page](docs/benchmarks.md).",
    ]


# The reliability figures a whole default run records (tests/support/figures.py), in the order a reader asks.
RELIABILITY_ROWS = {
    "kills survived": "kills survived (SIGKILL of the whole process group, each followed by a restore)",
    "kills in the state-store chains": "… of them in the state-store chains (each layout of Spark's two stores)",
    "kills in the rewind chains": "… of them in the rewind chains (restores from an older checkpoint or a savepoint)",
    "storage faults injected": "storage faults injected (write, rename, delete errors; slow writes)",
    "overlapping runs refused": "overlapping runs refused (exit 4, holder named)",
    "lease takeovers": "lease takeovers of a frozen run (which then wrote nothing)",
    "rows checked": "rows checked",
    "rows lost": "rows lost",
    "rows duplicated (exactly-once)": "rows duplicated, exactly-once",
    "rows duplicated (at-least-once, allowed)": "rows duplicated, at-least-once (allowed)",
}
SOAK_COLUMNS = {
    "job_files": "job folder files",
    "job_bytes": "job folder bytes",
    "leftover_files": "leftover files (no retained checkpoint needs them)",
    "sink_bookkeeping_files": "sink bookkeeping files",
    "working_folders": "working folders",
}
RELIABILITY_COMMAND = "CI=true bash .ci/run; python -m tests.support.figures --publish"


def reliability() -> list[str]:
    """What one whole run of the default suite survived and checked (``benchmarks/reliability.json``)."""
    data = load("reliability.json")
    figures, kills = data["figures"], data["kills_by_point"]
    rows = [[label, num(figures[key])] for key, label in RELIABILITY_ROWS.items() if key in figures]
    rows.insert(1, ["… by point", ", ".join(f"{point} {n}" for point, n in sorted(kills.items()))])
    return [*table(["figure", "count"], rows), "", source("reliability.json", data, RELIABILITY_COMMAND)]


def soak() -> list[str]:
    """The soak's job folder halfway and at the end (``tests/system/test_soak.py``, in the same run)."""
    data = load("reliability.json")
    figures = data["figures"]
    runs = figures["soak runs"]
    rows = [
        [f"run {runs // 2 if moment == 'half' else runs}", *(num(figures[f"soak {moment}: {k}"]) for k in SOAK_COLUMNS)]
        for moment in ("half", "end")
    ]
    return [*table(["after", *SOAK_COLUMNS.values()], rows), "", source("reliability.json", data, RELIABILITY_COMMAND)]


def throughput_at_scale() -> list[str]:
    """Batches per minute at 200 partitions, ours against plain Spark (``benchmarks.run --partitions``): each
    kept run of the current runtime, and where there are several, all their pairs pooled (what the goal
    judges)."""
    cases = at_scale_cases()
    rows, sources = [], {}
    for c in cases:
        label = f"{_case(c.key)}, {c.partitions} partitions, ours to {c.root}"
        for path, data in c.runs:
            sources.setdefault(path, source(path, data, _throughput_command(c.name, data)))
        if len(c.runs) == 1:
            rows.append(_throughput_row(label, c.judged, bold=True))
            continue
        for path, data in c.runs:
            rows.append(_throughput_row(f"{label}, run at {_commit(path, data)}", c.case(data), bold=False))
        rows.append(_throughput_row(f"{label}, the {len(c.runs)} runs' pairs pooled", c.judged, bold=True))
    header = ["case", "batches/min plain", "batches/min ours", "ours/plain batches/min (95 % CI)"]
    header += ["batch ms p50 / p95 plain", "batch ms p50 / p95 ours", "ours/plain rows/s (95 % CI)"]
    table_lines = [*table(header, rows), "", f"Ratios: the {ESTIMATOR}.", ""]
    return [*table_lines, *_batch_time_table(cases), *sources.values()]


def _throughput_row(label: str, r: dict[str, Any], bold: bool) -> list[str]:
    """One throughput row; ``bold`` marks the figure its goal judges."""
    batches = batches_estimate(r).text(3)
    return [
        label,
        f"{r['plain_batches_per_minute']:g}",
        f"{r['ours_batches_per_minute']:g}",
        f"**{batches}**" if bold else batches,
        f"{r['plain_batch_ms_median']:,} / {r['plain_batch_ms_p95']:,}",
        f"{r['ours_batch_ms_median']:,} / {r['ours_batch_ms_p95']:,}",
        throughput_estimate(r).text(3),
    ]


def _commit(path: str, data: dict[str, Any]) -> str:
    """The commit a run was measured at, as its kept file names it (``7142379.2``: the second run kept of it)."""
    return Path(path).stem.partition("@")[2] or data["provenance"]["commit"]


def _throughput_command(name: str, data: dict[str, Any]) -> str:
    """The command that measured a throughput JSON (a kept earlier run was written to the same ``name``)."""
    cases = ",".join(case.replace(" @ ", "@") for case in data["continuous"])
    return (
        f"python -m benchmarks.run --partitions {data['partitions']} --cases {cases} --rounds {data['rounds']} "
        f"--continuous-seconds {data['continuous_seconds']:g}"
        + (f" --warmup-seconds {data['warmup_seconds']:g}" if "warmup_seconds" in data else "")
        + (f" --checkpoint-niceness {data['checkpoint_niceness']}" if "checkpoint_niceness" in data else "")
        + f" --root {'s3' if 's3' in data['root'] else 'local'}"
        + (f" --latency-ms {data['latency_ms']:g}" if data.get("latency_ms", 15.0) != 15.0 else "")
        + f" --out benchmarks/{name}"
    )


def _batch_time_table(cases: list[AtScaleCase]) -> list[str]:
    """Where the batch time and the machine went, per side, for the runs that recorded it (medians of runs)."""
    rows = []
    for c in cases:
        for path, data in c.runs:
            r = c.case(data)
            if "plain_state_commit_ms_median" not in r:
                continue
            # Older S3 runs served S3 from the driver's process: its CPU counted as ours' Python.
            shared = ", S3 server in ours' driver process" if "s3" in data["root"] and "s3_server" not in data else ""
            which = f", run at {_commit(path, data)}" if len(c.runs) > 1 else ""
            rows.append(
                [
                    f"{_case(c.key)}, ours to {data['root']}{shared}{which}",
                    f"{num(r['plain_state_commit_ms_median'])} / {num(r['ours_state_commit_ms_median'])}",
                    f"{r['plain_python_cpu_s_per_minute']:g} / {r['ours_python_cpu_s_per_minute']:g}",
                    f"{r['plain_jvm_cpu_s_per_minute']:g} / {r['ours_jvm_cpu_s_per_minute']:g}",
                    _machine_in_runs(r),
                    _pairs_in_order(r),
                ]
            )
    if not rows:
        return []
    header = ["case", "state store commit ms per batch, plain / ours (summed over partitions)",
              "Python process CPU s per minute, plain / ours",
              "JVM CPU s per minute, plain / ours",
              "machine busy / steal CPU s per minute, plain / ours (S3 server)",
              "pair ratios in run order (p: plain ran first, o: ours)"]  # fmt: skip
    return [*table(header, rows), ""]


def _machine_in_runs(r: dict[str, Any]) -> str:
    """The whole machine's busy and steal CPU per minute, per side (medians of runs), and the S3 server
    process's in ours' runs: whether the machine, the host or the server moved a pair. Runs recorded before
    commit 9d08b92 show none."""
    runs = r.get("runs") or []
    if not runs or "machine_cpu_s_per_minute" not in runs[0]["ours"]:
        return "not recorded"

    def median(side: str, measure: str) -> str:
        return f"{statistics.median(run[side][measure] for run in runs):.1f}"

    text = " / ".join(
        f"{median(side, 'machine_cpu_s_per_minute')}, {median(side, 'steal_cpu_s_per_minute')}"
        for side in ("plain", "ours")
    )
    if "s3_server_cpu_s_per_minute" in runs[0]["ours"]:
        text += f" ({median('ours', 's3_server_cpu_s_per_minute')})"
    return text


def _pairs_in_order(r: dict[str, Any]) -> str:
    """Each pair's ratio of batches per minute (the goal's measure) with the side that ran first; runs from
    before the JSON kept every run show none."""
    if "runs" not in r:
        return "not kept"
    return ", ".join(
        f"{run['ours']['batches_per_minute'] / run['plain']['batches_per_minute']:.2f} {run['first'][0]}"
        for run in r["runs"]
    )


def scale(name: str = "scale.json") -> list[str]:
    """Checkpoints at 4 to 200+ partitions on S3, file merging off and on (``benchmarks.scale``)."""
    data = load(name)
    by_query = any("query" in run for run in data["runs"])
    rows = []
    for run in data["runs"]:
        row = [str(run["partitions"])]
        row += [run.get("query", "count"), run.get("store", "hdfs")] if by_query else []
        if run.get("failed"):
            rows.append([*row, run["file_merging"], f"no checkpoint measured: {run['failed']}", "", "", "", "", "0"])
            continue
        seconds = run["checkpoint_seconds"]
        row += [
            run["file_merging"],
            num(run["requests_per_checkpoint"], 1),
            kinds({k: round(v) for k, v in run["requests_per_checkpoint_by_kind"].items() if round(v) > 0}),
            f"{run['objects_written_per_checkpoint']:g} ({run['files_per_checkpoint']:g} files)",
            f"{seconds['p50']} / {seconds['p95']} / {seconds['max']}",
            f"${num(run['monthly_request_cost_usd'], 2)}",
            str(run["checkpoints"]),
        ]
        rows.append(row)
    header = ["partitions", *(["query", "state store"] if by_query else []), "file merging",
              "requests per checkpoint", "by kind", "objects written per checkpoint",
              "checkpoint p50 / p95 / max (s)", "S3 request cost a month (10 s interval)",
              "checkpoints measured"]  # fmt: skip
    if "argv" in data:
        command = " ".join(["python -m benchmarks.scale", *data["argv"]])
    else:
        counts = ",".join(dict.fromkeys(str(run["partitions"]) for run in data["runs"]))
        command = f"python -m benchmarks.scale --partitions {counts} --latency-ms {data['latency_ms']:g}"
    align = "l" * (4 if by_query else 2) + "rlrrrr"
    return [*table(header, rows, align), "", source(name, data, command)]


def long_run() -> list[str]:
    """A job's checkpoints over its life, in windows at several ages (``benchmarks.long_run``)."""
    data = load("long_run.json")
    rows = []
    for window in data["windows"]:
        seconds = window["checkpoint_seconds"]
        rows.append(
            [
                f"chk-{window['first_id']} to chk-{last_id(window)}",
                num(window["requests_per_checkpoint"], 1),
                kinds({k: round(v, 1) for k, v in window["requests_per_checkpoint_by_kind"].items()}),
                f"{seconds['p50']} / {seconds['p95']} / {seconds['max']}",
                f"{mb(window['stored_bytes'])} / {mb(window['live_bytes'])} ({_stored_share(window):.2f}×)",
                f"{window['segments_stored']} / {window['segments_referenced']}",
                f"{num(window['driver_python_mib'])} / {num(window['jvm_mib'])}",
            ]
        )
    header = ["checkpoints", "requests per checkpoint", "by kind", "checkpoint p50 / p95 / max (s)",
              "stored / live bytes", "segments stored / referenced", "driver Python / JVM resident (MiB)"]  # fmt: skip
    command = " ".join(["python -m benchmarks.long_run", *data["argv"]])
    return [*table(header, rows, "lrlrrrr"), "", source("long_run.json", data, command)]


def metadata_size() -> list[str]:
    """``_metadata`` at 2,000 partitions and 1,000 checkpoints (``benchmarks.metadata_size``)."""
    data = load("metadata_size.json")
    size, entries, resident = data["metadata_bytes"], data["entries"], data["resident_mib_at_checkpoint"]
    rows = [
        ["files in a checkpoint (median / max)", f"{num(entries['median'])} / {num(entries['max'])}"],
        ["`_metadata` as stored (median / max)", f"{kib(size['median'])} / {kib(size['max'])}"],
        [
            "its JSON, uncompressed (median / max); stored share (median)",
            f"{kib(data['json_bytes']['median'])} / {kib(data['json_bytes']['max'])}; "
            f"{data['stored_share_median'] * 100:.1f} %",
        ],
        ["write `_metadata` (median / max)", f"{data['write_ms']['median']:g} / {data['write_ms']['max']:g} ms"],
        [
            "retention after it, reading it back (median / max)",
            f"{data['retention_ms']['median']:g} / {data['retention_ms']['max']:g} ms",
        ],
        ["read and parse the last one", f"{data['read_ms']:g} ms"],
        [
            "driver resident memory at checkpoint " + ", ".join(resident),
            ", ".join(f"{value:g} MiB" for value in resident.values()),
        ],
        [
            "Python allocations of the last checkpoint's bookkeeping, peak",
            f"{data['one_checkpoint_python_peak_mib']:g} MiB",
        ],
    ]
    command = (
        f"python -m benchmarks.metadata_size --partitions {data['partitions']} --checkpoints {data['checkpoints']}"
    )
    header = [f"{num(data['partitions'])} partitions, {num(data['checkpoints'])} checkpoints, "
              f"{num(data['lineage_ranges'])} lineage ranges", "measured"]  # fmt: skip
    return [*table(header, rows, "lr"), "", source("metadata_size.json", data, command)]


GENERATED: dict[str, Callable[[], list[str]]] = {
    "goals": goals,
    "headline": headline,
    "reliability": reliability,
    "soak": soak,
    "request-cost": request_cost,
    "overhead": lambda: overhead("results.json", True),
    "overhead-cluster": lambda: overhead("results_cluster.json", False),
    "state-size": lambda: state_size("state_size.json"),
    "state-size-rocksdb": lambda: state_size("state_size_rocksdb.json"),
    "state-size-s3": lambda: state_size("state_size_s3.json"),
    "retention": retention,
    "sensor-latency": sensor_latency,
    "page-latency": page_latency,
    "rescale": rescale,
    "rescale-hdfs": lambda: rescale("rescale_hdfs.json"),
    "scale": scale,
    "throughput-at-scale": throughput_at_scale,
    "metadata-size": metadata_size,
    "long-run": long_run,
    "scale-queries": lambda: scale("scale_queries.json"),
    "restore-at-scale-local": lambda: state_size("state_size_p200.json"),
    "restore-at-scale-s3": lambda: state_size("state_size_p200_s3.json"),
    "restore-by-partitions": restore_by_partitions,
}


def render(readme: str) -> str:
    """``readme`` with every generated block filled in from the JSON files."""

    def fill(match: re.Match[str]) -> str:
        indent, name = match["indent"], match["name"]
        if name not in GENERATED:
            raise KeyError(f"README.md has a generated block {name!r} that benchmarks.report does not know")
        body = [f"{indent}{line}" if line else "" for line in GENERATED[name]()]
        return "\n".join(
            [f"{indent}<!-- begin generated: {name} -->", *body, f"{indent}<!-- end generated: {name} -->"]
        )

    return MARKER.sub(fill, readme)


def blocks(readme: str) -> list[str]:
    """The names of the generated blocks in ``readme``."""
    return [match["name"] for match in MARKER.finditer(readme)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.report", description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a page is not what the JSON gives")
    parser.add_argument("--readme", help="one page instead of README.md and docs/*.md")
    args = parser.parse_args(argv)
    failed = 0
    for path in [Path(args.readme)] if args.readme else documents():
        current = path.read_text()
        if not blocks(current):
            continue
        wanted = render(current)
        if args.check:
            if wanted != current:
                print(f"{path} differs from the benchmarks' JSON: run python -m benchmarks.report", file=sys.stderr)
                failed = 1
            else:
                print(f"{path}: {len(blocks(current))} generated tables match the JSON")
            continue
        path.write_text(wanted)
        print(f"{path}: {len(blocks(wanted))} generated tables written")
    return failed


if __name__ == "__main__":
    sys.exit(main())
