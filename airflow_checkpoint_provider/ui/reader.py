"""Storage reads for the checkpoint pages, in a process of their own.

Reading a job with tens of thousands of checkpoints parses many ``_metadata`` files. Done in the API
server's process, even in a thread, that work holds the interpreter lock and slows every other page; in a
separate process it only costs the pickled result. Reader processes start on first use (spawned, so
nothing of the server's threads is copied) and are replaced if one dies or hangs.
"""

from __future__ import annotations

import asyncio
import multiprocessing
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any

# Two readers: one slow page (a big job on a slow store) does not hold up every other page.
READERS = 2
# A read that takes longer is given up (its reader is replaced): a hung store must not hang the pages.
READ_TIMEOUT_SECONDS = 120.0

_pool: ProcessPoolExecutor | None = None


def _executor() -> ProcessPoolExecutor:
    global _pool
    if _pool is None:
        _pool = ProcessPoolExecutor(max_workers=READERS, mp_context=multiprocessing.get_context("spawn"))
    return _pool


def _replace(broken: ProcessPoolExecutor) -> None:
    global _pool
    if _pool is broken:  # another request may have replaced it already
        _pool = None
        broken.shutdown(wait=False, cancel_futures=True)
        for process in list(getattr(broken, "_processes", {}).values()):
            process.kill()  # a reader stuck in a hung read does not end on its own


async def read(function: Callable[..., Any], *args: Any, retry: bool = True) -> Any:
    """``function(*args)`` in a reader process (``function`` must be importable by name).

    A reader that died (killed, out of memory) is replaced and, with ``retry``, the read done again; a write
    (``retry=False``) is not repeated. Raises ``TimeoutError`` after ``READ_TIMEOUT_SECONDS``.
    """
    loop = asyncio.get_running_loop()
    for attempt in (1, 2):
        pool = _executor()
        try:
            return await asyncio.wait_for(loop.run_in_executor(pool, function, *args), READ_TIMEOUT_SECONDS)
        except BrokenProcessPool:
            _replace(pool)
            if not retry or attempt == 2:
                raise
        except TimeoutError:
            _replace(pool)
            raise
    raise AssertionError("unreachable")
