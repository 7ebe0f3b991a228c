"""`PYTHONPATH=<tree> python dev/bench-records/web-approve.py [N]`: round trips, pool checkouts (sessions)
and thread-pool hops of a reviewer's approval from the change page (GET /review/{id}, then the
htmx POST /review/{id}/approve), in process, on a fresh embedded PostgreSQL, for the tree on
PYTHONPATH (dev/bench-records/web-approve.json holds the base commit's numbers and this branch's)."""

import asyncio
import json
import re
import statistics
import sys
import time
from collections import Counter

from sqlalchemy import event

from app.bench import common
from app.bench.hotpath import StatementCounter

N = int(sys.argv[1]) if len(sys.argv) > 1 else 20
WARMUP = 5


async def drive(app, ctx, token, counter, checkouts, hops):
    import anyio.to_thread
    import httpx

    real = anyio.to_thread.run_sync

    async def counted(*args, **kwargs):
        if counter.active:
            hops["n"] += 1
        return await real(*args, **kwargs)

    anyio.to_thread.run_sync = counted
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://bench") as http:
        staged = []
        for i in range(N + WARMUP):
            r = await http.post("/v1/memories/remember", headers={"Authorization": f"Bearer {token}"},
                                json={"agent_id": "web", "user_id": "u", "type": "semantic", "approval_required": True,
                                      "content": f"Reviewer fact number {i} about the web bench."})
            assert r.status_code == 202, r.text
            staged.append(r.json()["change_id"])
        page = await http.get("/login")
        csrf = re.search(r'name="csrf_token" value="([^"]+)"', page.text).group(1)
        r = await http.post("/login", data={"username": "benchrev", "password": "bench-password-1",
                                            "next": "/review", "csrf_token": csrf})
        assert r.status_code in (200, 303), r.status_code
        out = {}
        for name in ("detail", "approve"):
            out[name] = {"trips": [], "sessions": [], "hops": [], "cpu": [], "kinds": Counter()}
        for i, change_id in enumerate(staged):
            timed = i >= WARMUP
            for name in ("detail", "approve"):
                counter.take()
                checkouts["n"] = 0
                hops["n"] = 0
                counter.active = timed
                started = time.process_time()
                if name == "detail":
                    r = await http.get(f"/review/{change_id}")
                    assert r.status_code == 200, r.status_code
                    seen = re.search(r'name="seen_state" value="([^"]+)"', r.text)
                    csrf = re.search(r'name="csrf_token" value="([^"]+)"', r.text).group(1)
                else:
                    data = {"csrf_token": csrf}
                    if seen:
                        data["seen_state"] = seen.group(1)
                    r = await http.post(f"/review/{change_id}/approve", data=data, headers={"HX-Request": "true"})
                    assert r.status_code == 200 and 'data-status="approved"' in r.text, (r.status_code, r.text[:300])
                cpu = (time.process_time() - started) * 1000
                counter.active = False
                taken = counter.take()
                if timed:
                    o = out[name]
                    o["trips"].append(sum(taken.values()))
                    o["sessions"].append(checkouts["n"])
                    o["hops"].append(hops["n"])
                    o["cpu"].append(cpu)
                    o["kinds"].update(taken)
    return {name: {"requests": len(o["trips"]),
                   "round_trips_per_request": round(statistics.fmean(o["trips"]), 2),
                   "pool_checkouts_per_request": round(statistics.fmean(o["sessions"]), 2),
                   "thread_pool_hops_per_request": round(statistics.fmean(o["hops"]), 2),
                   "cpu_ms_per_request": {"mean": round(statistics.fmean(o["cpu"]), 3),
                                          "p50": round(common.percentile(o["cpu"], 50), 3)},
                   "round_trips_by_kind": {k: round(v / len(o["trips"]), 2) for k, v in o["kinds"].most_common()}}
            for name, o in out.items()}


def main():
    from app.main import create_app
    from app.services.apikeys import create_key
    from app.services.tenants import create_tenant
    from app.services.users import create_user

    with common.scratch_dir() as data_dir, \
            common.in_process_context(data_dir, pool_size=5, secret_key="web-bench") as (ctx, _urls):
        counter = StatementCounter(ctx.db.engine)
        checkouts = {"n": 0}
        hops = {"n": 0}

        def on_checkout(*_):
            if counter.active:
                checkouts["n"] += 1
        event.listen(ctx.db.engine.pool, "checkout", on_checkout)
        tenant = create_tenant(ctx, name="webbench", actor=common.BENCH_ACTOR)
        token = create_key(ctx, tenant_id=tenant.id, scopes="memory:read,memory:write", actor=common.BENCH_ACTOR).token
        create_user(ctx, username="benchrev", password="bench-password-1", tenant_id=tenant.id, role="reviewer",
                    actor=common.BENCH_ACTOR)
        app = create_app(ctx.settings.with_changes(rate_limit_per_minute=0), ctx=ctx)
        result = asyncio.run(drive(app, ctx, token, counter, checkouts, hops))
    print(json.dumps({"benchmark": "web change page: detail + htmx approve", **result,
                      "machine": common.machine()}, indent=2))


if __name__ == "__main__":
    main()
