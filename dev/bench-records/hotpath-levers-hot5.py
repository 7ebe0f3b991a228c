"""Process CPU of the pieces the fifth hot-path pass changed (issue 25), both ways in one process.

Usage, from a checkout of the branch with its venv active:

    python dev/bench-records/hotpath-levers-hot5.py 2000 > levers.json

Each lever's old and new way are timed in the same process, alternated over `ROUNDS` rounds of N
calls after 200 warm-up calls (`time.process_time`: every thread of this process, PostgreSQL's CPU
not included), on a fresh embedded PostgreSQL:

- a thread hop as the recall and remember routes take it: Starlette's `run_in_threadpool` (anyio)
  against `app.api.hop.in_thread`, on uvloop as `memwarden serve` runs, for a call that does nothing;
- recall's read budget: an autocommit read, closed, then the budget taken on a connection of its
  own (main's recall: a second pool checkout) against the budget taken on the read's connection;
- the middleware stack: `/healthz` through the whole app against the router alone, driven by a bare
  ASGI call (no HTTP client), and `SecurityHeaders` alone around an app that answers at once;
- the event loop thread's CPU per whole recall through the app (`time.thread_time` on that thread:
  middleware, routing, the body, the early embedding's start, the hop's loop side, the response; the
  work in the worker threads not included), with the route's hop as committed and with
  `run_in_threadpool` put back in its place (`app.api.memories.in_thread` swapped), over 60
  remembered facts.

Prints one JSON object: ms of CPU per call for each way in each round, the load average before and
after.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time

from app.bench import common

ROUNDS = 4


async def _timed(n: int, call) -> float:
    for _ in range(200):
        await call()
    started = time.process_time()
    for _ in range(n):
        await call()
    return round((time.process_time() - started) * 1000 / n, 5)


def main(n: int) -> dict:
    import uvloop
    from starlette.concurrency import run_in_threadpool

    import app.api.memories as memory_routes
    from app.api.hop import in_thread
    from app.bench.hotpath import FACTS, QUERIES
    from app.services import memories
    from app.main import create_app
    from app.middleware import SecurityHeaders
    from app.services import read_budgets
    from app.services.apikeys import authenticate_and_take_token, create_key
    from app.services.tenants import create_tenant

    rounds: list[dict[str, float]] = []
    load_before = os.getloadavg()
    with common.scratch_dir() as data_dir, \
            common.in_process_context(data_dir, pool_size=5, secret_key="levers") as (ctx, _urls):
        tenant = create_tenant(ctx, name="levers", actor=common.BENCH_ACTOR)
        token = create_key(ctx, tenant_id=tenant.id, scopes="memory:read,memory:write", actor=common.BENCH_ACTOR).token
        principal = authenticate_and_take_token(ctx, token, per_minute=0)[0]
        app = create_app(ctx.settings, ctx=ctx)
        ids = [f"mem_levers{i}" for i in range(5)]

        def nothing() -> None:
            return None

        async def budget(own_connection: bool) -> None:
            if own_connection:  # main's recall: its read closed, then a checkout for the budget
                with ctx.db.reader():
                    pass
                read_budgets.take(ctx, principal, "hot", ids)
            else:
                with ctx.db.reader() as conn:
                    read_budgets.take(ctx, principal, "hot", ids, conn=conn)

        def scope(path: str) -> dict:
            return {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET",
                    "scheme": "http", "path": path, "raw_path": path.encode(), "root_path": "", "query_string": b"",
                    "headers": [(b"host", b"levers"), (b"authorization", f"Bearer {token}".encode())],
                    "client": ("127.0.0.1", 1), "server": ("levers", 80), "app": app}

        async def receive() -> dict:
            return {"type": "http.request", "body": b"", "more_body": False}

        async def drop(message: dict) -> None:
            return None

        async def answer(scope_: dict, receive_, send) -> None:
            await send({"type": "http.response.start", "status": 200,
                        "headers": [(b"content-type", b"application/json"), (b"content-length", b"2")]})
            await send({"type": "http.response.body", "body": b"{}"})

        headers_only = SecurityHeaders(answer)
        for i in range(60):
            user = f"user{i % 7}"
            memories.remember(ctx, principal, {"agent_id": "hot", "user_id": user, "type": "semantic",
                                               "content": FACTS[i % 5].format(u=user, n=i)})
        counter = iter(range(10**9))

        async def recall() -> None:
            i = next(counter)
            body = json.dumps({"agent_id": "hot", "user_id": f"user{i % 7}", "k": 5,
                               "query": QUERIES[i % 5].format(u=f"user{i % 7}")}).encode()
            sent: list[dict] = []
            delivered = False

            async def receive_body() -> dict:
                nonlocal delivered
                if not delivered:
                    delivered = True
                    return {"type": "http.request", "body": body, "more_body": False}
                await asyncio.sleep(3600)  # the client never disconnects
                return {"type": "http.disconnect"}

            async def keep(message: dict) -> None:
                sent.append(message)

            request_scope = {**scope("/v1/memories/recall"), "method": "POST"}
            request_scope["headers"] = [*request_scope["headers"], (b"content-type", b"application/json")]
            await app(request_scope, receive_body, keep)
            assert sent[0]["status"] == 200, sent

        async def loop_thread_cpu(hop, n_calls: int) -> float:
            memory_routes.in_thread = hop
            try:
                for _ in range(20):
                    await recall()
                started = time.thread_time()
                for _ in range(n_calls):
                    await recall()
                return round((time.thread_time() - started) * 1000 / n_calls, 5)
            finally:
                memory_routes.in_thread = in_thread

        async def request(through, path: str) -> None:
            await through(scope(path), receive, drop)

        async def one_round() -> dict[str, float]:
            out: dict[str, float] = {}
            out["thread hop, anyio run_in_threadpool"] = await _timed(n, lambda: run_in_threadpool(nothing))
            out["thread hop, hop.in_thread"] = await _timed(n, lambda: in_thread(nothing))
            out["read budget, own checkout"] = await _timed(n // 4, lambda: budget(True))
            out["read budget, the read's connection"] = await _timed(n // 4, lambda: budget(False))
            out["/healthz, whole stack"] = await _timed(n, lambda: request(app, "/healthz"))
            out["/healthz, router alone"] = await _timed(n, lambda: request(app.router, "/healthz"))
            out["SecurityHeaders alone"] = await _timed(n, lambda: request(headers_only, "/v1/whoami"))
            out["bare answer"] = await _timed(n, lambda: request(answer, "/v1/whoami"))
            out["recall, loop thread's CPU, run_in_threadpool"] = await loop_thread_cpu(run_in_threadpool, n // 10)
            out["recall, loop thread's CPU, hop.in_thread"] = await loop_thread_cpu(in_thread, n // 10)
            return out

        async def measure() -> None:
            await request(app, "/v1/whoami")  # builds the middleware stack
            for _ in range(ROUNDS):
                rounds.append(await one_round())

        uvloop.run(measure())
    return {"calls_per_part": n, "cpu_ms_per_call_by_round": rounds, "loadavg_before": load_before,
            "loadavg_after": os.getloadavg()}


if __name__ == "__main__":
    common.quiet_http_logs()
    print(json.dumps(main(int(sys.argv[1]) if len(sys.argv) > 1 else 2000), indent=1))
