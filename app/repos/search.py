"""Candidate retrieval for recall: vector kNN and full-text, both filtered inside the scan.

Scopes smaller than `EXACT_SCAN_MAX` are ranked exactly (a btree range scan plus a sort over a
few thousand vectors takes milliseconds and can never miss). Larger scopes use the HNSW index
over live rows with pgvector's iterative scan, so filters apply during the graph walk and a
scope's top-k stays full even when other agents' rows are nearer (no global top-k post-filter).

`vector_candidates_with_stats` also returns the scope's size and mean similarity to the query
(recall's answerability gate): exact scans get them from the same scan (window aggregates);
larger scopes estimate the mean from a bounded sample of the scope.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from sqlalchemy import Text, cast, func, literal, literal_column, select, text
from sqlalchemy.dialects.postgresql import TSQUERY
from sqlalchemy.orm import Session

from app.db.models import Memory
from app.repos.memories import Scope, apply_filters, visible

EXACT_SCAN_MAX = 20_000
HNSW_MAX_SCAN_TUPLES = 200_000
STATS_SAMPLE = 1_000


@dataclass(frozen=True)
class ScopeStats:
    """How the query relates to the scope as a whole: its row count (a lower bound past
    EXACT_SCAN_MAX) and the mean cosine similarity of the query to those rows."""

    rows: int
    mean_similarity: float
    exact: bool


def _base(scope: Scope, filters: dict[str, Any]):
    return apply_filters(select(Memory.id).where(visible(scope)), **filters)


def plan_per_call(session: Session) -> None:
    """Plan this transaction's statements for their actual parameters.

    psycopg prepares a statement after a few executions and PostgreSQL may then switch to one
    generic plan for every parameter value. Scopes are skewed (most agents hold hundreds of rows,
    a few hold tens of thousands), so a plan made for small scopes (walk the scope index, rank
    every row) run on a 50,000-row agent took 0.3-0.7 s instead of ~2 ms. Planning these short
    statements costs ~0.1 ms each."""
    session.execute(text("SET LOCAL plan_cache_mode = force_custom_plan"))


def scope_size_at_most(session: Session, scope: Scope, filters: dict[str, Any], cap: int) -> int:
    """Count the scope's live rows, stopping at `cap`; only picks exact scan vs HNSW.

    Expiry is left out on purpose: without it (and without request filters) this is an
    index-only scan of `memories_scope`, ~1 ms at 20,000 rows instead of ~15 ms with a heap visit
    per row. Expired rows not yet swept are counted, which can only tip a scope onto the (still
    filtered, still correct) HNSW path a little early."""
    conds = [Memory.tenant_id == scope.tenant_id, Memory.status == "live"]
    if scope.agent_id is not None:
        conds.append(Memory.agent_id == scope.agent_id)
    if scope.user_id is not None:
        conds.append(Memory.user_id == scope.user_id)
    inner = apply_filters(select(literal(1)).select_from(Memory).where(*conds), **filters).limit(cap).subquery()
    return session.scalar(select(func.count()).select_from(inner)) or 0


def vector_candidates(session: Session, scope: Scope, filters: dict[str, Any], query_vec: Sequence[float],
                      n: int) -> list[tuple[str, float]]:
    """Up to `n` (id, cosine distance) nearest to `query_vec` within scope, nearest first."""
    return vector_candidates_with_stats(session, scope, filters, query_vec, n)[0]


def vector_candidates_with_stats(session: Session, scope: Scope, filters: dict[str, Any],
                                 query_vec: Sequence[float], n: int) -> tuple[list[tuple[str, float]], ScopeStats]:
    """`vector_candidates`, plus the scope's size and mean similarity to the query."""
    distance = Memory.embedding.cosine_distance(query_vec)
    size = None if scope.as_of is not None else scope_size_at_most(session, scope, filters, EXACT_SCAN_MAX + 1)
    stmt = _base(scope, filters).where(Memory.embedding.is_not(None))
    if size is None or size <= EXACT_SCAN_MAX:
        # The distance is computed once per row in a fenced subquery (OFFSET 0), then ranked
        # exactly; the window aggregates see every row of the scope before the LIMIT.
        inner = stmt.add_columns(distance.label("distance")).offset(0).subquery()
        rows = session.execute(
            select(inner.c.id, inner.c.distance, func.count().over().label("scope_rows"),
                   func.avg(inner.c.distance).over().label("mean_distance"))
            .order_by(inner.c.distance).limit(n)).all()
        if not rows:
            return [], ScopeStats(0, 0.0, True)
        stats = ScopeStats(int(rows[0].scope_rows), 1.0 - float(rows[0].mean_distance), True)
        return [(r.id, float(r.distance)) for r in rows], stats
    session.execute(text("SELECT set_config('hnsw.iterative_scan', 'relaxed_order', true), "
                         "set_config('hnsw.ef_search', :ef, true), set_config('hnsw.max_scan_tuples', :mst, true)"),
                    {"ef": str(max(40, min(1000, 2 * n))), "mst": str(HNSW_MAX_SCAN_TUPLES)})
    # relaxed_order may return slightly out of order; re-sort the small result.
    inner = stmt.add_columns(distance.label("distance")).order_by(distance).limit(n).subquery()
    rows = session.execute(select(inner.c.id, inner.c.distance).order_by(inner.c.distance)).all()
    sample = stmt.add_columns(distance.label("distance")).limit(STATS_SAMPLE).subquery()
    mean_distance = session.scalar(select(func.avg(sample.c.distance)))
    stats = ScopeStats(size, 1.0 - float(mean_distance) if mean_distance is not None else 0.0, False)
    return [(r.id, float(r.distance)) for r in rows], stats


def keyword_candidates(session: Session, scope: Scope, filters: dict[str, Any], query: str,
                       n: int, query_vec: Sequence[float] | None = None) -> list[tuple[str, float]]:
    """Up to `n` (id, ts_rank_cd) whose text shares any stemmed word with `query`, best first.

    Equal ranks are common (every memory of "alice" matches the word "alice" once); with
    `query_vec` they are ordered by vector distance, otherwise by id, never by physical row order
    (which every UPDATE changes, so RRF would otherwise see a different keyword list each time)."""
    # OR of the query's stemmed words (websearch_to_tsquery would AND them and miss paraphrases),
    # built in SQL so it costs no extra round trip: plainto_tsquery ANDs the quoted lexemes with
    # ' & ' (a lexeme never contains a space), so swapping the operator gives the OR query. With
    # a constant config the whole expression folds to a constant at plan time.
    if not query.strip():
        return []
    anded = func.plainto_tsquery(literal_column("'english'::regconfig"), query)
    tsquery = cast(func.replace(cast(anded, Text), " & ", " | "), TSQUERY)
    rank = func.ts_rank_cd(Memory.content_tsv, tsquery)
    stmt = (_base(scope, filters).add_columns(rank.label("rank"))
            .where(Memory.content_tsv.op("@@")(tsquery)))
    tie = Memory.embedding.cosine_distance(query_vec) if query_vec is not None else Memory.id
    stmt = stmt.order_by(rank.desc(), tie, Memory.id).limit(n)
    return [(r.id, float(r.rank)) for r in session.execute(stmt).all()]


def fetch_with_similarity(session: Session, ids: Sequence[str], query_vec: Sequence[float]) -> list[tuple[Memory, float]]:
    """The rows for `ids` with their cosine similarity to the query."""
    if not ids:
        return []
    similarity = (1 - Memory.embedding.cosine_distance(query_vec)).label("similarity")
    rows = session.execute(select(Memory, similarity).where(Memory.id.in_(list(ids)))).all()
    return [(r[0], float(r[1]) if r[1] is not None else 0.0) for r in rows]
