"""ClusterDriverTrigger's judgement of a silent run, over real heartbeat files. The standalone master is a small
HTTP server answering its REST API's status and kill calls: the one case here (a driver that runs on after its
run released the job) needs a Python frozen in a window of a second, which a real cluster reaches only by luck
(the deferred driver's freeze in tests/system/test_cluster.py once could)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from airflow_checkpoint_provider.triggers import driver as driver_trigger
from airflow_checkpoint_provider.triggers.driver import ClusterDriverTrigger
from spark_checkpoint_runtime.layout import ControlChannel, JobFolder


class Master(ThreadingHTTPServer):
    """What the trigger asks of a standalone master: a driver's state, and to kill it."""

    state = "RUNNING"
    kills: list[str]


class _Answers(BaseHTTPRequestHandler):
    server: Master

    def do_GET(self) -> None:  # /v1/submissions/status/<driver>
        self._answer({"action": "SubmissionStatusResponse", "driverState": self.server.state, "success": True})

    def do_POST(self) -> None:  # /v1/submissions/kill/<driver>
        self.server.kills.append(self.path.rsplit("/", 1)[-1])
        self.server.state = "KILLED"
        self._answer({"action": "KillSubmissionResponse", "success": True})

    def _answer(self, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *_: object) -> None:
        pass


@pytest.fixture
def master() -> Iterator[Master]:
    server = Master(("127.0.0.1", 0), _Answers)
    server.kills = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def _trigger(root: Path, master: Master) -> ClusterDriverTrigger:
    return ClusterDriverTrigger(
        job_name="orders",
        checkpoint_root=str(root),
        rest_url=f"http://127.0.0.1:{master.server_address[1]}",
        driver_id="driver-20261130000000-0001",
        run_key="orders.stream.try1",
        stop_timeout=1,
        heartbeat_timeout=0.5,
    )


def test_a_driver_running_on_after_its_run_released_the_job_is_killed(tmp_path: Path, master: Master, monkeypatch):
    """The run removed its heartbeat as it released the lease, but its driver neither exits nor is seen to
    hang (no heartbeat is left to go stale): past the heartbeat timeout and a grace the master kills it."""
    monkeypatch.setattr(driver_trigger, "RELEASED_GRACE_SECONDS", 0.5)
    storage = JobFolder(str(tmp_path), "orders")
    control = ControlChannel(storage)
    trigger = _trigger(tmp_path, master)
    control.heartbeat("run-1", "orders.stream.try1")
    assert trigger.poll_once(storage) == [], "a running driver with a fresh heartbeat is followed"
    control.end_heartbeat("run-1")  # the run released the job; its Python then froze
    assert trigger.poll_once(storage) == [] and master.kills == [], "within the grace: the driver may be exiting"
    time.sleep(1.2)
    assert trigger.poll_once(storage) == [] and master.kills == ["driver-20261130000000-0001"]
    [event] = trigger.poll_once(storage)
    assert event["driver_state"] == "KILLED" and "released the job" in event["killed"], event
    report = control.run_report("orders.stream.try1")
    assert report["status"] == "killed" and "frozen or cannot exit" in report["error"], report


def test_a_driver_not_heard_from_yet_is_not_judged(tmp_path: Path, master: Master, monkeypatch):
    """Still starting (no heartbeat ever seen): a slow start is not a hang, however long it takes."""
    monkeypatch.setattr(driver_trigger, "RELEASED_GRACE_SECONDS", 0.0)
    storage = JobFolder(str(tmp_path), "orders")
    trigger = _trigger(tmp_path, master)
    assert trigger.poll_once(storage) == []
    time.sleep(0.8)
    assert trigger.poll_once(storage) == [] and master.kills == []
