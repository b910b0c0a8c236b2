"""A loopback S3 server (moto) that counts the requests it answers, by kind: what a job costs on S3.

Kinds follow S3's billing: LIST (a GET on the bucket), GET, HEAD, PUT, COPY (a PUT with a copy source),
DELETE (one object) and DELETE_BATCH (one ``POST ?delete`` for up to 1,000 keys). Used by
``benchmarks.request_cost`` and by the tests that hold the request goals.
"""

from __future__ import annotations

import argparse
import logging
import os
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

KINDS = ("LIST", "GET", "HEAD", "PUT", "COPY", "DELETE", "DELETE_BATCH", "OTHER")
UNCOUNTED_KEY = "uncounted"


def request_kind(method: str, path: str, query: str, headers: dict[str, str]) -> str:
    """The S3 request kind of one HTTP request (path-style addressing: ``/bucket[/key]``)."""
    has_key = len([part for part in path.split("/") if part]) > 1
    params = parse_qs(query, keep_blank_values=True)
    if method == "GET":
        return "GET" if has_key else "LIST"
    if method == "HEAD":
        return "HEAD"
    if method == "PUT":
        return "COPY" if "x-amz-copy-source" in headers else "PUT"
    if method == "DELETE":
        return "DELETE"
    if method == "POST" and "delete" in params:
        return "DELETE_BATCH"
    if method == "POST":  # multipart upload steps
        return "PUT"
    return "OTHER"


class CountingS3Server:
    """moto's S3 on a free loopback port, counting requests. ``options`` are s3fs storage options for it."""

    def __init__(self, bucket: str = "checkpoints", latency: float = 0.0, port: int | None = None):
        self.bucket = bucket
        self.latency = latency  # seconds each counted request waits first: a real region's round trip
        self.counts: Counter[str] = Counter()
        # Every request's wall-clock time and kind since the last reset: splits a run into its phases.
        self.timeline: list[tuple[float, str]] = []
        self.in_flight = 0
        self.max_in_flight = 0  # the most counted requests answered at once since the last reset
        self._lock = threading.Lock()
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self.port = port or free_port()
        self.options = s3_options(self.port)
        # The benchmark's own reads (is there a new checkpoint yet?) go with this key and are not counted.
        self.uncounted_options = {**self.options, "key": UNCOUNTED_KEY}

    def _counting(self, app: Callable) -> Callable:
        def middleware(environ: dict[str, Any], start_response: Callable) -> Iterable[bytes]:
            headers = {k[5:].replace("_", "-").lower(): v for k, v in environ.items() if k.startswith("HTTP_")}
            if f"Credential={UNCOUNTED_KEY}/" in headers.get("authorization", ""):
                return app(environ, start_response)
            kind = request_kind(
                environ["REQUEST_METHOD"], environ.get("PATH_INFO", ""), environ.get("QUERY_STRING", ""), headers
            )
            with self._lock:
                self.counts[kind] += 1
                self.timeline.append((time.time(), kind))
                self.in_flight += 1
                self.max_in_flight = max(self.max_in_flight, self.in_flight)
            try:
                if self.latency:
                    time.sleep(self.latency)
                return app(environ, start_response)
            finally:
                with self._lock:
                    self.in_flight -= 1

        return middleware

    def start(self) -> CountingS3Server:
        from moto.server import DomainDispatcherApplication, create_backend_app
        from werkzeug.serving import make_server

        logging.getLogger("werkzeug").setLevel(logging.WARNING)  # a line per request would cost CPU beside the job
        app = self._counting(DomainDispatcherApplication(create_backend_app))
        self._server = make_server("127.0.0.1", self.port, app, threaded=True)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        import boto3

        boto3.client(
            "s3",
            endpoint_url=self.options["client_kwargs"]["endpoint_url"],
            aws_access_key_id=self.options["key"],
            aws_secret_access_key=self.options["secret"],
            region_name="us-east-1",
        ).create_bucket(Bucket=self.bucket)
        self.reset()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._thread.join(timeout=30)

    def reset(self) -> None:
        with self._lock:
            self.counts.clear()
            self.timeline.clear()
            self.max_in_flight = self.in_flight

    def snapshot(self) -> dict[str, int]:
        """Requests by kind since the last ``reset``, with ``total``."""
        with self._lock:
            counts = {kind: self.counts.get(kind, 0) for kind in KINDS}
        return {**counts, "total": sum(counts.values())}

    def between(self, start: float, end: float) -> dict[str, int]:
        """Requests by kind, with ``total``, that arrived from ``start`` to ``end`` (``time.time()`` seconds)."""
        with self._lock:
            found = Counter(kind for at, kind in self.timeline if start <= at <= end)
        counts = {kind: found.get(kind, 0) for kind in KINDS}
        return {**counts, "total": sum(counts.values())}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def s3_options(port: int) -> dict[str, Any]:
    """s3fs storage options for the loopback server on ``port``."""
    return {
        "key": "bench-key",
        "secret": "bench-secret",
        "client_kwargs": {"endpoint_url": f"http://127.0.0.1:{port}", "region_name": "us-east-1"},
    }


class S3ServerProcess:
    """The loopback S3 server in a process of its own, for a benchmark that measures its driver's CPU and time:
    in the driver's process the server's CPU, and its holds on Python's interpreter lock, would count as the
    job's. Serves only (its counts stay in that process); ``bucket`` and ``options`` as ``CountingS3Server``'s.
    The server ends when this process closes its stdin, so it never outlives a benchmark that was killed."""

    def __init__(self, bucket: str = "checkpoints", latency: float = 0.0):
        self.bucket, self.latency = bucket, latency
        self.port = free_port()
        self.options = s3_options(self.port)
        self._process: subprocess.Popen[str] | None = None

    def start(self) -> S3ServerProcess:
        argv = [sys.executable, "-m", "benchmarks.s3_requests", "--port", str(self.port), "--bucket", self.bucket]
        argv += ["--latency-ms", f"{self.latency * 1000:g}"]
        repo = str(Path(__file__).resolve().parents[1])
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [repo, os.environ.get("PYTHONPATH")]))}
        self._process = subprocess.Popen(
            argv, cwd=repo, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        ready = self._process.stdout.readline()
        if ready.strip() != "ready":
            self.stop()
            raise RuntimeError(f"the S3 server process did not start (it said {ready!r})")
        return self

    @property
    def pid(self) -> int | None:
        """The server process's id while it runs (a benchmark reads its CPU time)."""
        return self._process.pid if self._process is not None else None

    def stop(self) -> None:
        if self._process is None:
            return
        self._process.stdin.close()
        try:
            self._process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        self._process.stdout.close()


def main(argv: list[str] | None = None) -> int:
    """``S3ServerProcess``'s child: serve on ``--port`` until stdin closes."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.s3_requests")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--bucket", default="checkpoints")
    parser.add_argument("--latency-ms", type=float, default=0.0)
    args = parser.parse_args(argv)
    server = CountingS3Server(args.bucket, args.latency_ms / 1000, args.port).start()
    try:
        print("ready", flush=True)
        os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # nothing more is read from the pipe: never block on it
        sys.stdin.read()  # until the parent closes it, or dies
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
