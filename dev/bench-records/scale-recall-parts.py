"""Where a large scope's recall spends its time, statement by statement, in process (issue 25 goal 3).

Usage, from a checkout with its venv active, on a load kept by `memwarden bench scale --data-dir DIR`
(a checkout older than migration 0034 needs `python dev/bench-records/scale-downgrade.py DIR` first):

    python dev/bench-records/scale-recall-parts.py DIR AGENT[,AGENT…] [QUESTIONS] > parts.json

For each agent, QUESTIONS (default 150) recalls of a random stored memory's question (seeded; the
first 5 not counted) through `app.services.recall.recall` on this process's own services, each
search statement timed (wall, `time.perf_counter`, round trip included) and named by what it is:
the vector statement, the keyword leg's words, tiers, shortlist rows, full one-word match, the word
counts; `total` is the whole recall (the query embedding included). Prints p50 / p95 / max per
kind and the five slowest questions with their parts, and, where this checkout has the codes held
in process, what reading a copy costs (wall and CPU ms, four reads, the first cold) and its bytes a
row. The load average is printed before and after; wall times on a shared box are only comparable
within one run or alternating runs.
"""

import json
import os
import random
import sys
import time
from collections import defaultdict
from pathlib import Path

from sqlalchemy.orm import Session

from app.bench import scale_data
from app.config import Settings
from app.repos import search_sql
from app.services import recall
from app.services.apikeys import authenticate
from app.services.context import AppContext


def kind(sql: str) -> str:
    if "search_changed_at" in sql:
        return "vector: codes held in process"
    if "<~>" in sql:
        return "vector: code scan"
    if "md5(m.content)" in sql:
        return "vector: HNSW"
    if "count(*) OVER ()" in sql:
        return "vector: full scan"
    if "unnest(%(among)s" in sql:
        return "keyword: shortlist rows"
    if sql.startswith("SELECT memwarden_scoped_lexemes"):
        return "keyword: words"
    if "EXISTS" in sql and "%(pair_0)s" in sql:
        return "keyword: every word exists"
    if "%(pair_" in sql:
        return "keyword: tier"
    if "ts_rank_cd" in sql:
        return "keyword: every one-word match"
    if "unnest(%(words)s" in sql:
        return "keyword: word counts"
    return "other: " + sql[:40]


def main() -> None:
    root, agents = Path(sys.argv[1]), sys.argv[2].split(",")
    questions = int(sys.argv[3]) if len(sys.argv) > 3 else 150
    state = json.loads((root / "bench-scale.json").read_text())
    cfg = state["config"]
    rows = scale_data.plan(cfg["seed"], cfg["memories"], cfg["agents"], cfg["users_per_agent"], cfg["big_agent_memories"])
    ctx = AppContext.open(Settings(data_dir=root / ".memwarden", rate_limit_per_minute=0,
                                   read_budget_per_key=10**9, read_budget_per_agent=10**9))
    principal = authenticate(ctx, state["token"])
    parts: dict[str, float] = defaultdict(float)
    execute = search_sql.execute

    def timed(session, sql, params):
        started = time.perf_counter()
        result = execute(session, sql, params)
        parts[kind(sql)] += (time.perf_counter() - started) * 1000
        return result

    search_sql.execute = timed
    report = {"load_before": os.getloadavg(), "agents": {}}
    rng = random.Random(3)
    try:
        for agent in agents:
            per = []
            for row in rng.sample([r for r in rows if r.agent == agent], questions):
                parts.clear()
                started = time.perf_counter()
                recall.recall(ctx, principal, {"agent_id": agent, "query": row.memory.question, "k": 5})
                parts["total"] = (time.perf_counter() - started) * 1000
                per.append((dict(parts), row.memory.question))
            per = sorted(per[5:], key=lambda p: p[0]["total"])
            keys = sorted({k for p, _ in per for k in p})
            pick = (lambda k, f: round(sorted(p.get(k, 0.0) for p, _ in per)[int(f * (len(per) - 1))], 2))
            report["agents"][agent] = {
                "questions": len(per),
                "ms_p50_p95_max": {k: [pick(k, 0.5), pick(k, 0.95), pick(k, 1.0)] for k in keys},
                "slowest": [{"question": q, **{k: round(v, 1) for k, v in p.items()}} for p, q in per[-5:]]}
            copy = _copy_cost(ctx, principal.tenant_id, agent)
            if copy:
                report["agents"][agent]["copy"] = copy
    finally:
        search_sql.execute = execute
        ctx.close()
    report["load_after"] = os.getloadavg()
    print(json.dumps(report, indent=1))


def _copy_cost(ctx, tenant_id: str, agent: str) -> dict | None:
    try:
        from app.repos import code_cache
    except ImportError:  # a checkout without the codes held in process
        return None
    reads = []
    for _ in range(4):
        with ctx.db.reader() as conn, Session(bind=conn) as session:
            wall, cpu = time.perf_counter(), time.process_time()
            codes = code_cache.load(session, tenant_id, agent)
            reads.append([round((time.perf_counter() - wall) * 1000, 1), round((time.process_time() - cpu) * 1000, 1)])
    size = codes.ids.nbytes + codes.bits.nbytes + codes.users.nbytes
    return {"rows": len(codes.ids), "reads_wall_cpu_ms": reads, "bytes_per_row": round(size / max(1, len(codes.ids)), 1)}


if __name__ == "__main__":
    main()
