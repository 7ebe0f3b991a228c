"""The hot routes' one trip to a worker thread, without anyio's per-call machinery (issue 25).

Starlette's `run_in_threadpool` goes through anyio: a capacity limiter, a cancel scope, run-scoped
variables and a queue hand-off per call, which py-spy showed as ~13 % of a recall's GIL samples on
the event loop's thread. On asyncio (uvicorn's loop, uvloop included) `in_thread` hands the call to
a process-wide executor of as many threads as anyio's default limiter allows, in a copy of the
caller's context (as anyio does: request log fields and spans follow it). Anything else (trio)
takes anyio's way. Unlike anyio's, a cancelled caller stops waiting at once; the call itself runs
to its end either way (a thread cannot be interrupted), and no hot route is cancelled mid-call."""

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
    return await loop.run_in_executor(_pool, functools.partial(contextvars.copy_context().run, call, *args))
