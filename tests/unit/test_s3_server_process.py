"""The throughput benchmark's S3 server in a process of its own (``benchmarks.s3_requests.S3ServerProcess``)."""

from __future__ import annotations

import os

import fsspec
import psutil

from benchmarks.s3_requests import S3ServerProcess


def test_the_server_serves_from_its_own_process_and_ends_with_its_stdin():
    server = S3ServerProcess(bucket="bench").start()
    child = psutil.Process(server._process.pid)
    try:
        assert child.pid != os.getpid() and child.is_running()
        fs = fsspec.filesystem("s3", **server.options, skip_instance_cache=True)
        fs.pipe(f"{server.bucket}/job/_metadata", b"{}")
        assert fs.cat(f"{server.bucket}/job/_metadata") == b"{}"
    finally:
        server.stop()
    assert server._process.returncode == 0  # it ended on its own once its stdin closed, not killed
    assert not child.is_running()
