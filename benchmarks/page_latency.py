"""The checkpoint pages' cost to the rest of the API server: other pages' latency while a big job page loads.

    .venv/bin/python -m benchmarks.page_latency [--checkpoints 10000] [--requests 200]

A real ``airflow api-server`` (SQLite, the plugin mounted, ``--workers`` worker processes: Airflow's default,
1) on a loopback port serves a root holding one job with ``--checkpoints`` checkpoints (written through
the format module, no Spark). The benchmark times ``--requests`` sequential requests to another page
(``/api/v2/dags``) twice in the same run: idle, and while the job's page data (``/checkpoints/api/jobs/0/big``,
what its page reads for its default view) is loaded again and again by one client: back to back, then once
a second (a person clicking around). It reports the other page's p50/p95 each way, the ratios to idle, and how
long the job page takes. Needs no Spark. Prints a line, writes JSON.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

from benchmarks.provenance import write_result

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from spark_checkpoint_runtime.layout import (  # noqa: E402
    CheckpointMetadata,
    FileEntry,
    JobFolder,
    now_ms,
)
from tests.support.local_airflow import LocalAirflow  # noqa: E402

OTHER_PAGE = "/api/v2/dags"
JOB_PAGE = "/checkpoints/api/jobs/0/big"  # what the job's page (a React app) reads


def write_checkpoints(storage: JobFolder, count: int) -> None:
    """``count`` small complete checkpoints, each owning one file."""
    for checkpoint_id in range(1, count + 1):
        relative = storage.checkpoints.relative_file(checkpoint_id, "commits/0")
        path = storage.job_file(relative)
        storage.fs.makedirs(path.rsplit("/", 1)[0], exist_ok=True)
        storage.fs.pipe_file(path, b"v1\n{}")
        storage.checkpoints.write_metadata(
            CheckpointMetadata(
                id=checkpoint_id,
                kind="checkpoint",
                job_name=storage.job_name,
                run_id="r1",
                batch_id=checkpoint_id,
                trigger_timestamp_ms=now_ms() - 50,
                completion_timestamp_ms=now_ms(),
                checkpointing_mode="exactly-once",
                files=[FileEntry(relative, "commits/0", 5, False)],
                state_bytes=0,
                bytes_written=5,
                durations_ms={"total": 40 + checkpoint_id % 17},
            )
        )


def timed_get(url: str) -> float:
    started = time.perf_counter()
    with urllib.request.urlopen(url, timeout=300) as answer:
        answer.read()
        assert answer.status == 200, answer.status
    return time.perf_counter() - started


def percentiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "p50_ms": round(statistics.median(ordered) * 1000, 2),
        "p95_ms": round(ordered[int(0.95 * (len(ordered) - 1))] * 1000, 2),
    }


def measure(checkpoints: int, requests: int, workers: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="page-latency-") as folder:
        home, root = Path(folder) / "airflow-home", Path(folder) / "root"
        started = time.perf_counter()
        write_checkpoints(JobFolder(str(root), "big"), checkpoints)
        print(f"wrote {checkpoints} checkpoints in {time.perf_counter() - started:.1f} s", flush=True)
        settings = {"AIRFLOW__CHECKPOINT_PROVIDER__ROOTS": str(root), "AIRFLOW__API__WORKERS": str(workers)}
        airflow = LocalAirflow(home, REPO / "dags", settings)
        try:
            airflow.start(("api-server",))
            other = airflow.url + OTHER_PAGE
            for _ in range(10):  # warm up both pages
                timed_get(other)
            job_page_s = [timed_get(airflow.url + JOB_PAGE) for _ in range(3)]
            idle = [timed_get(other) for _ in range(requests)]

            def while_loading(pause: float) -> tuple[list[float], int]:
                """The other page's latencies while one client loads the job page, ``pause`` s between loads."""
                stop, loads = threading.Event(), []

                def load_job_page() -> None:
                    while not stop.is_set():
                        loads.append(timed_get(airflow.url + JOB_PAGE))
                        stop.wait(pause)

                loader = threading.Thread(target=load_job_page)
                loader.start()
                time.sleep(1)
                samples = [timed_get(other) for _ in range(requests)]
                stop.set()
                loader.join()
                return samples, len(loads)

            busy, busy_loads = while_loading(0.0)
            paced, paced_loads = while_loading(1.0)
        finally:
            airflow.stop()
    idle_p, busy_p, paced_p = percentiles(idle), percentiles(busy), percentiles(paced)
    return {
        "checkpoints": checkpoints,
        "requests": requests,
        "api_workers": workers,
        "other_page": OTHER_PAGE,
        "idle": idle_p,
        "while_job_page_loads": busy_p,
        "ratio_p50": round(busy_p["p50_ms"] / idle_p["p50_ms"], 2),
        "ratio_p95": round(busy_p["p95_ms"] / idle_p["p95_ms"], 2),
        "job_page_ms": [round(s * 1000) for s in job_page_s],
        "job_page_loads_during": busy_loads,
        "while_a_user_loads_it_every_second": paced_p,
        "paced_ratio_p50": round(paced_p["p50_ms"] / idle_p["p50_ms"], 2),
        "paced_ratio_p95": round(paced_p["p95_ms"] / idle_p["p95_ms"], 2),
        "paced_loads": paced_loads,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoints", type=int, default=10_000)
    parser.add_argument("--requests", type=int, default=500)
    parser.add_argument("--workers", type=int, default=1, help="API server worker processes (Airflow's default: 1)")
    parser.add_argument("--out", default=str(REPO / "benchmarks" / "page_latency.json"))
    args = parser.parse_args(argv)
    result = measure(args.checkpoints, args.requests, args.workers)
    print(
        f"{result['other_page']} ({result['api_workers']} API workers) with a {result['checkpoints']}-checkpoint "
        "job page loading: "
        f"p50 {result['idle']['p50_ms']} -> {result['while_job_page_loads']['p50_ms']} ms "
        f"(x{result['ratio_p50']}), p95 {result['idle']['p95_ms']} -> {result['while_job_page_loads']['p95_ms']} ms "
        f"(x{result['ratio_p95']}); the job page itself: {result['job_page_ms']} ms, "
        f"{result['job_page_loads_during']} loads during the busy phase; with one load a second "
        f"({result['paced_loads']} loads): p50 {result['while_a_user_loads_it_every_second']['p50_ms']} ms "
        f"(x{result['paced_ratio_p50']}), p95 {result['while_a_user_loads_it_every_second']['p95_ms']} ms "
        f"(x{result['paced_ratio_p95']})"
    )
    write_result(args.out, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
