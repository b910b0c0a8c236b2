"""Command line: ``python -m spark_checkpoint_runtime [options]`` and ``spark-submit runtime/job.py [options]``.

``python -m spark_checkpoint_runtime savepoint|list|inspect ...`` are storage-only commands (see
``spark_checkpoint_runtime.admin``); ``python -m spark_checkpoint_runtime state ...`` reads a snapshot's state
rows with Spark (see ``spark_checkpoint_runtime.state_inspection``); ``python -m spark_checkpoint_runtime
rescale ...`` writes a savepoint whose state has another partition count (see ``spark_checkpoint_runtime.rescale``);
``python -m spark_checkpoint_runtime transform ...`` writes a savepoint whose state rows a Python function changed
(see ``spark_checkpoint_runtime.state_transform``).

Exit status 0 on a clean finish; otherwise non-zero with a one-line reason on stderr:
1 the job failed while running, 2 bad input (options, spec, pipeline, sink), 3 cannot restore,
4 another live run holds the job (see ``spark_checkpoint_runtime.lease``).
The last line on stdout of a clean run is ``result: {json}`` for tools that drive the job.
"""

from __future__ import annotations

import json
import logging
import sys

from spark_checkpoint_runtime import faults
from spark_checkpoint_runtime.admin import COMMANDS
from spark_checkpoint_runtime.admin import main as admin_main
from spark_checkpoint_runtime.errors import (
    EXIT_BAD_INPUT,
    EXIT_CANNOT_RESTORE,
    EXIT_JOB_FAILED,
    EXIT_JOB_HELD,
    EXIT_OK,
    ExistingOutput,
    JobFailed,
    JobHeld,
    PipelineError,
)
from spark_checkpoint_runtime.fingerprint import IncompatibleRestore
from spark_checkpoint_runtime.layout import CheckpointFormatError, NoValidCheckpoint
from spark_checkpoint_runtime.options import OptionsError, parse_options, redacted
from spark_checkpoint_runtime.rescale import COMMAND as RESCALE_COMMAND
from spark_checkpoint_runtime.sinks import SinkError
from spark_checkpoint_runtime.spark_versions import UnsupportedSparkFeature
from spark_checkpoint_runtime.state_files import UnsupportedStateStore
from spark_checkpoint_runtime.state_inspection import COMMAND as STATE_COMMAND
from spark_checkpoint_runtime.state_transform import COMMAND as TRANSFORM_COMMAND

log = logging.getLogger("runtime")


def configure_logging() -> None:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("py4j").setLevel(logging.WARNING)


def main(argv: list[str] | None = None, spark=None) -> int:
    """Run a job from command-line arguments; returns the exit status."""
    configure_logging()
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in COMMANDS:
        return admin_main(argv)
    if argv and argv[0] == STATE_COMMAND:
        from spark_checkpoint_runtime.state_inspection import main as state_main

        return state_main(argv[1:], spark)
    if argv and argv[0] == RESCALE_COMMAND:
        from spark_checkpoint_runtime.rescale import main as rescale_main

        return rescale_main(argv[1:], spark)
    if argv and argv[0] == TRANSFORM_COMMAND:
        from spark_checkpoint_runtime.state_transform import main as transform_main

        return transform_main(argv[1:], spark)
    try:
        options = parse_options(argv)
        faults.configure()
    except (OptionsError, faults.FaultSpecError) as exc:
        return _fail(EXIT_BAD_INPUT, str(exc))
    log.info("options: %s", json.dumps(redacted(options), sort_keys=True))
    from spark_checkpoint_runtime.run import StreamingJob  # imports pyspark: only once options are valid

    job = StreamingJob(options, spark)
    code = _outcome(job, options)
    if code != EXIT_OK:
        job.record_exit_code(code)
    job.graceful.finished(code)  # a JVM shutdown hook waiting for the stop ends the process with this status
    return code


def _outcome(job, options) -> int:
    """Run the job; the exit status, with a one-line reason on stderr when it is not 0."""
    try:
        result = job.run()
    except (NoValidCheckpoint, IncompatibleRestore, ExistingOutput) as exc:
        return _fail(EXIT_CANNOT_RESTORE, str(exc))
    except JobHeld as exc:
        return _fail(EXIT_JOB_HELD, str(exc))
    except (CheckpointFormatError, PipelineError, SinkError, UnsupportedStateStore, UnsupportedSparkFeature) as exc:
        return _fail(EXIT_BAD_INPUT, str(exc))
    except JobFailed as exc:
        return _fail(EXIT_JOB_FAILED, f"job {options.job_name!r} failed: {exc}")
    except Exception as exc:  # anything unforeseen still ends with one line a person can act on
        log.exception("job %r failed unexpectedly", options.job_name)
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        return _fail(EXIT_JOB_FAILED, f"job {options.job_name!r} failed: {type(exc).__name__}: {first}")
    print("result: " + json.dumps(result, sort_keys=True), flush=True)
    return EXIT_OK


def _fail(code: int, message: str) -> int:
    print(f"error: {message}", file=sys.stderr, flush=True)
    return code
