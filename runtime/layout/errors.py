"""What goes wrong reading the format: bad input, a damaged snapshot, no valid checkpoint at all."""

from __future__ import annotations


class CheckpointFormatError(ValueError):
    """Input that does not fit the checkpoint format: a bad job name, path or ``_metadata``."""


class DamagedCheckpoint(CheckpointFormatError):
    """A checkpoint folder exists but cannot be restored from; ``reason`` says why."""

    def __init__(self, location: str, reason: str):
        super().__init__(f"{location}: {reason}")
        self.location = location
        self.reason = reason

    def __reduce__(self):  # pickled across processes (the checkpoint pages' reader): rebuild from both parts
        return (type(self), (self.location, self.reason))


class UnsupportedFormatVersion(DamagedCheckpoint):
    """``_metadata`` of a format version this runtime does not read (a newer runtime wrote it).

    Not restorable here, yet not garbage either: retention deletes no shared file while one is in the job
    folder, since what it references cannot be known.
    """


class NoValidCheckpoint(CheckpointFormatError):
    """Checkpoints exist for a job but none of them is valid."""
