"""The README's benchmark tables, generated from the benchmarks' JSON files so they cannot drift.

    .venv/bin/python -m benchmarks.report           # rewrite every generated table in README.md
    .venv/bin/python -m benchmarks.report --check   # exit 1 if README.md differs from the JSON

Each table sits in README.md between ``<!-- begin generated: NAME -->`` and ``<!-- end generated: NAME -->``,
indented like its opening marker, and ends with a line naming the JSON file and its provenance (commit,
date, machine), with a warning when ``runtime/`` has changed since that commit. The goals table judges each
goal from the same files: a goal is "met" only when every measured case meets it. The test suite runs
``--check``.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
RESULTS = REPO / "benchmarks"

MARKER = re.compile(
    r"^(?P<indent>[ \t]*)<!-- begin generated: (?P<name>[\w-]+) -->\n.*?^[ \t]*<!-- end generated: (?P=name) -->$",
    re.M | re.S,
)

# S3 Standard, us-east-1, published prices per 1,000 requests (deletes are free).
S3_PRICE_PER_1000 = {"LIST": 0.005, "PUT": 0.005, "COPY": 0.005, "GET": 0.0004, "HEAD": 0.0004}

OVERHEAD_GOAL_PERCENT = 5.0
BYTES_GOAL_RATIO = 1.5
RESTORE_GOAL_RATIO = 1.1
IDLE_GOAL_PER_DAY = 20_000
ANSWER_GOAL_SECONDS = 10.0
BATCH_PATH_GOAL_MS = 50
AGE_GROWTH_ALLOWED = 1.15  # room for the one listing of the job folder, a page per 1,000 files


def load(name: str) -> dict[str, Any]:
    """One benchmark's JSON under ``benchmarks/``."""
    return json.loads((RESULTS / name).read_text())


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


def dollars(counts: dict[str, float]) -> float:
    return sum(S3_PRICE_PER_1000.get(kind, 0.0) * count / 1000 for kind, count in counts.items() if kind != "total")


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
        where = (
            f"measured {found['measured_at'][:10]} at commit {found['commit']}{dirty}; {machine['cpus']} CPUs, "
            f"{machine['memory_gib']} GiB; Spark {versions.get('pyspark')}, Python {versions.get('python')}"
            f"{_runtime_changed_since(found['commit'])}"
        )
    return f"<sub>`{command}` → `benchmarks/{name}`: {where}.</sub>"


def _git(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, timeout=30)


def _runtime_changed_since(commit: str | None) -> str:
    """A warning when the runtime has changed since ``commit``: the figures may no longer hold."""
    if not commit:
        return ""
    last = _git("log", "-1", "--format=%h", "--", "runtime/").stdout.strip()
    if not last or _git("merge-base", "--is-ancestor", last, commit).returncode == 0:
        return ""
    return f"; **the runtime has changed since** (last at {last}): rerun to confirm"


# --- the tables ---------------------------------------------------------------------------------------


def request_cost() -> list[str]:
    data = load("request_cost.json")
    storage, job = data["storage"], data["running_job"]
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
    per_day = {k: v * 86400 / idle["seconds"] for k, v in idle["requests"].items()}
    rows.append(["**a running job, idle, per day**", f"**{num(idle['per_day'])}**", kinds(_rounded(per_day))])
    rows.append(
        [
            "beside it, its Airflow task's kill watch, per day",
            num(idle["job_task_kill_watch_per_day"]),
            "GET (one small read a minute)",
        ]
    )
    money = dollars(per_day) + dollars({"GET": idle["job_task_kill_watch_per_day"]})
    busy_money = ""
    aged = list(job.get("checkpoint_by_age", {}).values())
    if aged:
        # The older job's per-checkpoint requests, 8,640 checkpoints a day (the default 10 s interval).
        per_checkpoint = dollars(aged[-1]["per_checkpoint_by_kind"])
        monthly = money * 30 + per_checkpoint * 8640 * 30
        busy_money = (
            f" A job that checkpoints all day at the default 10 s interval adds 8,640 checkpoints a day at "
            f"${per_checkpoint:.5f} each (the older job's requests above): ${num(monthly)} a month in all."
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


def _rounded(counts: dict[str, float]) -> dict[str, int]:
    return {kind: round(value) for kind, value in counts.items()}


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
            f"{r['ratio_rows_per_second']:.3f}",
        ]
        if with_overhead:
            row.append(f"{r['overhead_percent']:.1f} %")
        row.append(", ".join(f"{p:.2f}" for p in r["pair_ratios"]))
        rows.append(row)
    return rows


def _case(name: str) -> str:
    """``stateful @ 10s`` as the README writes it: ``stateful @ 10 s``."""
    return re.sub(r"@ (\d+)s$", r"@ \1 s", name)


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
    continuous += ["batch ms p50/p95 ours", "ours/plain"] + (["overhead"] if rows_per_second else [])
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


def _restore_ratios(size: dict[str, Any]) -> list[float]:
    return [s["restore_ours_seconds"] / s["restore_plain_seconds"] for s in size["samples"]]


def _ratio_of_medians(size: dict[str, Any]) -> float:
    return size["restore_ours_seconds"] / size["restore_plain_seconds"]


def state_size(name: str) -> list[str]:
    data = load(name)
    sizes = ",".join(f"{size['size_mb_target']:g}" for size in data["sizes"])
    command = f"python -m benchmarks.state_size --sizes-mb {sizes}"
    command += f" --rounds {data['rounds']}" if data.get("rounds") else ""
    command += "".join(
        f" --{key} {data[key]}" for key in ("store", "root") if data.get(key, "hdfs") not in ("hdfs", "local")
    )
    # Results from before the option ran at Spark's default maintenance interval.
    if (interval := data.get("maintenance_interval", "60s")) != "2s":
        command += f" --maintenance-interval {interval}"
    rocksdb = data.get("store") == "rocksdb"
    header = ["state", "1 % changed", "ours written per checkpoint", "Spark itself wrote", "ours / Spark"]
    header += ["native new SST", "ours / SST"] if rocksdb else []
    header += ["written / state", "capture ms", "upload ms", "restore plain s", "restore ours s"]
    header += ["ours/plain (ratio of medians)", "per-restart ratios"]
    rows = []
    for size in data["sizes"]:
        row = [mb(size["state_bytes"]), num(size["changed_keys"]), kib(size["bytes_written"])]
        row += [kib(size["native_new_bytes"]), f"{size['written_to_native_ratio']:.2f}"]
        if rocksdb:
            row += [kib(size["native_new_sst_bytes"]), f"{size['written_to_native_sst_ratio']:.2f}"]
        row += [f"{size['written_to_state_ratio'] * 100:.2f} %", num(size["capture_ms"]), num(size["upload_ms"])]
        row += [f"{size['restore_plain_seconds']:.2f}", f"{size['restore_ours_seconds']:.2f}"]
        row += [f"**{_ratio_of_medians(size):.3f}**", ", ".join(f"{r:.2f}" for r in _restore_ratios(size))]
        rows.append(row)
    lines = table(header, rows, "r" * (len(header) - 1) + "l")
    if any("requests_median" in size for size in data["sizes"]):
        lines += ["", *table(*_s3_phase_table(data["sizes"]), "lrl")]
    return [*lines, "", source(name, data, command)]


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
    by_files: dict[int, list[dict[str, Any]]] = {}
    for run in data["runs"]:
        by_files.setdefault(run["files_per_checkpoint"], []).append(run)
    goal = data["goal_seconds"]
    rows = []
    for files, runs in sorted(by_files.items()):
        first = runs[0]
        total = ", ".join(f"{r['total_seconds']:.1f}" for r in runs) + " s"
        rows.append(
            [
                num(files),
                ", ".join(f"{r['plan_seconds']:.1f}" for r in runs) + " s",
                ", ".join(f"{r['delete_seconds']:.1f}" for r in runs) + " s",
                f"**{total}**" if any(r["total_seconds"] >= goal for r in runs) else total,
                num(first["list_calls_planning"]),
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
    """Each goal judged from the JSON: met only when every measured case meets it."""
    run, sizes = load("results.json"), load("state_size.json")["sizes"]
    rocksdb = load("state_size_rocksdb.json")["sizes"]
    request_cost_data = load("request_cost.json")
    cost = request_cost_data["running_job"]
    retention_data = load("retention_scale.json")
    rows = []

    cases = run["continuous"]
    over = {name: r["overhead_percent"] for name, r in cases.items()}
    rows.append(
        [
            f"throughput overhead at most {OVERHEAD_GOAL_PERCENT:g} % at 1 s and 10 s intervals (continuous)",
            _verdict(all(v <= OVERHEAD_GOAL_PERCENT for v in over.values())),
            "; ".join(f"{_case(name)}: {v:.1f} %" for name, v in over.items()),
        ]
    )
    by_size = {mb(s["state_bytes"]): s for s in sizes} | {f"RocksDB {mb(s['state_bytes'])}": s for s in rocksdb}
    # Judged over the job's whole life (the build and every restart) and over the restarts alone, the worse of
    # the two: either window ends where one side has written a snapshot of a partition (a quarter of the state)
    # that the other writes or stores a restart later. Older results have only the restarts, or one restart.
    judged = {
        k: max(s.get("written_to_native_life_ratio", 0), s.get("written_to_native_sequence_ratio", 0))
        or s["written_to_native_ratio_max"]
        for k, s in by_size.items()
    }
    rows.append(
        [
            f"bytes written within {BYTES_GOAL_RATIO:g}× of what Spark itself wrote for the same changes "
            "(over the job's life, and over the restarts alone)",
            _verdict(all(v <= BYTES_GOAL_RATIO for v in judged.values())),
            "; ".join(f"{k}: {_bytes_views(s)}" for k, s in by_size.items()),
        ]
    )
    added = {_case(name): r["ours_batch_ms_p95"] - r["plain_batch_ms_p95"] for name, r in cases.items()}
    capture = max(s["capture_ms"] for s in [*sizes, *rocksdb])
    rows.append(
        [
            f"under {BATCH_PATH_GOAL_MS} ms added to the batch path (batch p95, ours − plain, continuous)",
            _verdict(all(v < BATCH_PATH_GOAL_MS for v in added.values())),
            "; ".join(f"{name}: {v:+g} ms" for name, v in added.items())
            + f"; the capture (median up to {capture:g} ms, both stores) runs beside the batches",
        ]
    )
    restore = {mb(s["state_bytes"]): _ratio_of_medians(s) for s in sizes}
    restore |= {f"RocksDB {mb(s['state_bytes'])}": _ratio_of_medians(s) for s in rocksdb}
    rows.append(
        [
            f"restore at most {RESTORE_GOAL_RATIO:g}× Spark's native restart (ratio of medians, local disk)",
            _verdict(all(v <= RESTORE_GOAL_RATIO for v in restore.values())),
            "; ".join(f"{k}: {v:.3f}×" for k, v in restore.items()),
        ]
    )
    on_s3 = {mb(s["state_bytes"]): _ratio_of_medians(s) for s in load("state_size_s3.json")["sizes"]}
    rows.append(
        [
            "restore from S3 (loopback) against plain Spark's restart from local disk",
            "reported",
            "; ".join(f"{k}: {v:.2f}×" for k, v in on_s3.items()) + " (ours downloads the state first)",
        ]
    )
    idle, answered = cost["idle"]["per_day_with_job_task"], cost["answered_seconds"]
    rows.append(
        [
            f"an idle job at most {num(IDLE_GOAL_PER_DAY)} requests a day, requests answered within "
            f"{ANSWER_GOAL_SECONDS:g} s",
            _verdict(idle <= IDLE_GOAL_PER_DAY and all(v <= ANSWER_GOAL_SECONDS for v in answered.values())),
            f"{num(idle)} a day with its kill watch; answered after {answered['savepoint']:g} s (savepoint), "
            f"{answered['stop']:g} s (stop)",
        ]
    )
    poke = request_cost_data["storage"]["sensor poke, nothing new"]
    rows.append(
        [
            "a sensor poke with nothing new costs O(1) requests and never lists `shared/`",
            _verdict(poke["total"] <= 2),
            f"{poke['total']} request ({kinds(poke)}) beside 1,000 files of an old run in `shared/`",
        ]
    )
    aged = list(cost.get("checkpoint_by_age", {}).values())
    if aged:
        # Deletes left out on both sides: the older job subsumes a checkpoint each time, the young one (fewer
        # than its 100 retained) none; that is one constant request, not growth.
        young, old = (_without_deletes(a["per_checkpoint_by_kind"]) for a in (aged[0], aged[-1]))
        rows.append(
            [
                "a checkpoint's requests do not grow with the job's age or the checkpoints retained",
                _verdict(old <= young * AGE_GROWTH_ALLOWED),
                f"{young:g} requests (deletes aside) at chk-{aged[0]['first_id']} ({aged[0]['retained']} "
                f"retained), {old:g} at chk-{aged[-1]['first_id']} ({aged[-1]['retained']} retained)",
            ]
        )
    slowest = max(r["total_seconds"] for r in retention_data["runs"])
    rows.append(
        [
            f"retention of 10,000 checkpoints under {retention_data['goal_seconds']:g} s in every run",
            _verdict(all(r["total_seconds"] < retention_data["goal_seconds"] for r in retention_data["runs"])),
            f"slowest run {slowest:.1f} s; one list call per plan; on S3 one delete request per 1,000 keys",
        ]
    )
    return table(["goal", "verdict", "measured"], rows, "lll")


def _without_deletes(by_kind: dict[str, float]) -> float:
    return round(sum(v for kind, v in by_kind.items() if kind not in ("DELETE", "DELETE_BATCH", "total")), 1)


def _verdict(met: bool) -> str:
    return "**met**" if met else "**not met**"


GENERATED: dict[str, Callable[[], list[str]]] = {
    "goals": goals,
    "request-cost": request_cost,
    "overhead": lambda: overhead("results.json", True),
    "overhead-cluster": lambda: overhead("results_cluster.json", False),
    "state-size": lambda: state_size("state_size.json"),
    "state-size-rocksdb": lambda: state_size("state_size_rocksdb.json"),
    "state-size-s3": lambda: state_size("state_size_s3.json"),
    "retention": retention,
    "sensor-latency": sensor_latency,
    "page-latency": page_latency,
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
    parser.add_argument("--check", action="store_true", help="exit 1 if README.md is not what the JSON gives")
    parser.add_argument("--readme", default=str(README))
    args = parser.parse_args(argv)
    path = Path(args.readme)
    current = path.read_text()
    wanted = render(current)
    if args.check:
        if wanted != current:
            print(f"{path} differs from the benchmarks' JSON: run python -m benchmarks.report", file=sys.stderr)
            return 1
        print(f"{path}: {len(blocks(current))} generated tables match the JSON")
        return 0
    path.write_text(wanted)
    print(f"{path}: {len(blocks(wanted))} generated tables written")
    return 0


if __name__ == "__main__":
    sys.exit(main())
