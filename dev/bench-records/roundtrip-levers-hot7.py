"""The two round trips this pass cut, measured alone (issue 25 goal 1, seventh pass): client CPU
(`time.thread_time`, the calling thread: a wait for PostgreSQL costs nothing) and wall per call.

Usage, from a checkout with its venv active (run it in a worktree of each tree to compare them):

    python dev/bench-records/roundtrip-levers-hot7.py [N] > levers.json

In process, on a fresh embedded PostgreSQL (`common.in_process_context`):

- `driver_commit`: `AuditLog.commit_on_driver` of one audit entry, N times on one tenant (what a
  lone remember's commit is, without its memory and event rows): lock + heads, then the entry and
  the COMMIT, as the tree does it: main's three round trips (BEGIN alone, the lock, the entry with
  the COMMIT), or two with `git apply dev/bench-records/driver-commit-begin-hot7.patch` (the BEGIN in one
  pipeline with the lock; measured, not kept).
- `recall_legs` (only where `search.recall_candidates` exists): recall's two candidate statements
  for a 40-memory scope in autocommit, N times each way, alternated in blocks of 50: one after the
  other (`vector_search`, `keyword_search`) and together in one pipeline (`recall_candidates`).

Prints one JSON object with p50 and mean of each, and the load average before and after.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time

from sqlalchemy.orm import Session

from app.bench import common
from app.bench.hotpath import FACTS, QUERIES


def _timed(call, n: int) -> dict[str, float]:
    cpu, wall = [], []
    for _ in range(n):
        c, w = time.thread_time(), time.perf_counter()
        call()
        cpu.append((time.thread_time() - c) * 1000)
        wall.append((time.perf_counter() - w) * 1000)
    return {"cpu_ms_mean": round(statistics.fmean(cpu), 4), "cpu_ms_p50": round(statistics.median(cpu), 4),
            "wall_ms_p50": round(statistics.median(wall), 4), "wall_ms_mean": round(statistics.fmean(wall), 4)}


def main(n: int) -> dict:
    from app.db.vectors import SqlVector
    from app.repos import search, search_keyword, search_vector
    from app.repos.memories import Scope
    from app.services.apikeys import authenticate, create_key
    from app.services.memories import remember
    from app.services.tenants import create_tenant

    report: dict = {"calls": n, "loadavg_before": os.getloadavg()}
    with common.scratch_dir() as data_dir, \
            common.in_process_context(data_dir, pool_size=3, secret_key="levers-bench",
                                      checkpoint_every=0) as (ctx, _urls):  # no checkpoint due mid-run
        tenant = create_tenant(ctx, name="levers", actor=common.BENCH_ACTOR).id
        record = (tenant, "bench.lever", common.BENCH_ACTOR, {"type": "bench", "id": "lever"}, {})

        def commit() -> None:
            assert ctx.audit.commit_on_driver(ctx.db.engine, tenant, [record], [], lambda event_id: [])

        _timed(commit, 50)
        report["driver_commit"] = _timed(commit, n)

        if hasattr(search, "recall_candidates"):
            token = create_key(ctx, tenant_id=tenant, scopes="memory:read,memory:write", actor=common.BENCH_ACTOR).token
            principal = authenticate(ctx, token)
            for i in range(40):
                user = f"user{i % 7}"
                remember(ctx, principal, {"agent_id": "lever", "type": "semantic",
                                          "content": FACTS[i % len(FACTS)].format(u=user.capitalize(), n=i)})
            scope = Scope(tenant, "lever", None, None)
            filters = {"types": None, "tags": None, "metadata": None, "fresher_than_days": None}
            query = QUERIES[1].format(u="User3")
            vec = SqlVector(ctx.embedder.embed([query])[0])

            def in_turn() -> None:
                with ctx.db.reader() as conn, Session(bind=conn) as session:
                    v = search_vector.vector_search(session, scope, filters, vec, 20, fetch=True, residual=True)
                    search_keyword.keyword_search(session, scope, filters, query, 20, vec, fetch=vec, large=False,
                                                  among=v.pool, scope_rows=v.stats.rows)

            def together() -> None:
                with ctx.db.reader() as conn, Session(bind=conn) as session:
                    search.recall_candidates(session, scope, filters, vec, query, 20, residual=True)

            for call in (in_turn, together) * 25:
                call()
            results: dict[str, list] = {"in_turn": [], "together": []}
            for _ in range(n // 50):  # alternated in blocks of 50, so drift falls on both
                results["in_turn"].append(_timed(in_turn, 50))
                results["together"].append(_timed(together, 50))
            report["recall_legs"] = {
                way: {key: round(statistics.fmean(block[key] for block in blocks), 4) for key in blocks[0]}
                for way, blocks in results.items()}
    report["loadavg_after"] = os.getloadavg()
    report["command"] = f"python dev/bench-records/roundtrip-levers-hot7.py {n}"
    return report


if __name__ == "__main__":
    print(json.dumps(main(int(sys.argv[1]) if len(sys.argv) > 1 else 1000), indent=2))
