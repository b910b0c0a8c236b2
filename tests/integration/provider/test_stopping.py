"""Stopping a job that holds its lease, under ``dag.test()`` over real files.

The kill watch and the health judgement are ``tests/unit/provider/test_stopping.py``; the whole chain under a
real scheduler is in ``tests/system/test_cluster.py`` (a frozen driver, killed) and
``tests/system/test_airflow_scheduler.py`` (a stall whose driver answers the stop).
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

from spark_checkpoint_runtime.layout import ControlChannel, JobFolder, LeaseFiles, now_ms
from tests.support.airflow_env import load_dag, task_states, xcom
from tests.unit.provider.test_stopping import _hold


def test_stop_asks_first_and_says_when_nobody_can_kill(tmp_path: Path, capfd):
    polite, frozen = JobFolder(str(tmp_path), "polite"), JobFolder(str(tmp_path), "frozen")
    _hold(polite, 1, "polite-key")
    _hold(frozen, 1, "frozen-key")
    older = JobFolder(str(tmp_path), "older")
    _hold(older, 1, "other-dag-key", acquired_ms=now_ms() - 60_000)
    answered = threading.Event()

    def answer_stops() -> None:
        """What a live runtime does with the stop request addressed to its run key: report and let go."""
        control = ControlChannel(polite)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not answered.is_set():
            if any(getattr(r, "run_key", None) == "polite-key" and r.action == "stop" for r in control.pending()):
                control.write_run_report("polite-key", {"status": "stopped"})
                LeaseFiles(polite).release(1)
                answered.set()
            time.sleep(0.1)

    responder = threading.Thread(target=answer_stops, daemon=True)
    responder.start()
    run = load_dag("stop_checks").test(run_conf={"root": str(tmp_path)})
    answered.set()
    assert task_states(run) == {
        "nothing_to_stop": "success",
        "leaves_an_older_run_alone": "success",
        "answers_the_stop": "success",
        "nobody_kills": "failed",
    }
    assert xcom(run, "nothing_to_stop")["outcome"] == "not_running"
    assert xcom(run, "leaves_an_older_run_alone")["outcome"] == "not_running"
    assert ControlChannel(older).pending() == [] and ControlChannel(older).kill_request("other-dag-key") is None
    assert xcom(run, "answers_the_stop") == {"run_key": "polite-key", "run_id": "run-1", "outcome": "stopped"}
    # The frozen run got a stop request, then a kill request for its task, with the reason.
    control = ControlChannel(frozen)
    assert [r.run_key for r in control.pending()] == ["frozen-key"]
    assert (
        "a test froze it; it did not answer a stop request within 1.0s" in control.kill_request("frozen-key")["reason"]
    )
    output = capfd.readouterr().out
    assert "did not stop within 1.0s, and no task confirmed killing it within 2.0s" in output
    assert "A restore takes the job over once its lease has been silent" in output
