"""``_control/``: requests from Airflow (stop, savepoint), the runtime's answers, run reports and heartbeats."""

from __future__ import annotations

import json
import logging
import posixpath
import uuid
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from spark_checkpoint_runtime.layout.errors import CheckpointFormatError
from spark_checkpoint_runtime.layout.metadata import now_ms
from spark_checkpoint_runtime.layout.names import CONTROL_DIR, relative_to, validate_key
from spark_checkpoint_runtime.layout.store import delete_each, is_object_store, modified_time
from spark_checkpoint_runtime.layout.untrusted import int_field, read_json_object

if TYPE_CHECKING:
    from spark_checkpoint_runtime.layout.job_folder import JobFolder

log = logging.getLogger(__name__)

# --- _control/: requests from Airflow and the runtime's answers ----------------------------------------
CONTROL_ACTIONS = ("stop", "savepoint")


MAX_CONTROL_BYTES = 16 * 1024
LEASE_FOLDER = "lease"  # _control/lease/: the job lease's files (lease_files.py)


_CONTROL_FIELDS = {"action", "run_key", "created_ms", "stop", "target_directory"}


# A running job's heartbeat: one PUT per 10 s on object storage (8,640 a day), at most a third of the lease
# timeout (spark_checkpoint_runtime.lease), well inside HEARTBEAT_STALE_SECONDS.
HEARTBEAT_SECONDS = 10.0


HEARTBEAT_STALE_SECONDS = 30.0


# Answers after which a request is settled; "in_progress" and "accepted" are not.
TERMINAL_STATUSES = ("completed", "failed", "rejected", "expired")


@dataclass(frozen=True)
class ControlRequest:
    """A request in ``_control/requests/<trigger-id>.json``. ``run_key`` None means any run of the job.

    ``savepoint`` requests may ask to ``stop`` afterwards and name a ``target_directory``.
    """

    trigger_id: str
    action: str
    run_key: str | None
    created_ms: int
    stop: bool = False
    target_directory: str | None = None


def _checked_request(trigger_id: str, data: dict[str, Any]) -> ControlRequest:
    """Validate a control request strictly: unknown fields, actions or types are refused."""
    validate_key(trigger_id, "trigger id")
    unknown = sorted(set(data) - _CONTROL_FIELDS)
    if unknown:
        raise CheckpointFormatError(f"unknown field(s) {', '.join(unknown)}")
    if data.get("action") not in CONTROL_ACTIONS:
        raise CheckpointFormatError(
            f"unknown action {data.get('action')!r}; expected one of {', '.join(CONTROL_ACTIONS)}"
        )
    run_key, target = data.get("run_key"), data.get("target_directory")
    if not isinstance(data.get("stop", False), bool):
        raise CheckpointFormatError(f"'stop' must be true or false, not {data.get('stop')!r}")
    if target is not None and (not isinstance(target, str) or not target.strip() or len(target) > 4096):
        raise CheckpointFormatError(f"target_directory {target!r} is not a path or URL")
    return ControlRequest(
        trigger_id,
        data["action"],
        validate_key(run_key, "run key") if run_key else None,
        int(data.get("created_ms") or 0),
        bool(data.get("stop", False)),
        target,
    )


@dataclass(frozen=True)
class ControlPoll:
    """What one listing of ``_control/`` shows a running job: unanswered requests (a malformed one as
    (trigger id, reason), to be refused) and the file names in ``lease/`` (``LeaseFiles.listing_of``)."""

    pending: list[ControlRequest | tuple[str, str]]
    lease_names: list[str]


def control_path(job: JobFolder) -> str:
    """The job's ``_control/`` folder (also where the store's exclusive create is probed)."""
    return posixpath.join(job.job_path, CONTROL_DIR)


def _modified(fs: Any, path: str) -> float | None:
    try:
        return modified_time(fs.info(path))
    except FileNotFoundError:
        return None


class ControlChannel:
    """Requests to a running job (Airflow writes them) and the job's answers and run reports.

    Layout under ``<job>/_control/``: ``requests/<trigger-id>.json``, ``responses/<trigger-id>.json``,
    ``runs/<run-key>.json`` (the result of a run started with that key), ``alive/<run-id>.json``
    (heartbeats of running jobs), ``kill/<run-key>.json`` (a kill asked of whatever supervises the run
    with that key, for a driver that no longer answers requests: the driver itself never reads them) and
    ``cursors/<name>.json`` (how far a watcher of the job's commits has delivered; prune keeps them).
    """

    def __init__(self, storage: JobFolder):
        self.storage = storage
        self.fs = storage.fs
        self.base = control_path(storage)

    def _path(self, kind: str, key: str) -> str:
        return posixpath.join(self.base, kind, f"{validate_key(key, 'key')}.json")

    def _write(self, path: str, payload: dict[str, Any]) -> None:
        data = json.dumps(payload, sort_keys=True).encode("utf-8")
        if is_object_store(self.fs):  # one PUT replaces an object whole: no temporary copy (2 more requests)
            self.fs.pipe_file(path, data)
            return
        self.fs.makedirs(posixpath.dirname(path), exist_ok=True)
        temporary = f"{path}.{uuid.uuid4().hex}.tmp"
        self.fs.pipe_file(temporary, data)
        self.fs.mv(temporary, path)

    def _read(self, path: str) -> dict[str, Any] | None:
        """A control file as a JSON object, None if absent; ``CheckpointFormatError`` (one line) if damaged."""
        try:
            return read_json_object(self.fs, path, max_bytes=MAX_CONTROL_BYTES, what=self.fs.unstrip_protocol(path))
        except FileNotFoundError:
            return None

    def request(
        self,
        trigger_id: str,
        action: str,
        run_key: str | None = None,
        *,
        stop: bool = False,
        target_directory: str | None = None,
    ) -> ControlRequest:
        """Ask the job to do ``action``. A trigger id is answered once: asking again returns that answer."""
        request = _checked_request(
            trigger_id,
            {
                "action": action,
                "run_key": run_key,
                "created_ms": now_ms(),
                "stop": stop,
                "target_directory": target_directory,
            },
        )
        payload = {k: v for k, v in asdict(request).items() if k != "trigger_id"}
        self._write(self._path("requests", trigger_id), payload)
        return request

    def pending(self) -> list[ControlRequest | tuple[str, str]]:
        """Unanswered requests; a malformed one comes back as (trigger id, reason) so it can be refused."""
        return self.poll().pending

    def poll(self) -> ControlPoll:
        """One listing of all of ``_control/`` (on object storage one request while it holds fewer than 1,000
        files; prune keeps it small): unanswered requests, each read once, and the lease folder's names.

        A running job calls this every few seconds, so it is what an idle job costs: requests, answers and
        lease epochs from one listing instead of one each.
        """
        try:
            paths = self.fs.find(self.base)
        except FileNotFoundError:
            paths = []
        names: dict[str, set[str]] = {}
        for path in paths:
            kind, _, name = relative_to(path, self.base).partition("/")
            if name and "/" not in name:
                names.setdefault(kind, set()).add(name)
        answered = names.get("responses", set())
        found: list[ControlRequest | tuple[str, str]] = []
        for base in sorted(names.get("requests", set())):
            if not base.endswith(".json") or base in answered:
                continue
            trigger_id = base[: -len(".json")]
            try:
                data = self._read(posixpath.join(self.base, "requests", base))
                if data is None:
                    continue  # withdrawn between the listing and this read: nobody waits for an answer
                found.append(_checked_request(trigger_id, data))
            except (CheckpointFormatError, TypeError, ValueError) as exc:
                found.append((trigger_id, str(exc)))
        return ControlPoll(found, sorted(names.get(LEASE_FOLDER, set())))

    def heartbeat(self, run_id: str, run_key: str | None) -> None:
        """Say this run is alive (the job calls it every ``HEARTBEAT_SECONDS``)."""
        self._write(self._path("alive", run_id), {"run_id": run_id, "run_key": run_key, "updated_ms": now_ms()})

    def heartbeat_modified(self, run_id: str) -> float | None:
        """When run ``run_id``'s heartbeat file was last written, by the store's clock (epoch seconds)."""
        return _modified(self.fs, self._path("alive", run_id))

    def store_now(self, run_id: str) -> float:
        """The store's clock now (epoch seconds): the modification time of a file this run writes and removes.

        Liveness compares the store's times with each other, never a host's clock with another's.
        """
        path = self._path("clock", run_id)
        self._write(path, {"run_id": run_id})
        try:
            modified = _modified(self.fs, path)
        finally:
            self._remove([path])
        if modified is None:
            raise CheckpointFormatError(f"{self.fs.unstrip_protocol(path)}: the store reports no modification time")
        return modified

    def end_heartbeat(self, run_id: str) -> None:
        try:
            self.fs.rm(self._path("alive", run_id))
        except FileNotFoundError:
            pass

    def live_runs(self, stale_after: float = HEARTBEAT_STALE_SECONDS) -> list[dict[str, Any]]:
        """Runs whose heartbeat is fresh: a run killed without a chance to clean up goes stale."""
        try:
            names = self.fs.ls(posixpath.join(self.base, "alive"), detail=False)
        except FileNotFoundError:
            return []
        live = []
        for name in names:
            try:
                beat = self._read(name)
                fresh = beat is not None and now_ms() - int_field(beat, "updated_ms") <= stale_after * 1000
            except (CheckpointFormatError, ValueError) as exc:
                log.warning("ignoring heartbeat %s: %s", posixpath.basename(name), exc)
                continue
            if fresh:
                live.append(beat)
        return live

    def request_savepoint(
        self, trigger_id: str, *, stop: bool = False, target_directory: str | None = None
    ) -> dict[str, Any] | None:
        """Ask the running job for a savepoint, unless ``trigger_id`` was asked before: then its answer.

        Raises ``LookupError`` when no run of the job has a fresh heartbeat (nothing would answer).
        """
        previous = self.response(trigger_id)
        live = self.live_runs()
        if previous is not None and previous.get("status") == "in_progress":
            if not any(beat.get("run_id") == previous.get("run_id") for beat in live):
                # The run that took it on is gone (killed mid-savepoint): the answer expires and the same
                # trigger id is asked again, so a retry gets a savepoint rather than a promise nobody keeps.
                self._remove([self._path("responses", trigger_id), self._path("requests", trigger_id)])
                previous = None
        if previous is not None:
            return previous
        if not live:
            raise LookupError(
                f"no running job {self.storage.job_name!r} under {self.storage.root_url} (no heartbeat in the "
                f"last {HEARTBEAT_STALE_SECONDS:.0f} s); start the job first"
            )
        self.request(trigger_id, "savepoint", stop=stop, target_directory=target_directory)
        return None

    def withdraw(self, trigger_id: str) -> bool:
        """Take back a request nobody will wait for (its task timed out or was killed): True if it was still
        unanswered and is gone, False if the job had already answered it (then it runs its course). A job that
        read the request in the same instant may still answer it; the answer then says what it did."""
        if self.response(trigger_id) is not None:
            return False
        self._remove([self._path("requests", trigger_id)])
        # The job may have taken it on between the two looks: then its answer is there now.
        return self.response(trigger_id) is None

    def prune(self, older_than_s: float, *, now_ms_: int | None = None) -> int:
        """Delete settled control files older than ``older_than_s``: answered requests with their answers, run
        reports, kill requests, requests addressed to a run that is gone (it reported, or no live run has
        its key), and the heartbeats of runs that died without removing theirs (a live run renews its own
        every ``HEARTBEAT_SECONDS``).
        Returns the count.
        """
        now = now_ms_ if now_ms_ is not None else now_ms()
        ages = self._ages(("requests", "responses", "runs", "kill", "alive"))
        old = {
            kind: {name for name, age in found.items() if now - age > older_than_s * 1000}
            for kind, found in ages.items()
        }
        doomed = [self._path("responses", name) for name in old["responses"]]
        doomed += [self._path("requests", name) for name in old["requests"] if name in ages["responses"]]
        doomed += [self._path(kind, name) for kind in ("runs", "kill", "alive") for name in old[kind]]
        unanswered = old["requests"] - set(ages["responses"])
        # The live runs only matter for an old unanswered request: their heartbeats are read only then.
        live_keys = {beat.get("run_key") for beat in self.live_runs()} if unanswered else set()
        for name in unanswered:
            try:
                request = _checked_request(name, self._read(self._path("requests", name)) or {})
            except (CheckpointFormatError, TypeError, ValueError):
                continue  # the runtime answers malformed requests with "rejected"; leave that to it
            if request.run_key is not None and (request.run_key in ages["runs"] or request.run_key not in live_keys):
                doomed.append(self._path("requests", name))
        self._remove(doomed)
        return len(doomed)

    def _ages(self, kinds: tuple[str, ...]) -> dict[str, dict[str, float]]:
        """Per kind, key -> modification time (epoch ms, as the store reports it) of every file directly under
        it, from one listing of all of ``_control/`` (on object storage one request, not one per kind)."""
        try:
            entries = self.fs.find(self.base, detail=True)
        except FileNotFoundError:
            entries = {}
        found: dict[str, dict[str, float]] = {kind: {} for kind in kinds}
        for path, entry in entries.items():
            kind, _, base = relative_to(path, self.base).partition("/")
            modified = modified_time(entry)
            if kind in found and "/" not in base and base.endswith(".json") and modified is not None:
                found[kind][base[: -len(".json")]] = modified * 1000
        return found

    def _remove(self, paths: list[str]) -> None:
        delete_each(self.fs, paths, recursive=False)

    def request_kill(self, run_key: str, reason: str) -> None:
        """Ask the supervisor of run ``run_key`` (the Airflow task that submitted it) to kill its driver."""
        self._write(self._path("kill", run_key), {"reason": str(reason)[:2000], "created_ms": now_ms()})

    def kill_request(self, run_key: str) -> dict[str, Any] | None:
        """The kill asked for run ``run_key``, or None: one read of one file, cheap enough to poll."""
        return self._read(self._path("kill", run_key))

    def respond(self, trigger_id: str, payload: dict[str, Any]) -> None:
        self._write(self._path("responses", trigger_id), payload)

    def response(self, trigger_id: str) -> dict[str, Any] | None:
        return self._read(self._path("responses", trigger_id))

    def commit_cursor(self, name: str, checkpoint_id: int) -> None:
        """Record that watcher ``name`` delivered every commit up to checkpoint ``checkpoint_id``."""
        self._write(self._path("cursors", name), {"checkpoint_id": int(checkpoint_id), "updated_ms": now_ms()})

    def cursor(self, name: str) -> int | None:
        """The checkpoint id watcher ``name`` delivered up to, None if it never committed one."""
        path = self._path("cursors", name)
        data = self._read(path)
        try:
            return None if data is None else int_field(data, "checkpoint_id")
        except ValueError as exc:
            raise CheckpointFormatError(
                f"{self.fs.unstrip_protocol(path)}: {exc}; delete it to deliver from the newest checkpoint on"
            ) from None

    def write_run_report(self, run_key: str, report: dict[str, Any]) -> None:
        self._write(self._path("runs", run_key), report)

    def run_report(self, run_key: str) -> dict[str, Any] | None:
        return self._read(self._path("runs", run_key))
