"""Try the Airflow UI: a local Airflow over the example DAGs, with events that keep landing.

Starts the API server, scheduler, DAG processor and triggerer (SQLite, LocalExecutor) on a free loopback
port, with the example DAGs, the Spark connection (local Spark) and the execution API URL matching the port.
A new event file lands every few seconds. Prints the URL; every user is an admin, so there is no login.
Ctrl-C stops everything it started. ``bash scripts/demo.sh --ui`` sets up everything first.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from tests.support.landing import Landing  # noqa: E402
from tests.support.local_airflow import LocalAirflow  # noqa: E402

HOME = Path(os.environ.get("CHECKPOINT_DEMO_HOME", REPO / "demo-output")) / "ui"
LAND_EVERY_SECONDS = 5.0


def main() -> int:
    HOME.mkdir(parents=True, exist_ok=True)
    landing = Landing(HOME / "landing", keys=["alpha", "beta", "gamma", "delta", "epsilon"])
    landing.next_id = 1_000_000 * (len(list(landing.path.glob("events-*.json"))) + 1)  # ids never clash
    landing.files = len(list(landing.path.glob("events-*.json")))
    airflow = LocalAirflow(
        HOME / "airflow-home",
        REPO / "dags",
        {
            "CHECKPOINT_DEMO_HOME": str(HOME),
            "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "True",
            "AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL": "30",  # Airflow's default: an edited DAG shows soon
            # The checkpoint pages (/checkpoints/, "Checkpoints" in the navigation) show the demo's root.
            "AIRFLOW__CHECKPOINT_PROVIDER__ROOTS": str(HOME / "checkpoints"),
        },
    )
    stopped = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopped.set())
    try:
        print(f"starting Airflow in {airflow.home} (logs: {airflow.home}/*.log) ...", flush=True)
        airflow.start()
        print(
            f"\nAirflow UI: {airflow.url}  (every user is an admin: no login)\n"
            f"Example DAGs start paused; trigger one from its page (Trigger button) to run it with its form.\n"
            f"Events land in {landing.path} every {LAND_EVERY_SECONDS:g} s; checkpoints go to {HOME}/checkpoints,\n"
            f'shown at {airflow.url}/checkpoints/ ("Checkpoints" in the navigation).\n'
            "Ctrl-C stops everything this started.",
            flush=True,
        )
        while not stopped.wait(LAND_EVERY_SECONDS):
            airflow.check_alive()
            landing.add_file()
    except KeyboardInterrupt:
        pass
    finally:
        print("\nstopping Airflow ...", flush=True)
        airflow.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
