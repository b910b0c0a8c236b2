"""The job lease: at most one run writes a job's checkpoints and publishes its output.

Two runs of one job can overlap: an Airflow retry starts while the previous try still runs on a lost
worker, or a paused VM wakes up. Both would restore, checkpoint, publish and delete in the same job folder.
Spark guards its own checkpoint folder the same way we guard ours: its offset log creates each batch file
only if it does not exist, so the second query fails with ``concurrentStreamLogUpdate``. Our runs each have a
private working folder, so that guard never fires for them; these rules take its place:

- **Acquire before writing.** A run claims the job by creating ``_control/lease/<epoch>.json`` for the next
  epoch exclusively (``create_exclusively``: a hard link on local disks, ``If-None-Match`` on S3). Of two
  runs racing for one epoch, exactly one wins.
- **Held while heard from.** The holder renews its heartbeat (``_control/alive/<run>.json``) three times
  per ``--lease-timeout`` (every 10 s at the default 30 s: one PUT on object storage). A new run watches
  the holder for one renewal: if it renews, it is alive and the new run fails at once (exit 4) naming it;
  if not, the new run waits until the holder has been silent for the whole timeout (killed, paused,
  partitioned) and takes the job over with the next epoch.
- **Judged by the store alone.** Silence is the store's clock now (the modification time of a file the
  checking run writes and removes) minus the newest modification time of the holder's grant and heartbeat.
  No host's clock is compared with another's, and no pid is looked up: hosts and containers share neither.
- **Fenced writes.** Before each ``_metadata``, sink publish and retention delete, the holder confirms that
  no newer epoch exists; a run that was taken over stops without writing. Cheaper checks (a batch staging
  its output, a renewal) re-confirm whenever the last confirmation is older than half the timeout, which
  covers a process frozen for longer than the timeout: its clock shows the gap when it wakes. A running
  job's poll of ``_control/`` lists the lease folder along with the requests, and counts as a confirmation.
- **Exclusive ``_metadata``.** Like Spark's offset log, ``_metadata`` is never overwritten, so two writers
  cannot both complete one checkpoint id.

"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from spark_checkpoint_runtime.errors import JobHeld, LeaseLost
from spark_checkpoint_runtime.layout import (
    HEARTBEAT_SECONDS,
    ControlChannel,
    JobFolder,
    LeaseFiles,
    LeaseListing,
    now_ms,
)

log = logging.getLogger(__name__)

KEEP_EPOCHS = 10  # grants kept as history; only the newest decides anything


class Fence(Protocol):
    """What writers ask before writing: ``confirm`` (always looks) and ``check`` (looks when due)."""

    def confirm(self, action: str) -> None: ...

    def check(self, action: str) -> None: ...


class _Unfenced:
    """For parts used without a run (tests of one part, tools): every write is allowed."""

    def confirm(self, action: str) -> None:
        return None

    def check(self, action: str) -> None:
        return None


UNFENCED: Fence = _Unfenced()


class JobLease:
    """One run's claim on its job. ``acquire`` before writing; ``confirm``/``check`` before each write."""

    def __init__(
        self,
        storage: JobFolder,
        run_id: str,
        run_key: str | None,
        timeout: float,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.storage = storage
        self.files = LeaseFiles(storage)
        self.control = ControlChannel(storage)
        self.run_id = run_id
        self.run_key = run_key
        self.timeout = timeout
        self.clock = clock
        self.epoch: int | None = None
        self.lost: str | None = None
        self._confirmed_at = 0.0
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None

    @property
    def renew_interval(self) -> float:
        return min(HEARTBEAT_SECONDS, self.timeout / 3)

    # --- before the run writes -----------------------------------------------------------------------
    def ensure_free(self) -> None:
        """Return once no other run holds the job; ``JobHeld`` at once if the holder is alive.

        The holder is watched for one renewal. Renewing means alive: fail (within about one renewal). Silent
        means killed or frozen: wait until the silence passes ``--lease-timeout`` (then ``acquire`` takes the
        job over) or the holder is heard from again (then fail). Writes nothing but this run's clock file.
        """
        first_heard: float | None = None
        announced = False
        while True:
            holder = self._live_holder(self.files.listing(), announce=False)
            if holder is None:
                return
            if first_heard is None:
                first_heard = holder["heard"]
            elif holder["heard"] > first_heard:
                raise JobHeld(self._held_message(holder))
            if not announced and holder["silent_s"] > self.renew_interval:
                announced = True
                log.info(
                    "run %s (lease epoch %d) has been silent for %.0fs; waiting until --lease-timeout %gs to take "
                    "the job over, unless it is heard from again",
                    holder.get("run_id", "?"),
                    holder["epoch"],
                    holder["silent_s"],
                    self.timeout,
                )
            # Look again after one renewal, or as soon as the silence will have passed the timeout.
            time.sleep(min(self.renew_interval, max(0.2, self.timeout - holder["silent_s"] + 0.2)))

    def acquire(self) -> int:
        """Claim the job for this run: the next epoch, unless a live run holds it (``JobHeld``)."""
        listing = self.files.listing()
        holder = self._live_holder(listing)
        if holder is not None:
            raise JobHeld(self._held_message(holder))
        epoch = listing.latest + 1
        grant = {
            "epoch": epoch,
            "run_id": self.run_id,
            "run_key": self.run_key,
            "acquired_ms": now_ms(),
            "host": socket.gethostname(),
            "pid": os.getpid(),
        }
        if not self.files.create(epoch, grant):
            winner = self.files.read(epoch) or {}
            raise JobHeld(
                f"job {self.storage.job_name!r} was claimed at the same moment by run {winner.get('run_id', '?')} "
                f"(lease epoch {epoch}); this run writes nothing. Retry once that run has finished."
            )
        self.epoch = epoch
        self._confirmed_at = self.clock()
        self.control.heartbeat(self.run_id, self.run_key)
        log.info("run %s holds job %r (lease epoch %d)", self.run_id, self.storage.job_name, epoch)
        self.files.prune(epoch - KEEP_EPOCHS, listing)  # the epochs below ours are all in that listing
        self._renewer = threading.Thread(target=self._renew, name="job-lease", daemon=True)
        self._renewer.start()
        return epoch

    # --- while the run writes ------------------------------------------------------------------------
    def confirm(self, action: str) -> None:
        """Raise ``LeaseLost`` unless this run still holds the job (one listing of the lease folder)."""
        if self.lost:
            raise LeaseLost(self.lost)
        if self.epoch is None:
            return  # not acquired: in-process use without a lease (tests of single parts)
        listed_at = self.clock()
        self.observe(self.files.listing(), action, listed_at)

    def observe(self, listing: LeaseListing, action: str, listed_at: float) -> None:
        """``confirm`` with a listing taken at ``listed_at`` (this lease's clock) by someone else: the running
        job's poll of ``_control/`` shows the lease folder too, so an idle job pays no listing of its own."""
        if self.lost:
            raise LeaseLost(self.lost)
        if self.epoch is None:
            return
        newer = [e for e in listing.epochs if e > self.epoch]
        if newer:
            taker = self.files.read(newer[-1]) or {}
            self.lost = (
                f"run {self.run_id} lost job {self.storage.job_name!r} to run {taker.get('run_id', '?')} "
                f"(lease epoch {newer[-1]}, taken over after this run was silent for more than "
                f"{self.timeout:g}s); stopped before {action} without writing"
            )
            log.error("%s", self.lost)
            raise LeaseLost(self.lost)
        self._confirmed_at = max(self._confirmed_at, listed_at)

    def check(self, action: str) -> None:
        """Like ``confirm`` but cheap: lists storage only if the last confirmation is older than timeout/2."""
        if self.lost:
            raise LeaseLost(self.lost)
        if self.epoch is not None and self.clock() - self._confirmed_at > self.timeout / 2:
            self.confirm(action)

    def release(self) -> None:
        """Let go at the end of the run so the next run need not wait for the timeout."""
        self._stop.set()
        if self._renewer is not None:
            self._renewer.join(timeout=10)
        if self.epoch is not None and not self.lost:
            try:
                self.files.release(self.epoch)
            except Exception:  # the next run waits out the timeout instead: safe, only slower
                log.warning("could not release lease epoch %d", self.epoch, exc_info=True)
        try:
            self.control.end_heartbeat(self.run_id)
        except Exception:
            log.warning("could not remove the heartbeat of run %s", self.run_id, exc_info=True)

    # --- internals -----------------------------------------------------------------------------------
    def _renew(self) -> None:
        while not self._stop.wait(self.renew_interval):
            try:
                # The job's poll usually confirmed moments ago (``observe``): list only when that is overdue.
                self.check("renewing the lease")
                self.control.heartbeat(self.run_id, self.run_key)
            except LeaseLost:
                return
            except Exception:  # a storage hiccup: the next renewal tries again; the timeout allows several
                log.warning("could not renew the lease of run %s", self.run_id, exc_info=True)

    def _live_holder(self, listing: LeaseListing, *, announce: bool = True) -> dict[str, Any] | None:
        latest = listing.latest
        if not latest or latest in listing.released:
            return None
        grant = self.files.read(latest) or {}  # a damaged grant still counts, by its file's time
        holder = str(grant.get("run_id") or "")
        times = [self.files.granted_modified(latest), self.control.heartbeat_modified(holder) if holder else None]
        heard = max((t for t in times if t is not None), default=None)
        if heard is None:
            return None  # the grant vanished between listing and reading: nothing holds that epoch
        silent = self.control.store_now(self.run_id) - heard
        if silent <= self.timeout:
            return {**grant, "epoch": latest, "silent_s": max(0.0, silent), "heard": heard}
        if announce:
            log.warning(
                "taking over job %r from run %s (lease epoch %d): silent for %.0fs, longer than --lease-timeout %gs",
                self.storage.job_name,
                holder or "?",
                latest,
                silent,
                self.timeout,
            )
        return None

    def _held_message(self, holder: dict[str, Any]) -> str:
        key = f", run key {holder['run_key']}" if holder.get("run_key") else ""
        return (
            f"job {self.storage.job_name!r} is held by run {holder.get('run_id', '?')} (lease epoch "
            f"{holder['epoch']}{key}, host {holder.get('host', '?')}, pid {holder.get('pid', '?')}), heard from "
            f"{holder['silent_s']:.0f}s ago; this run writes nothing. Wait for that run to finish or stop it; "
            f"if it is dead, a new run takes over once it has been silent for {self.timeout:g}s (--lease-timeout)"
        )
