"""`app.api.hop.in_thread`, the recall and remember routes' thread hop: the call's result or error
comes back, it runs in a copy of the caller's context, and a cancelled caller unwinds only once the
call has ended (as anyio's hop), so its clean-up never runs beside the call."""

import asyncio
import contextvars
import threading
import time

import pytest

from app.api.hop import in_thread

REQUEST = contextvars.ContextVar("request", default=None)


def test_the_result_and_the_error_come_back_from_another_thread():
    def where():
        return threading.get_ident()

    def fails():
        raise ValueError("from the thread")

    async def main():
        assert await in_thread(where) != threading.get_ident()
        with pytest.raises(ValueError, match="from the thread"):
            await in_thread(fails)

    asyncio.run(main())


def test_the_call_sees_the_callers_context_and_cannot_change_it():
    def read_and_set():
        seen = REQUEST.get()
        REQUEST.set("changed in the thread")
        return seen

    async def main():
        REQUEST.set("req_1")
        assert await in_thread(read_and_set) == "req_1"
        assert REQUEST.get() == "req_1"

    asyncio.run(main())


def test_a_cancelled_caller_unwinds_only_after_the_call_ended():
    ended = threading.Event()

    def slow():
        time.sleep(0.2)
        ended.set()

    async def main():
        task = asyncio.create_task(in_thread(slow))
        await asyncio.sleep(0.02)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert ended.is_set()

    asyncio.run(main())
