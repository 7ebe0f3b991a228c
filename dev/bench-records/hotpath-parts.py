"""Process CPU of the parts of a remember and a recall, in process (issue 25, second pass).

Usage, from a checkout with its venv active (run it in a worktree of each tree to compare them):

    python dev/bench-records/hotpath-parts.py 300 > parts.json

On a fresh embedded PostgreSQL (default settings), each part is called N times after 20 warm-up
calls and timed with `time.process_time` (all threads of this process: the onnxruntime pool too;
PostgreSQL's CPU is not included): one embedding, the key check with its rate-limit token, the
remember and recall services called directly, and whole `/healthz`, `/v1/whoami`, remember and
recall requests through the ASGI app (httpx's ASGITransport, so the client's CPU is included).
Prints one JSON object: ms of CPU per call for each part, the load average before and after.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time

from app.bench import common
from app.bench.hotpath import FACTS, recall_body, remember_body



def main(n: int) -> dict:
    import httpx

    from app.main import create_app
    from app.services import memories, recall
    from app.services.apikeys import authenticate_and_take_token, create_key
    from app.services.tenants import create_tenant

    parts: dict[str, float] = {}

    def cpu(name, call) -> None:
        for i in range(20):
            call(i)
        started = time.process_time()
        for i in range(n):
            call(i)
        parts[name] = round((time.process_time() - started) * 1000 / n, 3)

    load_before = os.getloadavg()
    with common.scratch_dir() as data_dir, \
            common.in_process_context(data_dir, pool_size=5, secret_key="parts") as (ctx, _urls):
        tenant = create_tenant(ctx, name="parts", actor=common.BENCH_ACTOR)
        token = create_key(ctx, tenant_id=tenant.id, scopes="memory:read,memory:write", actor=common.BENCH_ACTOR).token
        principal = authenticate_and_take_token(ctx, token, per_minute=0)[0]
        cpu("embedding one text", lambda i: ctx.embedder.embed([FACTS[i % 5].format(u="x", n=i)]))
        cpu("key check + rate-limit token", lambda i: authenticate_and_take_token(ctx, token, per_minute=6000))
        cpu("remember service", lambda i: memories.remember(ctx, principal, remember_body(i)))
        cpu("recall service", lambda i: recall.recall(ctx, principal, recall_body(i)))
        app = create_app(ctx.settings, ctx=ctx)

        async def requests() -> None:
            async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://parts",
                                         headers={"Authorization": f"Bearer {token}"}) as http:
                async def timed(name, call) -> None:
                    for i in range(20):
                        await call(i)
                    started = time.process_time()
                    for i in range(n):
                        await call(i)
                    parts[name] = round((time.process_time() - started) * 1000 / n, 3)

                await timed("ASGI /healthz", lambda i: _check(http.get("/healthz"), 200))
                await timed("ASGI /v1/whoami", lambda i: _check(http.get("/v1/whoami"), 200))
                await timed("ASGI remember", lambda i: _check(http.post("/v1/memories/remember", json=remember_body(i)), 201))
                await timed("ASGI recall", lambda i: _check(http.post("/v1/memories/recall", json=recall_body(i)), 200))

        asyncio.run(requests())
    return {"calls_per_part": n, "cpu_ms_per_call": parts, "loadavg_before": load_before,
            "loadavg_after": os.getloadavg()}


async def _check(pending, status: int) -> None:
    response = await pending
    assert response.status_code == status, response.text


if __name__ == "__main__":
    common.quiet_http_logs()
    print(json.dumps(main(int(sys.argv[1]) if len(sys.argv) > 1 else 300), indent=1))
