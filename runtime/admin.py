"""Commands that talk to a job through storage, without Spark: ``savepoint``, ``list`` and ``inspect``.

    python -m spark_checkpoint_runtime savepoint --job-name J --checkpoint-root R [--stop] [--target-directory D]
                                [--timeout 5min] [--trigger-id ID]
    python -m spark_checkpoint_runtime list      --job-name J --checkpoint-root R [--json]
    python -m spark_checkpoint_runtime inspect   --job-name J --checkpoint-root R [--checkpoint-id N | --savepoint NAME]

``savepoint`` asks the running job (through ``_control/``) and prints the savepoint's path as its last
line; asking again with the same ``--trigger-id`` returns the same savepoint. ``list`` and ``inspect``
show checkpoint statistics in the spirit of Flink's REST API: counts, latest, history with sizes and
durations.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import uuid
from datetime import datetime, timezone
from typing import Any

from spark_checkpoint_runtime.durations import format_bytes, format_duration, parse_duration
from spark_checkpoint_runtime.errors import EXIT_BAD_INPUT, EXIT_JOB_FAILED, EXIT_OK
from spark_checkpoint_runtime.layout import (
    TERMINAL_STATUSES,
    CheckpointFormatError,
    ControlChannel,
    DamagedCheckpoint,
    JobFolder,
)
from spark_checkpoint_runtime.options import CommandParser, OptionsError, load_spec
from spark_checkpoint_runtime.state_files.operators import describe_operators

COMMANDS = ("savepoint", "list", "inspect")


def _parser(command: str) -> argparse.ArgumentParser:
    parser = CommandParser(prog=f"python -m spark_checkpoint_runtime {command}", allow_abbrev=False)
    parser.add_argument("--job-name", required=True)
    parser.add_argument("--checkpoint-root", required=True)
    parser.add_argument("--spec", help="JSON/YAML file whose storage_options (credentials) are used")
    if command == "savepoint":
        parser.add_argument("--stop", action="store_true", help="stop the job after the savepoint (exit 0)")
        parser.add_argument("--target-directory", help="where the savepoint goes (default <root>/<job>/savepoints)")
        parser.add_argument("--timeout", default="5min", help="how long to wait for the savepoint (default 5min)")
        parser.add_argument("--trigger-id", help="caller-chosen id; repeating it returns the same savepoint")
    elif command == "list":
        parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    else:
        group = parser.add_mutually_exclusive_group()
        group.add_argument("--checkpoint-id", type=int, help="print one checkpoint's _metadata")
        group.add_argument("--savepoint", help="print one savepoint's _metadata (folder name under savepoints/)")
    return parser


def main(argv: list[str]) -> int:
    command, rest = argv[0], argv[1:]
    try:
        args = _parser(command).parse_args(rest)
        options = (load_spec(args.spec).get("storage_options") or {}) if args.spec else {}
        storage = JobFolder(args.checkpoint_root, args.job_name, options)
        if command == "savepoint":
            return savepoint(storage, args)
        if command == "list":
            return list_snapshots(storage, as_json=args.json)
        return inspect(storage, args.checkpoint_id, args.savepoint)
    except (OptionsError, CheckpointFormatError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT


def savepoint(storage: JobFolder, args: argparse.Namespace) -> int:
    control = ControlChannel(storage)
    trigger_id = args.trigger_id or f"sp-{datetime.now(timezone.utc):%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:6]}"
    timeout = parse_duration(args.timeout, name="--timeout")
    try:
        answer = control.request_savepoint(trigger_id, stop=args.stop, target_directory=args.target_directory)
    except LookupError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_JOB_FAILED
    print(f"savepoint requested: trigger id {trigger_id}", file=sys.stderr, flush=True)
    deadline = time.monotonic() + timeout
    while (answer or {}).get("status") not in TERMINAL_STATUSES:
        if time.monotonic() > deadline:
            print(
                f"error: savepoint {trigger_id} did not complete within {format_duration(timeout)}; the request "
                f"stays: run again with --trigger-id {trigger_id} to keep waiting",
                file=sys.stderr,
            )
            return EXIT_JOB_FAILED
        time.sleep(0.5)
        answer = control.response(trigger_id)
    if answer["status"] != "completed":
        print(f"error: savepoint {trigger_id} {answer['status']}: {answer.get('reason')}", file=sys.stderr)
        return EXIT_JOB_FAILED
    print(answer["savepoint_path"], flush=True)
    return EXIT_OK


def _snapshots(storage: JobFolder) -> tuple[list[dict[str, Any]], int]:
    rows, incomplete = [], 0
    for checkpoint_id in storage.checkpoints.ids():
        try:
            meta = storage.checkpoints.read(checkpoint_id)
        except DamagedCheckpoint:
            incomplete += 1
            continue
        rows.append({**meta.summary(), "path": storage.url_of(storage.checkpoints.path(checkpoint_id))})
    for name in storage.savepoints.names():
        try:
            meta = storage.savepoints.read(name)
        except (DamagedCheckpoint, ValueError):
            continue
        rows.append({**meta.summary(), "path": storage.url_of(storage.savepoints.path(name))})
    rows.sort(key=lambda r: r["checkpoint_id"])
    return rows, incomplete


def list_snapshots(storage: JobFolder, *, as_json: bool) -> int:
    rows, incomplete = _snapshots(storage)
    if as_json:
        print(json.dumps(rows, indent=1))
        return EXIT_OK
    checkpoints = sum(1 for r in rows if r["kind"] == "checkpoint")
    print(
        f"{storage.location}: {checkpoints} checkpoint(s), {len(rows) - checkpoints} savepoint(s), "
        f"{incomplete} incomplete folder(s)"
    )
    print(
        f"{'kind':<10} {'id':>5} {'batch':>6} {'completed (UTC)':<20} {'duration':>9} {'state':>10} "
        f"{'written':>10} {'files':>6}  path"
    )
    for r in rows:
        completed = datetime.fromtimestamp(r["completion_timestamp_ms"] / 1000, timezone.utc).strftime(
            "%Y-%m-%d %H:%M:%S"
        )
        duration = format_duration((r["duration_ms"] or 0) / 1000)
        print(
            f"{r['kind']:<10} {r['checkpoint_id']:>5} {r['batch_id']:>6} {completed:<20} {duration:>9} "
            f"{format_bytes(r['state_bytes']):>10} {format_bytes(r['bytes_written']):>10} {r['file_count']:>6}  "
            f"{r['path']}"
        )
    return EXIT_OK


def inspect(storage: JobFolder, checkpoint_id: int | None, savepoint_name: str | None) -> int:
    if checkpoint_id is not None or savepoint_name is not None:
        meta = (
            storage.checkpoints.read(checkpoint_id)
            if checkpoint_id is not None
            else storage.savepoints.read(savepoint_name)
        )
        print(json.dumps({**json.loads(meta.to_json()), "state_operators": _operators(meta)}, indent=1))
        return EXIT_OK
    print(json.dumps(inspect_job(storage), indent=1))
    return EXIT_OK


def _operators(meta: Any) -> list[dict[str, Any]]:
    return describe_operators(meta.files, meta.fingerprint or {})


def inspect_job(storage: JobFolder) -> dict[str, Any]:
    """Counts, latest checkpoint and savepoint (with its stateful operators), duration summary, history."""
    rows, incomplete = _snapshots(storage)
    checkpoints = [r for r in rows if r["kind"] == "checkpoint"]
    durations = [r["duration_ms"] for r in checkpoints if r["duration_ms"] is not None]
    stats = {
        "job_name": storage.job_name,
        "counts": {
            "checkpoints": len(checkpoints),
            "savepoints": len(rows) - len(checkpoints),
            "incomplete_folders": incomplete,
        },
        "latest": {
            "checkpoint": checkpoints[-1] if checkpoints else None,
            "operators": _operators(storage.checkpoints.read(checkpoints[-1]["checkpoint_id"])) if checkpoints else [],
            "savepoint": next((r for r in reversed(rows) if r["kind"] == "savepoint"), None),
        },
        "summary": {
            "duration_ms": {
                "min": min(durations, default=None),
                "max": max(durations, default=None),
                "avg": round(sum(durations) / len(durations)) if durations else None,
            },
            "state_bytes_latest": checkpoints[-1]["state_bytes"] if checkpoints else 0,
        },
        "live_runs": ControlChannel(storage).live_runs(),
        "history": rows,
    }
    return stats
