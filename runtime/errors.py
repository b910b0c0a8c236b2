"""Failures the command line turns into exit codes with a one-line reason."""

from __future__ import annotations

EXIT_OK = 0
EXIT_JOB_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_CANNOT_RESTORE = 3
EXIT_JOB_HELD = 4


class JobFailed(RuntimeError):
    """The job ran but could not finish cleanly (query error, checkpoints failing past tolerance)."""


class PipelineError(ValueError):
    """``--pipeline`` cannot be loaded or does not return a streaming DataFrame."""


class JobHeld(RuntimeError):
    """Another live run holds the job's lease: this run must not write (exit 4)."""


class LeaseLost(JobFailed):
    """This run's lease was taken over (it was silent past the timeout); it must stop without writing."""


class ExistingOutput(RuntimeError):
    """A fresh start into a sink that already holds published output, without saying what to do with it (exit 3)."""
