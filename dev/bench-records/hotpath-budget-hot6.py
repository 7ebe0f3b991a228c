"""The request thread's CPU per remember and recall, piece by piece (issue 25 goal 1, sixth pass).

Usage, from a checkout with its venv active:

    python dev/bench-records/hotpath-budget-hot6.py 300 > budget.json
    python dev/bench-records/hotpath-budget-hot6.py 300 --no-early   # every embedding on the request thread

The whole ASGI app runs in process on a fresh embedded PostgreSQL (httpx's ASGITransport, as
`hotpath-parts.py`); N remembers then N recalls after 30 warm-up pairs. Named functions of the
request path are wrapped, before the app is built, by a timer of the calling thread's CPU
(`time.thread_time`, so a wait for PostgreSQL or for another thread costs nothing), inclusive of
what they call; each row is ms of CPU per request and calls per request. The wrapper itself costs
~1-2 µs a call. The embedding call is timed on whichever thread makes it (the early-embedding thread, or the
request's with `--no-early`), without onnxruntime's pool thread (see `hotpath-threads-hot6.py`).
Prints one JSON object with the load average before and after.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import sys
import time
from collections import defaultdict

from app.bench import common
from app.bench.hotpath import recall_body, remember_body

# (module, attribute or Class.method, label). Inclusive: a row contains the rows it calls.
PIECES = [
    ("app.services.memories", "remember", "remember service (all of it)"),
    ("app.services.recall", "recall", "recall service (all of it)"),
    ("app.services.apikeys", "authenticate_and_take_token", "key check + rate-limit token"),
    ("app.api.jsonio", "json_body", "body: parse + JSON schema"),
    ("app.services.memories", "prepare_remember", "prepare (validation, redaction, row)"),
    ("app.services.early_embedding", "embed", "embedding: take the early vector, or embed here"),
    ("app.embeddings", "BatchingEmbedder.embed", "embedding call on whichever thread (ORT pool not incl.)"),
    ("app.services.memories", "decide", "decide (screening + policy)"),
    ("app.services.screening", "screen_write", "screening (neighbours + rules)"),
    ("app.repos.search_vector", "vector_search", "vector search statement (neighbours / recall)"),
    ("app.repos.search_keyword", "keyword_search", "keyword search statement (recall)"),
    ("app.core.screening", "screen", "screening rules + classifier"),
    ("app.services.group_commit", "GroupCommitter.commit", "group commit (all of it)"),
    ("app.services.memories", "commit_on_driver", "driver commit"),
    ("app.repos.audit_log", "lock_and_read_heads_on", "chain lock + heads statement"),
    ("app.services.audit", "AuditLog.build_rows", "audit entry: data, hash, rows"),
    ("app.services.audit", "commit_pipelined", "3 INSERTs + COMMIT pipeline"),
    ("app.services.read_budgets", "account", "read budget"),
    ("app.services.read_audit", "note_read", "read audit note"),
]

_cpu: dict[str, float] = defaultdict(float)
_calls: dict[str, int] = defaultdict(int)


def _timed(label: str, func):
    def wrapper(*args, **kwargs):
        started = time.thread_time()
        try:
            return func(*args, **kwargs)
        finally:
            _cpu[label] += time.thread_time() - started
            _calls[label] += 1
    wrapper.__wrapped__ = func
    wrapper.__name__ = getattr(func, "__name__", label)
    return wrapper


def _wrap_all() -> list[str]:
    """Wrap each piece where it is defined and wherever a module imported it by name."""
    missing = []
    for module_name, attr, label in PIECES:
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            missing.append(label)
            continue
        owner_name, _, name = attr.rpartition(".")
        owner = getattr(module, owner_name) if owner_name else module
        original = getattr(owner, name, None)
        if original is None:
            missing.append(label)
            continue
        if owner_name:  # a method (a context manager's generator function stays one)
            setattr(owner, name, _timed(label, original))
            continue
        wrapped = _timed(label, original)
        for other in list(sys.modules.values()):
            if getattr(other, "__name__", "").startswith("app") and getattr(other, name, None) is original:
                setattr(other, name, wrapped)
    return missing



def main(n: int, early: bool = True) -> dict:
    import httpx

    missing = _wrap_all()
    if not early:  # every request embeds on its own thread, after its key's check
        from app.services import early_embedding
        early_embedding.start = lambda *args, **kwargs: None
    from app.main import create_app
    from app.services.apikeys import create_key
    from app.services.tenants import create_tenant

    load_before = os.getloadavg()
    report: dict = {"requests": n, "early_embedding": early, "not_found": missing, "per_request": {}}
    with common.scratch_dir() as data_dir, \
            common.in_process_context(data_dir, pool_size=5, secret_key="budget") as (ctx, _urls):
        tenant = create_tenant(ctx, name="budget", actor=common.BENCH_ACTOR)
        token = create_key(ctx, tenant_id=tenant.id, scopes="memory:read,memory:write", actor=common.BENCH_ACTOR).token
        app = create_app(ctx.settings, ctx=ctx)

        async def drive() -> None:
            async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://budget",
                                         headers={"Authorization": f"Bearer {token}"}) as http:
                for i in range(30):
                    (await http.post("/v1/memories/remember", json=remember_body(i))).raise_for_status()
                    (await http.post("/v1/memories/recall", json=recall_body(i))).raise_for_status()
                for op, body in (("remember", remember_body), ("recall", recall_body)):
                    _cpu.clear()
                    _calls.clear()
                    started = time.process_time()
                    for i in range(n):
                        response = await http.post(f"/v1/memories/{op}", json=body(30 + i))
                        assert response.status_code in (200, 201), response.text
                    total = (time.process_time() - started) * 1000 / n
                    rows = {label: {"cpu_ms": round(_cpu[label] * 1000 / n, 3), "calls": round(_calls[label] / n, 2)}
                            for _, _, label in PIECES if _calls[label]}
                    rows["whole process, client included (process_time)"] = {"cpu_ms": round(total, 3)}
                    report["per_request"][op] = rows

        asyncio.run(drive())
    report["loadavg_before"], report["loadavg_after"] = load_before, os.getloadavg()
    report["command"] = f"python dev/bench-records/hotpath-budget-hot6.py {n}" + ("" if early else " --no-early")
    return report


if __name__ == "__main__":
    common.quiet_http_logs()
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    print(json.dumps(main(int(args[0]) if args else 300, early="--no-early" not in sys.argv), indent=1))
