"""The job's options: command line, spec file (JSON or YAML), validation.

Command-line options override the spec file. Option names follow Flink's checkpoint options where the
concept is Flink's. Everything here is checked before anything is read from or written to storage.
"""

from __future__ import annotations

import argparse
import json
import os
from dataclasses import dataclass, field, fields
from typing import Any

from spark_checkpoint_runtime.durations import parse_duration
from spark_checkpoint_runtime.layout import CheckpointFormatError, validate_job_name, validate_key
from spark_checkpoint_runtime.thread_priority import BACKGROUND_NICENESS, MAX_NICENESS

TRIGGERS = ("available-now", "continuous")
OUTPUT_MODES = ("append", "update", "complete")
CHECKPOINTING_MODES = ("exactly-once", "at-least-once")
EXTERNALIZED_RETENTION = ("retain-on-cancellation", "delete-on-cancellation", "no-externalized")
CLAIM_MODES = ("no-claim", "claim")
# A fresh start into a sink that already holds published output: refuse, set it aside, or keep it.
EXISTING_OUTPUT = ("fail", "move-aside", "keep")
FILE_MERGING_MODES = ("auto", "on", "off")  # file_merging.py: pack small files into segments
MAX_SPEC_BYTES = 1024 * 1024
MAX_SPEC_DEPTH = 8


class OptionsError(ValueError):
    """An option or spec value that cannot be used; the message says which and what would work."""


class CommandParser(argparse.ArgumentParser):
    """The parser of every command line of the runtime: a bad option is ``OptionsError``, one clear line."""

    def error(self, message: str) -> None:  # one clear line, not a usage dump
        raise OptionsError(f"{message} (see --help)")


@dataclass
class JobOptions:
    """Everything a run needs, validated. Durations are in seconds."""

    job_name: str
    checkpoint_root: str
    pipeline: str
    sink: str = "console"
    output_mode: str = "append"
    trigger: str = "available-now"
    batch_interval: float = 0.0
    max_duration: float | None = None
    checkpoint_interval: float = 10.0
    checkpointing_mode: str = "exactly-once"
    checkpoint_timeout: float = 600.0
    min_pause: float = 0.0
    tolerable_failed_checkpoints: int = 0
    num_retained: int = 3
    externalized_retention: str = "retain-on-cancellation"
    restore_from: str = "latest"
    working_dir: str | None = None
    run_key: str | None = None
    claim_mode: str = "no-claim"
    existing_output: str = "fail"
    stop_timeout: float = 60.0
    savepoint_targets: str = ""
    control_retention: float = 7 * 86400.0
    set_aside_retention: float = 7 * 86400.0
    allow_non_restored_state: bool = False
    lease_timeout: float = 30.0
    file_merging: str = "auto"
    segment_size_mb: int = 64
    checkpoint_niceness: int = BACKGROUND_NICENESS
    conf: dict[str, str] = field(default_factory=dict)
    storage_options: dict[str, Any] = field(default_factory=dict)


RUNTIME_DURATIONS = {
    "batch_interval",
    "max_duration",
    "checkpoint_interval",
    "checkpoint_timeout",
    "min_pause",
    "lease_timeout",
    "stop_timeout",
    "control_retention",
    "set_aside_retention",
}
_CHOICES = {
    "trigger": TRIGGERS,
    "output_mode": OUTPUT_MODES,
    "checkpointing_mode": CHECKPOINTING_MODES,
    "externalized_retention": EXTERNALIZED_RETENTION,
    "claim_mode": CLAIM_MODES,
    "existing_output": EXISTING_OUTPUT,
    "file_merging": FILE_MERGING_MODES,
}
_KEYS = {f.name for f in fields(JobOptions)}


def build_parser() -> argparse.ArgumentParser:
    parser = CommandParser(
        prog="python -m spark_checkpoint_runtime",
        description="Run a Spark Structured Streaming pipeline with Flink-style numbered checkpoints.",
        allow_abbrev=False,
    )
    add = parser.add_argument
    add("--spec", help="JSON or YAML file with the same keys as these options (the options override it)")
    add("--job-name", help="stable job folder name under the root: letters, digits, '.', '_', '-'")
    add("--checkpoint-root", help="where checkpoints live: a path, file:// URL or any fsspec URL")
    add("--pipeline", help="module:function; function(spark) returns an unstarted streaming DataFrame")
    add("--sink", help="parquet:PATH (two-phase), console, or module:Class with write/commit/abort")
    add("--output-mode", help="append (default), update or complete")
    add("--trigger", help="available-now (default): drain, checkpoint, exit; or continuous")
    add("--batch-interval", help="continuous: time between batch starts (default 0: as fast as possible)")
    add("--max-duration", help="continuous: stop gracefully after this long")
    add("--checkpoint-interval", help="time between checkpoints (default 10s)")
    add("--checkpointing-mode", help="exactly-once (default) or at-least-once")
    add("--checkpoint-timeout", help="a checkpoint not complete after this long is aborted (default 10min)")
    add("--min-pause", help="minimum time between the end of one checkpoint and the start of the next (0)")
    add("--tolerable-failed-checkpoints", help="consecutive failed checkpoints tolerated before failing (0)")
    add("--num-retained", help="completed checkpoints to keep (default 3)")
    add("--externalized-retention", help="retain-on-cancellation (default), delete-on-cancellation, no-externalized")
    add("--restore-from", help="latest (default), none, or the path of a chk-<N> folder")
    add("--working-dir", help="where Spark's working checkpoint folder lives (default: local temp dir)")
    add(
        "--claim-mode",
        help="restoring a savepoint: no-claim (default) never touches it; claim deletes it "
        "once the first checkpoint after the restore completes",
    )
    add(
        "--existing-output",
        help="a fresh start into a sink that already holds published output: fail (default), move-aside "
        "(set it aside under _rolled_back/), or keep (the new run continues after it)",
    )
    add(
        "--allow-non-restored-state",
        action="store_const",
        const=True,
        default=None,
        help="restore even if the new pipeline drops trailing stateful operators (their state is left out)",
    )
    add(
        "--lease-timeout",
        help="a run holding the job that is silent this long (killed, paused) is taken over (default 30s)",
    )
    add(
        "--stop-timeout",
        help="a stop (SIGTERM, SIGINT, stop request) not finished this long after it was asked ends the run "
        "with exit 1, publishing nothing past the last checkpoint (default 60s)",
    )
    add(
        "--savepoint-targets",
        help="comma-separated folders or URLs a savepoint request's target_directory may lie under (besides the "
        "job's own checkpoint root); a request for anywhere else is answered 'rejected'",
    )
    add(
        "--control-retention",
        help="answered requests, answers and run reports in _control/ older than this are deleted (default 7d)",
    )
    add(
        "--set-aside-retention",
        help="output the sink set aside (aborted staged batches, output outside a restored history) older than "
        "this is deleted at the start of a run (default 7d); a rewind to a history abandoned longer ago than "
        "this cannot bring that history's output back",
    )
    add(
        "--file-merging",
        help="pack a checkpoint's small new files into a few segment objects: auto (default: on object stores), "
        "on or off",
    )
    add("--segment-size-mb", help="file merging: the largest segment object, in MiB (default 64)")
    add(
        "--checkpoint-niceness",
        help="nice steps the checkpoint threads run below the job's on Linux, 0 to 19 (default 10; 0: the same)",
    )
    add("--run-key", help="caller-chosen key: the run's result goes to _control/runs/KEY.json; stop requests name it")
    add("--conf", action="append", metavar="KEY=VALUE", help="Spark conf for the session (repeatable)")
    return parser


def parse_options(argv: list[str]) -> JobOptions:
    """Parse and validate command-line arguments (plus ``--spec``) into ``JobOptions``."""
    args = build_parser().parse_args(argv)
    values: dict[str, Any] = {}
    if args.spec:
        values.update(load_spec(args.spec))
    cli = {k: v for k, v in vars(args).items() if k != "spec" and v is not None}
    if "conf" in cli:
        conf = dict(values.get("conf") or {})
        for item in cli.pop("conf"):
            key, sep, value = item.partition("=")
            if not sep or not key.strip():
                raise OptionsError(f"--conf {item!r} is not KEY=VALUE")
            conf[key.strip()] = value
        values["conf"] = conf
    values.update(cli)
    return options_from_mapping(values)


def load_spec(path: str) -> dict[str, Any]:
    """Read a JSON or YAML spec file, refusing huge or deeply nested ones."""
    try:
        size = os.path.getsize(path)
    except OSError as exc:
        raise OptionsError(f"--spec {path!r} cannot be read: {exc.strerror}") from None
    if size > MAX_SPEC_BYTES:
        raise OptionsError(f"--spec {path!r} is {size} bytes; a spec is at most {MAX_SPEC_BYTES} bytes")
    with open(path, encoding="utf-8") as handle:
        text = handle.read()
    try:
        if path.endswith((".yaml", ".yml")):
            import yaml

            data = yaml.safe_load(text)
        else:
            data = json.loads(text)
    except Exception as exc:  # noqa: BLE001 - any parser error is the same problem for the user
        raise OptionsError(
            f"--spec {path!r} is not valid {'YAML' if path.endswith(('.yaml', '.yml')) else 'JSON'}: {exc}"
        ) from None
    if not isinstance(data, dict):
        raise OptionsError(f"--spec {path!r} must hold a mapping of option names to values")
    if _depth(data) > MAX_SPEC_DEPTH:
        raise OptionsError(f"--spec {path!r} is nested deeper than {MAX_SPEC_DEPTH} levels")
    return {str(k).replace("-", "_"): v for k, v in data.items()}


def options_from_mapping(values: dict[str, Any]) -> JobOptions:
    """Validate a mapping of option names (snake_case or dashed) into ``JobOptions``."""
    values = {str(k).replace("-", "_"): v for k, v in values.items()}
    unknown = sorted(set(values) - _KEYS)
    if unknown:
        raise OptionsError(f"unknown option(s) {', '.join(unknown)}; known: {', '.join(sorted(_KEYS))}")
    for required in ("job_name", "checkpoint_root", "pipeline"):
        if not values.get(required):
            raise OptionsError(f"--{required.replace('_', '-')} is required")
    try:
        validate_job_name(str(values["job_name"]))
    except CheckpointFormatError as exc:
        raise OptionsError(str(exc)) from None
    if values.get("run_key") is not None:
        try:
            validate_key(str(values["run_key"]), "--run-key")
        except CheckpointFormatError as exc:
            raise OptionsError(str(exc)) from None
    for key, choices in _CHOICES.items():
        if key in values and values[key] not in choices:
            raise OptionsError(f"--{key.replace('_', '-')} {values[key]!r} is not one of {', '.join(choices)}")
    for key in RUNTIME_DURATIONS & set(values):
        try:
            values[key] = parse_duration(values[key], name=f"--{key.replace('_', '-')}")
        except ValueError as exc:
            raise OptionsError(str(exc)) from None
    for key, minimum, maximum in (
        ("tolerable_failed_checkpoints", 0, None),
        ("num_retained", 1, None),
        ("segment_size_mb", 1, None),
        ("checkpoint_niceness", 0, MAX_NICENESS),  # Linux's limit
    ):
        if key in values:
            values[key] = _integer(values[key], key, minimum, maximum)
    for key in ("conf", "storage_options"):
        if key in values and not isinstance(values[key], dict):
            raise OptionsError(f"{key} must be a mapping")
    if "conf" in values:
        values["conf"] = {str(k): str(v) for k, v in values["conf"].items()}
    if "allow_non_restored_state" in values:
        flag = values["allow_non_restored_state"]
        if isinstance(flag, str) and flag.lower() in ("true", "false"):
            flag = flag.lower() == "true"
        if not isinstance(flag, bool):
            raise OptionsError(f"--allow-non-restored-state {flag!r} must be true or false")
        values["allow_non_restored_state"] = flag
    options = JobOptions(**values)
    _check_references(options)
    if options.checkpoint_timeout <= 0:
        raise OptionsError("--checkpoint-timeout must be greater than 0")
    # A bare number is milliseconds (Flink's rule): "--stop-timeout 60" would be 60 ms and never stop gracefully.
    if options.lease_timeout < 1:
        raise OptionsError(
            "--lease-timeout must be at least 1s: runs renew the lease several times within it (a bare number is "
            "milliseconds: write 30s)"
        )
    if options.stop_timeout < 1:
        raise OptionsError(
            "--stop-timeout must be at least 1s: a graceful stop finishes the batch in flight and a checkpoint (a "
            "bare number is milliseconds: write 60s)"
        )
    if options.checkpoint_interval <= 0:
        raise OptionsError("--checkpoint-interval must be greater than 0 (e.g. 10s)")
    return options


def _check_references(options: JobOptions) -> None:
    if ":" not in options.pipeline or options.pipeline.startswith(":") or options.pipeline.endswith(":"):
        raise OptionsError(f"--pipeline {options.pipeline!r} must be module:function")
    sink = options.sink
    if sink.startswith("parquet:"):
        if not sink[len("parquet:") :].strip():
            raise OptionsError("--sink parquet:PATH needs a path")
    elif sink != "console" and (":" not in sink or sink.endswith(":")):
        raise OptionsError(f"--sink {sink!r} must be parquet:PATH, console or module:Class")
    if options.restore_from.strip() == "":
        raise OptionsError("--restore-from is empty; use latest, none or a chk-<N> path")


def _integer(value: Any, key: str, minimum: int, maximum: int | None = None) -> int:
    try:
        number = int(str(value), 10)
    except ValueError:
        raise OptionsError(f"--{key.replace('_', '-')} {value!r} is not a whole number") from None
    if number < minimum:
        raise OptionsError(f"--{key.replace('_', '-')} {value!r} must be at least {minimum}")
    if maximum is not None and number > maximum:
        raise OptionsError(f"--{key.replace('_', '-')} {value!r} is above {maximum}, the most it may be")
    return number


def _depth(value: Any, level: int = 1) -> int:
    if level > MAX_SPEC_DEPTH + 1:
        return level
    if isinstance(value, dict):
        return max((_depth(v, level + 1) for v in value.values()), default=level)
    if isinstance(value, list):
        return max((_depth(v, level + 1) for v in value), default=level)
    return level


SECRET_KEY_WORDS = ("secret", "password", "token", "credential", ".key")


def names_a_secret(key: str) -> bool:
    """Does a conf key name a secret (``spark.hadoop.fs.s3a.secret.key``, ``...password``, ``...token``)?"""
    lowered = key.lower()
    return any(word in lowered for word in SECRET_KEY_WORDS)


def redacted(options: JobOptions) -> dict[str, Any]:
    """Options as a dict fit for logs and reports: storage options (credentials) are left out, and the value
    of every Spark conf whose key names a secret is masked."""
    data = {f.name: getattr(options, f.name) for f in fields(options)}
    data["storage_options"] = sorted(options.storage_options)
    data["conf"] = {k: "*****" if names_a_secret(k) else v for k, v in options.conf.items()}
    return data
