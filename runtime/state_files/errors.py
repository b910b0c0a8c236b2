"""Why a capture of Spark's working folder could not select a consistent set of files."""

from __future__ import annotations


class CaptureError(RuntimeError):
    """The working folder does not hold a consistent set of files for the batch."""


class CaptureRaced(CaptureError):
    """Spark's own maintenance changed the files while they were selected (a file vanished or was replaced).

    Not a damaged job: the checkpoint is declined and taken again at a later batch.
    """


class UnsupportedStateStore(CaptureError):
    """The job uses a state store whose files this runtime cannot snapshot correctly."""
