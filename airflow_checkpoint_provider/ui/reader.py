"""Storage reads for the checkpoint pages, in a process of their own.

Reading a job with tens of thousands of checkpoints parses many ``_metadata`` files. Done in the API
server's process, even in a thread, that work holds the interpreter lock and slows every other page; in a
separate process it only costs the pickled result. One reader process, started on first use (spawned, so
nothing of the server's threads is copied) and started again if it dies.
"""

from __future__ import annotations

import asyncio
import multiprocessing
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any

_pool: ProcessPoolExecutor | None = None


def _executor() -> ProcessPoolExecutor:
    global _pool
    if _pool is None:
        _pool = ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn"))
    return _pool


async def read(function: Callable[..., Any], *args: Any) -> Any:
    """``function(*args)`` in the reader process (``function`` must be importable by name)."""
    global _pool
    loop = asyncio.get_running_loop()
    try:
        return await loop.run_in_executor(_executor(), function, *args)
    except BrokenProcessPool:
        _pool = None  # the reader died (killed, out of memory): start a new one for this and later reads
        return await loop.run_in_executor(_executor(), function, *args)
