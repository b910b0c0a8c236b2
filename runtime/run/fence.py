"""Every lease check of a run, in one place.

The lease (``JobLease``) decides who holds the job; the fence is how the run's writers ask it. Durable
writes and deletes (``_metadata``, a sink's publish, retention, a claimed savepoint) ``confirm``: one listing
of the lease folder each time. Cheap, frequent steps (staging a batch, uploading a file) ``check``: they list
only when the last confirmation is older than half the lease timeout. Once the lease is lost, every check
raises ``LeaseLost`` and the run stops without writing.
"""

from __future__ import annotations

from spark_checkpoint_runtime.errors import JobFailed, LeaseLost
from spark_checkpoint_runtime.layout import LeaseFiles
from spark_checkpoint_runtime.lease import JobLease


class RunFence:
    """The run's view of its lease: ``confirm`` before durable writes, ``check`` before cheap ones."""

    def __init__(self, lease: JobLease):
        self.lease = lease

    @property
    def lost(self) -> str | None:
        """Why the run lost the job, or None while it holds it."""
        return self.lease.lost

    def confirm(self, action: str) -> None:
        """Raise ``LeaseLost`` unless the run still holds the job (always looks)."""
        self.lease.confirm(action)

    def check(self, action: str) -> None:
        """Raise ``LeaseLost`` if the job was lost (looks only when the last confirmation is old)."""
        self.lease.check(action)

    def holds(self, action: str) -> bool:
        """``confirm`` for optional work: False instead of raising when another run holds the job."""
        try:
            self.confirm(action)
        except LeaseLost:
            return False
        return True

    def clock(self) -> float:
        return self.lease.clock()

    def observe(self, lease_names: list[str], action: str, listed_at: float) -> bool:
        """Confirm with a listing someone else took (the control poll lists the lease folder too).

        False once the job is lost (``lost`` then says why, and the query loop stops the run).
        """
        try:
            self.lease.observe(LeaseFiles.listing_of(lease_names), action, listed_at)
        except LeaseLost:
            return False
        return True

    def fail_if_lost(self) -> None:
        """End the run with ``JobFailed`` once the job is lost."""
        if self.lease.lost:
            raise JobFailed(self.lease.lost)
