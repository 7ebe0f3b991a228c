"""`memwarden bench scale`'s measurements on a loaded database: recall over HTTP (latency, found@k),
and in process each vector path against an exact scan, EXPLAIN plans of recall's statements, and
how many of the recall counters' row updates were HOT. The command itself: `app.bench.scale`.
"""

from __future__ import annotations

import re
from typing import Any

from app.bench import common
from app.bench.scale_data import Row


def measure(base_url: str, token: str, targets: list[Row], warmup: list[Row], k: int = 5) -> dict[str, Any]:
    """Recall the question of each target memory; client-side latency, found@k, path-agnostic."""
    with common.client(base_url, token) as http:
        for row in warmup:
            common.timed_post(http, "/v1/memories/recall", {"agent_id": row.agent, "query": row.memory.question, "k": k})
        client_ms, server_ms, found, found_id, empty = [], [], 0, 0, 0
        for row in targets:
            elapsed, body = common.timed_post(http, "/v1/memories/recall",
                                              {"agent_id": row.agent, "query": row.memory.question, "k": k})
            client_ms.append(elapsed)
            server_ms.append(float(body.get("latency_ms", 0.0)))
            hits = body["hits"]
            # Rows with identical text tie on every score, so which of them ranks first is arbitrary.
            found += any(h["id"] == row.id or h["content"] == row.memory.content for h in hits)
            found_id += any(h["id"] == row.id for h in hits)
            empty += not hits

    def share(count: int) -> float:
        return round(count / len(targets), 3) if targets else 0.0

    return {"queries": len(targets), "latency": common.latency_summary(client_ms),
            "server_side": common.latency_summary(server_ms),
            f"found_at_{k}": share(found), f"found_id_at_{k}": share(found_id), "empty": empty}


def _shorten(line: str) -> str:
    """Plans quote the 384-float query vector and id lists in full; elide them."""
    line = re.sub(r"'\[[-0-9.,e]+\]'", "'[query vector]'", line)
    return re.sub(r"'\{(mem_[0-9a-z]+,?){3,}\}'", "'{ids…}'", line)


def explain(ctx, principal, row: Row) -> list[str]:
    """Replay one recall in-process and EXPLAIN (ANALYZE, BUFFERS) its vector and keyword queries."""
    from sqlalchemy import event

    from app.db import prepared
    from app.services.memory import recall

    captured: list[tuple[str, Any]] = []

    def capture(conn, cursor, statement, parameters, context, executemany):
        captured.append((statement, parameters))

    def capture_prepared(statement, conn, parameters):  # the candidate queries run on psycopg itself
        captured.append((statement.removeprefix(prepared.PIPELINED), parameters))  # its text, however sent

    event.listen(ctx.db.engine, "before_cursor_execute", capture)
    prepared.observers.append(capture_prepared)
    try:
        recall.recall(ctx, principal, {"agent_id": row.agent, "query": row.memory.question, "k": 5})
    finally:
        event.remove(ctx.db.engine, "before_cursor_execute", capture)
        prepared.observers.remove(capture_prepared)
    out: list[str] = []
    with ctx.db.engine.connect() as conn:
        with conn.begin() as tx:
            for statement, parameters in captured:
                command = statement.lstrip().upper()
                if command.startswith("COMMIT"):  # recall's own transaction for the HNSW settings
                    continue
                if command.startswith(("SET ", "BEGIN")):
                    conn.exec_driver_sql(re.sub(r"^\s*BEGIN;\s*", "", statement), parameters or ())
                elif "<=>" in statement or "@@" in statement:
                    plan_rows = conn.exec_driver_sql("EXPLAIN (ANALYZE, BUFFERS) " + statement, parameters or ()).all()
                    out += [_shorten(r[0]) for r in plan_rows] + [""]
            tx.rollback()
    return out



def row_updates(ctx, since: dict[str, Any] | None = None) -> dict[str, Any]:
    """Row updates of `memories` (the server's batched recall counters, once it has exited) and how
    many were HOT (same page, no index entry written), since `since`; and the table's fillfactor."""
    from sqlalchemy import text

    with ctx.db.engine.connect() as conn:
        row = conn.execute(text(
            "SELECT n_tup_upd, n_tup_hot_upd, (SELECT reloptions FROM pg_class WHERE oid = 'memories'::regclass) "
            "FROM pg_stat_user_tables WHERE relid = 'memories'::regclass")).one()
    now = {"rows": int(row[0]), "hot": int(row[1]), "reloptions": row[2]}
    if since is None:
        return now
    rows, hot = now["rows"] - since["rows"], now["hot"] - since["hot"]
    return {"rows_updated": rows, "hot": hot, "hot_share": round(hot / rows, 3) if rows else None,
            "table_options": now["reloptions"] or []}


def scope_path(scope_rows: float, table_rows: int) -> str:
    """Which vector search recall takes for a scope of this size in a table of this size."""
    from app.repos.memory import search_sizes, search_vector

    if scope_rows <= min(search_sizes.FULL_SCAN_MAX, search_sizes.EXACT_SCAN_MAX):
        return "exact scan"
    if search_vector.CACHED_CODES:
        return "codes held in process + re-rank"
    if scope_rows <= search_vector.code_scan_limit(table_rows):
        return "binary codes + re-rank"
    return "HNSW iterative scan"


# (path, shortlist or ef_search) compared on each big agent; recall's own are SHORTLIST and HNSW_OVERFETCH.
PATH_VARIANTS = (("full scan", 0), ("binary codes", 100), ("binary codes", 200), ("binary codes", 400),
                 ("HNSW", 100), ("HNSW", 200), ("HNSW", 400), ("cached codes", 200))


def vector_paths(ctx, tenant_id: str, targets: list[Row], n: int = 20) -> dict[str, Any]:
    """Each vector path's statement (and the code shortlist / HNSW `ef_search` around recall's) on the
    same scope and questions, in process, whichever path recall takes there: found@n against an
    exact scan, and median execution time and buffers under EXPLAIN (ANALYZE, BUFFERS)."""
    from sqlalchemy import text
    from sqlalchemy.orm import Session

    from app.db.vectors import SqlVector
    from app.repos.memory import search_vector
    from app.repos.memory.memories import Scope

    exact_nth = text("SELECT (embedding <=> CAST(:q AS vector)) + 0 AS d FROM memories WHERE tenant_id = :t "
                     "AND agent_id = :a AND status = 'live' ORDER BY d LIMIT :n")
    filters = {"types": None, "tags": None, "metadata": None, "fresher_than_days": None}
    found: dict[str, list[tuple[float, int, float]]] = {}
    for row, vector in zip(targets, ctx.embedder.embed([r.memory.question for r in targets])):
        query = SqlVector(vector)
        scope = Scope(tenant_id, row.agent, None, None)
        with ctx.db.reader() as conn, Session(bind=conn) as session:
            nth = conn.execute(exact_nth, {"q": query.to_text(), "t": tenant_id, "a": row.agent, "n": n}).scalars().all()
            for path, setting in PATH_VARIANTS:
                options = {"shortlist": setting} if path == "binary codes" else {"overfetch": setting}
                hits = search_vector.run_vector_path(session, scope, filters, query, n, path, **options)
                lines = search_vector.run_vector_path(session, scope, filters, query, n, path, explain=True, **options)
                ms = float(re.search(r"Execution Time: ([0-9.]+)", lines[-1]).group(1))
                # the codes held in process: their shortlist's time in numpy, then the statement's
                ms += sum(float(m.group(1)) for m in map(re.compile(r"Shortlist in process: ([0-9.]+) ms").match, lines)
                          if m)
                buffers = re.search(r"Buffers: shared hit=(\d+)(?: read=(\d+))?", next(line for line in lines if "Buffers" in line))
                share = sum(float(h.distance) <= nth[-1] + 1e-6 for h in hits) / len(nth)
                found.setdefault(f"{path} {setting}" if setting else path, []).append(
                    (ms, int(buffers.group(1)) + int(buffers.group(2) or 0), share))
    out = {}
    for key, samples in found.items():
        ms, buffers, shares = (sorted(x[i] for x in samples) for i in range(3))
        out[key] = {"questions": len(samples), "found_at_20": round(sum(shares) / len(shares), 3),
                    "found_at_20_min": round(shares[0], 3), "execution_ms_p50": ms[len(ms) // 2],
                    "execution_ms_max": ms[-1], "buffers_p50": buffers[len(buffers) // 2]}
    return out


def vector_vs_exact(ctx, tenant_id: str, targets: list[Row], n: int = 20) -> dict[str, Any]:
    """found@n: how much of a scope's exact top n recall's vector search returns, per question.

    Recall's own vector search (in process, autocommit, as the server runs it) against an exact
    ranking of every row in the scope. A hit counts when it is no farther than the exact n-th
    nearest, so rows with identical text (equal distances) count whichever of them came back."""
    from sqlalchemy import text
    from sqlalchemy.orm import Session

    from app.db.vectors import SqlVector
    from app.repos.memory import search_vector
    from app.repos.memory.memories import Scope

    exact_nth = text("SELECT (embedding <=> CAST(:q AS vector)) + 0 AS d FROM memories WHERE tenant_id = :t "
                     "AND agent_id = :a AND status = 'live' ORDER BY d LIMIT :n")
    filters = {"types": None, "tags": None, "metadata": None, "fresher_than_days": None}
    shares, full = [], 0
    for row, vector in zip(targets, ctx.embedder.embed([r.memory.question for r in targets])):
        query = SqlVector(vector)
        with ctx.db.reader() as conn, Session(bind=conn) as session:
            found = search_vector.vector_search(session, Scope(tenant_id, row.agent, None, None), filters, query, n)
            nth = conn.execute(exact_nth, {"q": query.to_text(), "t": tenant_id, "a": row.agent, "n": n}).scalars().all()
        shares.append(sum(distance <= nth[-1] + 1e-6 for _, distance in found.hits) / len(nth))
        full += len(found.hits) == n
    return {"queries": len(targets), "n": n,
            "mean_share_of_exact_top_n": round(sum(shares) / len(shares), 3) if shares else None,
            "min_share": round(min(shares), 3) if shares else None, "full_result_lists": full}
