"""The hot routes' one trip to a worker thread, without anyio's per-call machinery.

Starlette's `run_in_threadpool` goes through anyio: a capacity limiter, a cancel scope, run-scoped
variables and a queue hand-off per call (a fifth of a recall's GIL samples under py-spy, ~37 µs of
CPU a hop measured alone; `dev/bench-records/hotpath-levers-hot5.py`). On asyncio (uvicorn's loop, uvloop included)
`in_thread` hands the call to a process-wide executor of as many threads as anyio's default limiter allows, in a copy
of the caller's context (as anyio does: request log fields and spans follow it). Anything else (trio)
takes anyio's way. As with anyio's, a cancelled caller waits for the call to end (a thread cannot
be interrupted) and then raises its cancellation."""

from __future__ import annotations

import asyncio
import contextvars
import functools
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, TypeVar

from starlette.concurrency import run_in_threadpool

T = TypeVar("T")
MAX_THREADS = 40  # anyio's default thread limiter's, which `run_in_threadpool` shares
_pool = ThreadPoolExecutor(max_workers=MAX_THREADS, thread_name_prefix="request")


async def in_thread(call: Callable[..., T], *args: Any) -> T:
    """`call(*args)` on a worker thread, in a copy of the current context; its result or exception."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:  # not on asyncio (trio)
        return await run_in_threadpool(call, *args)
    future = loop.run_in_executor(_pool, functools.partial(contextvars.copy_context().run, call, *args))
    try:
        return await asyncio.shield(future)
    except asyncio.CancelledError:
        # As anyio's hop does: a cancelled caller waits for the call to end before it unwinds,
        # so its clean-up (a unit of work's rollback) never runs beside the call on one connection.
        while not future.done():
            try:
                await asyncio.wait([future])
            except asyncio.CancelledError:  # cancelled again (anyio re-delivers): keep waiting
                continue
        raise
