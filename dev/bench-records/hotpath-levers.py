"""Process CPU of the pieces the third and fourth hot-path passes changed (issue 25), in process.

Usage, from a checkout with its venv active (run it in a worktree of each tree to compare them):

    python dev/bench-records/hotpath-levers.py 1000 > levers.json

On a fresh embedded PostgreSQL holding 150 remembered facts (7 users of one agent), each piece is
called N times after 20 warm-up calls and timed with `time.process_time` (this process only;
PostgreSQL's CPU is not included):

- packing a query vector for binding (`SqlVector`: pgvector's text before the pass, its
  binary form after);
- screening's nearest live neighbours of a write (an autocommit read and `search_vector.vector_search`
  with the rows, as `screening.screen_write` runs it);
- recall's keyword candidates with their rows and distances (`search_keyword.keyword_search`);
- a whole `memories.decide` (screening with its neighbour read, and the policy);
- committing one decided write (`group_commit`, alone: the chain lock, the audit entry, the row,
  entry and event pipelined with the COMMIT), the writes prepared and decided before the clock:
  as the tree's `remember` commits it (since the fourth pass on the driver connection,
  `memories.commit_on_driver`), and through a Session (`memories.write_decided`) in either tree.

Prints one JSON object: ms of CPU per call for each piece, the load average before and after.
"""

from __future__ import annotations

import json
import os
import sys
import time

from sqlalchemy.orm import Session

from app.bench import common
from app.bench.hotpath import FACTS


def main(n: int) -> dict:
    from app.core.ids import new_id
    from app.core.timefmt import utcnow
    from app.db.vectors import SqlVector
    from app.repos import search_keyword, search_vector
    from app.repos.memories import Scope
    from app.services import group_commit, memories, screening
    from app.services.apikeys import authenticate_and_take_token, create_key
    from app.services.tenants import create_tenant

    parts: dict[str, float] = {}

    def cpu(name, call) -> None:
        for i in range(20):
            call(i)
        started = time.process_time()
        for i in range(n):
            call(i)
        parts[name] = round((time.process_time() - started) * 1000 / n, 4)

    def body(i: int) -> dict:
        user = f"user{i % 7}"
        return {"agent_id": "hot", "user_id": user, "type": "semantic", "content": FACTS[i % 5].format(u=user, n=i)}

    load_before = os.getloadavg()
    with common.scratch_dir() as data_dir, \
            common.in_process_context(data_dir, pool_size=5, secret_key="levers") as (ctx, _urls):
        tenant = create_tenant(ctx, name="levers", actor=common.BENCH_ACTOR)
        token = create_key(ctx, tenant_id=tenant.id, scopes="memory:read,memory:write", actor=common.BENCH_ACTOR).token
        principal = authenticate_and_take_token(ctx, token, per_minute=0)[0]
        for i in range(150):
            memories.remember(ctx, principal, body(i))
        values = ctx.embedder.embed(["what does user1 eat"])[0].tolist()
        vec = SqlVector(values)

        def scope(i: int) -> Scope:
            return Scope(tenant.id, "hot", f"user{i % 7}")

        def neighbours(i: int) -> None:
            with ctx.db.reader() as conn, Session(bind=conn, expire_on_commit=False) as session:
                search_vector.vector_search(session, scope(i), {"types": screening.TEXT_TYPES}, vec, screening.NEIGHBOURS,
                                            fetch=True)

        def keywords(i: int) -> None:
            with ctx.db.reader() as conn, Session(bind=conn, expire_on_commit=False) as session:
                search_keyword.keyword_search(session, scope(i), {}, "what does user1 eat", 20, vec, fetch=vec)

        rules = memories.rules_for(ctx, principal)
        now = utcnow()
        write = memories.prepare_remember(ctx, principal, body(1), rules, memory_id=new_id("mem"), created_at=now,
                                          updated_at=now, precheck=False, future_expiry=True)

        def decide(i: int) -> None:
            with ctx.db.reader() as conn, Session(bind=conn, expire_on_commit=False) as session:
                memories.decide(ctx, session, principal, write, vec)

        decided = []
        for i in range(2 * (n + 20)):
            now = utcnow()
            fresh = memories.prepare_remember(ctx, principal, body(i), rules, memory_id=new_id("mem"), created_at=now,
                                              updated_at=now, precheck=False, future_expiry=True)
            with ctx.db.reader() as conn, Session(bind=conn, expire_on_commit=False) as session:
                decided.append(memories.decide(ctx, session, principal, fresh, vec))
        committer = group_commit.committer(ctx)

        # The tree's own remember path: since the fourth pass, on the driver connection
        # (`memories.commit_on_driver`); before it (no such function), through a Session.
        direct = getattr(memories, "commit_on_driver", None)
        extra = {} if direct is None else {"direct": direct}
        cpu("commit one decided write (group commit, alone)",
            lambda i: committer.commit(ctx, decided.pop(), memories.write_decided, **extra))
        cpu("commit one decided write through a Session (group commit, alone)",
            lambda i: committer.commit(ctx, decided.pop(), memories.write_decided))
        cpu("pack a query vector for binding (SqlVector)", lambda i: SqlVector(values))
        cpu("screening's nearest neighbours (read + vector_search)", neighbours)
        cpu("recall's keyword candidates (read + keyword_search)", keywords)
        cpu("decide a write (screening + policy)", decide)
    return {"calls_per_part": n, "cpu_ms_per_call": parts, "loadavg_before": load_before,
            "loadavg_after": os.getloadavg()}


if __name__ == "__main__":
    common.quiet_http_logs()
    print(json.dumps(main(int(sys.argv[1]) if len(sys.argv) > 1 else 1000), indent=1))
