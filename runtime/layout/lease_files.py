"""``_control/lease/``: the files behind the job lease (one exclusively created file per epoch)."""

from __future__ import annotations

import json
import logging
import posixpath
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from spark_checkpoint_runtime.layout.control import LEASE_FOLDER, control_path
from spark_checkpoint_runtime.layout.errors import CheckpointFormatError
from spark_checkpoint_runtime.layout.names import validate_key
from spark_checkpoint_runtime.layout.store import create_exclusively, delete_each, make_folder, modified_time
from spark_checkpoint_runtime.layout.untrusted import int_field, read_json_object

if TYPE_CHECKING:
    from spark_checkpoint_runtime.layout.job_folder import JobFolder

log = logging.getLogger(__name__)
MAX_GRANT_BYTES = 16 * 1024


_LEASE_FILE = re.compile(r"^(\d{12})\.(json|released)$")


@dataclass(frozen=True)
class LeaseListing:
    """One listing of ``_control/lease/``: epochs granted and epochs their holder let go of."""

    epochs: list[int]
    released: set[int]

    @property
    def latest(self) -> int:
        return self.epochs[-1] if self.epochs else 0


class LeaseFiles:
    """The files behind the job lease: ``_control/lease/<epoch>.json`` per grant, created exclusively.

    Epoch ``N.json`` names the run that holds the job from then on; ``N.released`` says it let go. Whoever
    creates ``N+1.json`` first holds the job (see ``spark_checkpoint_runtime.lease`` for the rules).
    """

    def __init__(self, storage: JobFolder):
        self.fs = storage.fs
        self.base = posixpath.join(control_path(storage), LEASE_FOLDER)

    def _path(self, epoch: int, suffix: str) -> str:
        return posixpath.join(self.base, f"{int(epoch):012d}.{suffix}")

    def listing(self) -> LeaseListing:
        try:
            names = [posixpath.basename(n) for n in self.fs.ls(self.base, detail=False)]
        except FileNotFoundError:
            names = []
        return self.listing_of(names)

    @staticmethod
    def listing_of(names: list[str]) -> LeaseListing:
        """The listing that file names in ``lease/`` make (from ``ls`` here, or a ``ControlChannel.poll``)."""
        epochs, released = set(), set()
        for name in names:
            match = _LEASE_FILE.match(name)
            if match:
                (epochs if match.group(2) == "json" else released).add(int(match.group(1)))
        return LeaseListing(sorted(epochs), released)

    def read(self, epoch: int) -> dict[str, Any] | None:
        """The grant of ``epoch``, or None if it is missing or damaged (its holder then counts as unknown)."""
        path = self._path(epoch, "json")
        try:
            grant = read_json_object(self.fs, path, max_bytes=MAX_GRANT_BYTES, what=f"lease epoch {epoch}")
            validate_key(grant.get("run_id"), "run id")
            if grant.get("run_key") is not None:
                validate_key(grant["run_key"], "run key")
            int_field(grant, "acquired_ms")
            int_field(grant, "pid", default=0)
            if not isinstance(grant.get("host", ""), str):
                raise ValueError("host must be a string")
        except FileNotFoundError:
            return None
        except (CheckpointFormatError, ValueError) as exc:
            log.warning("lease epoch %d is damaged (%s); its holder counts as unknown", epoch, exc)
            return None
        return grant

    def unreleased_grant(self) -> dict[str, Any] | None:
        """The newest grant, with its ``epoch``, unless its holder let go (None: no run holds the job).

        Whether that holder is still alive is another question (``spark_checkpoint_runtime.lease``): a killed
        or frozen run never releases.
        """
        listing = self.listing()
        if not listing.latest or listing.latest in listing.released:
            return None
        return {**(self.read(listing.latest) or {}), "epoch": listing.latest}

    def granted_modified(self, epoch: int) -> float | None:
        """When ``epoch`` was granted, by the store's clock (epoch seconds); None if there is no such grant."""
        try:
            return modified_time(self.fs.info(self._path(epoch, "json")))
        except FileNotFoundError:
            return None

    def create(self, epoch: int, grant: dict[str, Any]) -> bool:
        """Claim ``epoch``; False if another run claimed it first."""
        make_folder(self.fs, self.base)
        return create_exclusively(self.fs, self._path(epoch, "json"), json.dumps(grant, sort_keys=True).encode())

    def release(self, epoch: int) -> None:
        create_exclusively(self.fs, self._path(epoch, "released"), b"{}")

    def prune(self, below: int, listing: LeaseListing | None = None) -> None:
        """Delete grants older than ``below`` (history only: the newest epoch is what counts).

        ``listing``: one the caller took already (any grant written since is newer than those it shows).
        """
        old = [e for e in (listing if listing is not None else self.listing()).epochs if e < below]
        delete_each(self.fs, [self._path(e, suffix) for e in old for suffix in ("json", "released")], recursive=False)
