"""Candidate retrieval for recall: vector kNN and full-text, both filtered inside the scan.

Scopes smaller than `EXACT_SCAN_MAX` are ranked exactly (a btree range scan plus a sort over a
few thousand vectors takes milliseconds and can never miss). Larger scopes use the HNSW index
over live rows with pgvector's iterative scan, so filters apply during the graph walk and a
scope's top-k stays full even when other agents' rows are nearer (no global top-k post-filter).

`vector_candidates_with_stats` also returns the scope's size and mean similarity to the query
(recall's answerability gate): exact scans get them from the same scan (window aggregates);
larger scopes estimate the mean from a bounded sample of the scope.

Round trips are what a recall costs on a small scope, so: the exact-or-HNSW choice uses the
scope's size from the last exact scan of it in this process (`ScopeSizes`) instead of counting
first, and with `fetch=True` the candidate queries return the rows themselves (no third
statement to load them).
"""

from __future__ import annotations

import contextlib
import itertools
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from pgvector import Vector
from sqlalchemy import Text, cast, func, literal, literal_column, or_, select
from sqlalchemy.dialects import postgresql
from sqlalchemy.dialects.postgresql import TSQUERY
from sqlalchemy.orm import Session

from app.db.models import Memory
from app.repos.memories import Scope, apply_filters, visible


class SqlVector(Vector):
    """A vector rendered to pgvector's text form once, however many statements bind it (a remember
    binds its embedding for screening and the insert; a recall for the vector and keyword queries).
    Rendering 384 floats costs ~0.2 ms of CPU each time."""

    def __init__(self, values: Any):
        super().__init__(values)
        self._text = super().to_text()

    def to_text(self) -> str:
        return self._text


# What `fetch=True` returns per candidate: the columns of the contract's Entry (plus the score
# multiplier), as plain rows whose attribute names are the model's (`row.metadata_` …), so
# `entry_json` takes them as it takes a `Memory`. Plain rows, not ORM objects: a recall fetches up
# to 40 candidates to return 5, and building identity-mapped objects for them cost more CPU than
# the rest of the query handling.
ENTRY_COLUMNS = (Memory.id, Memory.agent_id, Memory.user_id, Memory.type, Memory.content,
                 Memory.metadata_.label("metadata_"), Memory.tags, Memory.confidence, Memory.source,
                 Memory.created_at, Memory.updated_at, Memory.expires_at, Memory.score_multiplier)

EXACT_SCAN_MAX = 20_000
HNSW_MAX_SCAN_TUPLES = 200_000
STATS_SAMPLE = 1_000
# The HNSW path asks the iterative scan for this many of the scope's rows (at least), adds every copy
# in scope of their texts, and ranks them exactly: in `relaxed_order` the scan yields its batches
# only roughly nearest first, so the first n rows that pass the scope's filter were often not the
# scope's n nearest (0.67 of an exact scan's top 20 in a 5%-of-the-table scope, `memwarden bench
# scale`). On the bench's 100,000-row agent: 0.79 of the exact top 20 before, 0.87 with 200
# candidates, 0.90 with 200 and their copies, 0.97 with 400 and their copies.
HNSW_OVERFETCH = 400
# A large scope's size is counted again (index-only, up to EXACT_SCAN_MAX + 1 rows) at most this often:
# it only picks the path, and counting a 20,000-row prefix of the scope index cost more than the
# HNSW query itself.
LARGE_SCOPE_RECOUNT_S = 30.0


@dataclass(frozen=True)
class ScopeStats:
    """How the query relates to the scope as a whole: its row count (a lower bound past
    EXACT_SCAN_MAX) and the mean cosine similarity of the query to those rows."""

    rows: int
    mean_similarity: float
    exact: bool


def _base(scope: Scope, filters: dict[str, Any]):
    return apply_filters(select(Memory.id).where(visible(scope)), **filters)


class ScopeSizes:
    """Each scope's live row count as this process last saw it (bounded LRU).

    The count only chooses exact scan vs HNSW; both return correct results, so a stale size costs
    at most slower queries: an exact scan of a scope that has grown past EXACT_SCAN_MAX counts it
    (window aggregate) and the next recall takes the HNSW path; a large size is forgotten after
    LARGE_SCOPE_RECOUNT_S, so a scope that shrank is counted again and ranked exactly. Scopes never
    seen are counted first."""

    def __init__(self, capacity: int = 50_000):
        self.capacity = capacity
        self._sizes: OrderedDict[tuple, tuple[int, float]] = OrderedDict()
        self._lock = threading.Lock()

    @staticmethod
    def key(scope: Scope, filters: dict[str, Any]) -> tuple | None:
        """None for what is not cached: `as_of` reads (a snapshot, not the live scope)."""
        if scope.as_of is not None:
            return None
        return (scope.tenant_id, scope.agent_id, scope.user_id, repr(sorted(filters.items())))

    def get(self, key: tuple | None) -> int | None:
        if key is None:
            return None
        with self._lock:
            found = self._sizes.get(key)
            if found is None:
                return None
            size, seen_at = found
            if size > EXACT_SCAN_MAX and time.monotonic() - seen_at > LARGE_SCOPE_RECOUNT_S:
                del self._sizes[key]
                return None
            self._sizes.move_to_end(key)
            return size

    def put(self, key: tuple | None, size: int) -> None:
        if key is None:
            return
        with self._lock:
            self._sizes[key] = (size, time.monotonic())
            self._sizes.move_to_end(key)
            while len(self._sizes) > self.capacity:
                self._sizes.popitem(last=False)


scope_sizes = ScopeSizes()


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
    return vector_search(session, scope, filters, query_vec, n).hits


def vector_candidates_with_stats(session: Session, scope: Scope, filters: dict[str, Any],
                                 query_vec: Sequence[float], n: int) -> tuple[list[tuple[str, float]], ScopeStats]:
    """`vector_candidates`, plus the scope's size and mean similarity to the query."""
    found = vector_search(session, scope, filters, query_vec, n)
    return found.hits, found.stats


@dataclass
class VectorResult:
    hits: list[tuple[str, float]]
    """(id, cosine distance), nearest first."""
    stats: ScopeStats
    rows: dict[str, Any] = field(default_factory=dict)
    """The hits' rows (`ENTRY_COLUMNS`), when asked for with `fetch=True`."""


def vector_search(session: Session, scope: Scope, filters: dict[str, Any], query_vec: Sequence[float], n: int,
                  *, fetch: bool = False) -> VectorResult:
    """Up to `n` nearest live memories in scope with the scope's stats (and, with `fetch`, the rows)."""
    distance = Memory.embedding.cosine_distance(query_vec)
    key = ScopeSizes.key(scope, filters)
    size = scope_sizes.get(key)
    if size is None and scope.as_of is None:
        size = scope_size_at_most(session, scope, filters, EXACT_SCAN_MAX + 1)
        if size > EXACT_SCAN_MAX:
            scope_sizes.put(key, size)  # small scopes are cached by their exact scan, with the exact count
    stmt = _base(scope, filters).where(Memory.embedding.is_not(None))
    if size is None or size <= EXACT_SCAN_MAX:
        # The distance is computed once per row in a fenced subquery (OFFSET 0), then ranked
        # exactly; the window aggregates see every row of the scope before the LIMIT.
        inner = stmt.add_columns(distance.label("distance")).offset(0).subquery()
        ranked = (select(inner.c.id, inner.c.distance, func.count().over().label("scope_rows"),
                         func.avg(inner.c.distance).over().label("mean_distance"))
                  .order_by(inner.c.distance).limit(n))
        result = _ranked(session, ranked, fetch, scope.tenant_id)
        if not result.hits:
            scope_sizes.put(key, 0)
            return VectorResult([], ScopeStats(0, 0.0, True))
        first = result.extra[0]
        scope_sizes.put(key, int(first.scope_rows))
        return VectorResult(result.hits, ScopeStats(int(first.scope_rows), 1.0 - float(first.mean_distance), True),
                            result.rows)
    overfetch = max(n, HNSW_OVERFETCH)
    content_key = func.md5(Memory.content)  # as migration 0030 indexes it per scope
    with _filtered_hnsw_scan(session, ef_search=max(40, min(1000, overfetch))):
        # The scan's candidates, re-ranked exactly (relaxed_order is only roughly ordered), and the
        # scope's mean distance from a bounded sample of it, in one statement.
        candidates = (stmt.add_columns(distance.label("distance"), content_key.label("content_key"))
                      .order_by(distance).limit(overfetch).cte("candidates"))
        # Every copy in scope of a candidate's text: identical texts have identical vectors, which
        # an HNSW graph links poorly (its neighbour lists keep one of a set of equal points), so
        # the walk reaches a few copies of a repeated fact and misses the rest of an exact top n.
        # One probe of `memories_scope_content` per distinct text (LATERAL, so never a walk of the
        # scope); n copies of one text are as many as the top n can hold.
        keys = select(candidates.c.content_key).distinct().subquery()
        copies = (stmt.add_columns(distance.label("distance")).where(content_key == keys.c.content_key)
                  .limit(n).subquery().lateral())
        pooled = (select(candidates.c.id, candidates.c.distance)
                  .union(select(copies.c.id, copies.c.distance).select_from(keys).join(copies, literal(True)))
                  .subquery())
        sample = stmt.add_columns(distance.label("distance")).limit(STATS_SAMPLE).subquery()
        mean_distance = select(func.avg(sample.c.distance)).scalar_subquery()
        ranked = (select(pooled.c.id, pooled.c.distance, mean_distance.label("mean_distance"))
                  .order_by(pooled.c.distance, pooled.c.id).limit(n))
        result = _ranked(session, ranked, fetch, scope.tenant_id)
    mean = float(result.extra[0].mean_distance) if result.extra else None
    stats = ScopeStats(size, 1.0 - mean if mean is not None else 0.0, False)
    return VectorResult(result.hits, stats, result.rows)


@contextlib.contextmanager
def _filtered_hnsw_scan(session: Session, *, ef_search: int) -> Iterator[None]:
    """pgvector's iterative scan in force for the statements inside, so the scope's filter applies
    during the graph walk and a scope's top n stays full.

    `SET LOCAL` lasts until its transaction ends, and recall reads in autocommit, where every
    statement is a transaction of its own (a `set_config(…, true)` there was undone before the
    next statement, and a 50,000-row agent among 1M rows got 0-20 of its 20 candidates). On an
    autocommit connection this opens a transaction in the same round trip and commits it after."""
    conn = session.connection()
    own = bool(conn.connection.dbapi_connection.autocommit)
    settings = (f"SET LOCAL hnsw.iterative_scan = relaxed_order; SET LOCAL hnsw.ef_search = {int(ef_search)}; "
                f"SET LOCAL hnsw.max_scan_tuples = {HNSW_MAX_SCAN_TUPLES}")
    conn.exec_driver_sql(("BEGIN; " if own else "") + settings)
    try:
        yield
    except BaseException:
        if own:
            with contextlib.suppress(Exception):
                conn.exec_driver_sql("ROLLBACK")
        raise
    if own:
        conn.exec_driver_sql("COMMIT")


@dataclass
class _Ranked:
    hits: list[tuple[str, float]]
    rows: dict[str, Any]
    extra: list[Any]


def _ranked(session: Session, ranked, fetch: bool, tenant_id: str) -> _Ranked:
    """Run a select of (id, distance, …) ordered nearest first; with `fetch`, joined to the memory
    rows in the same statement (re-sorted here: a subquery's ORDER BY does not order the join)."""
    if not fetch:
        rows = session.execute(ranked).all()
        return _Ranked([(r.id, float(r.distance)) for r in rows], {}, rows)
    sub = ranked.subquery()
    rows = sorted(session.execute(select(*ENTRY_COLUMNS, *[c for c in sub.c if c.key != "id"])
                                  .join(sub, Memory.id == sub.c.id).where(Memory.tenant_id == tenant_id)).all(),
                  key=lambda r: (r.distance, r.id))
    return _Ranked([(r.id, float(r.distance)) for r in rows], {r.id: r for r in rows}, rows)


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
    return keyword_search(session, scope, filters, query, n, query_vec).hits


@dataclass
class KeywordResult:
    hits: list[tuple[str, float]]
    """(id, ts_rank_cd), best first."""
    rows: dict[str, Any] = field(default_factory=dict)
    distances: dict[str, float] = field(default_factory=dict)
    """With `fetch`: each hit's row and cosine distance to `fetch`'s query vector."""
    full_match: bool = False
    """Some returned row holds every word of the query (a full-text AND match)."""


def keyword_search(session: Session, scope: Scope, filters: dict[str, Any], query: str, n: int,
                   query_vec: Sequence[float] | None = None, *, fetch: Sequence[float] | None = None,
                   large: bool = False) -> KeywordResult:
    """`keyword_candidates`; with `fetch` (the query vector) also the rows and their distances to
    it, in the same statement.

    `large` (an agent's scope past EXACT_SCAN_MAX): ranking every row that shares one word with the
    query reads and ranks thousands of rows there (a common word such as "feel" is in a tenth of an
    agent's memories: 77 ms for a 100,000-row agent). So the rows sharing at least two of its words
    are ranked first, from the agent-keyed word index (each pair of words an index lookup); when
    they fill the n, they are the top n (a row's cover-density rank counts the query words it
    holds, so a one-word row ranks below them, bar a word repeated in it). Otherwise the full
    one-word match runs as before."""
    # OR of the query's stemmed words (websearch_to_tsquery would AND them and miss paraphrases),
    # built in SQL so it costs no extra round trip: plainto_tsquery ANDs the quoted lexemes with
    # ' & ' (a lexeme never contains a space), so swapping the operator gives the OR query. With
    # a constant config the whole expression folds to a constant at plan time.
    if not query.strip():
        return KeywordResult([])
    anded = func.plainto_tsquery(literal_column("'english'::regconfig"), query)
    tsquery = cast(func.replace(cast(anded, Text), " & ", " | "), TSQUERY)
    rank = func.ts_rank_cd(Memory.content_tsv, tsquery)
    # Rows holding every query word rank at the top (ts_rank_cd counts the words matched), so
    # checking the n returned is enough and costs nothing on a large scope's many OR-matches.
    full = Memory.content_tsv.op("@@")(anded).label("full")
    tie = Memory.embedding.cosine_distance(query_vec) if query_vec is not None else Memory.id
    if fetch is None:
        stmt = _base(scope, filters).add_columns(rank.label("rank"), full)
    else:
        distance = Memory.embedding.cosine_distance(fetch).label("distance")
        if query_vec is not None:
            tie = distance  # the same vector: bind it once
        stmt = apply_filters(select(*ENTRY_COLUMNS, rank.label("rank"), distance, full).where(visible(scope)), **filters)
    matches = Memory.content_tsv.op("@@")(tsquery)
    order = (rank.desc(), tie, Memory.id)
    rows = None
    if scope.agent_id is None:
        stmt = stmt.where(matches)
    else:
        # The same match keyed by agent, so a large scope's matches come from
        # `memories_agent_lexemes_live` (migration 0015). `IS TRUE` keeps the planner off the
        # table-wide word index, where a common word matches tens of thousands of other agents'
        # rows; small scopes still walk their ~100 rows on the scope index.
        row_words = func.memwarden_scoped_lexemes(Memory.agent_id, Memory.content_tsv)
        query_words = func.memwarden_scoped_lexemes(
            cast(literal(scope.agent_id), Text), func.to_tsvector(literal_column("'english'::regconfig"), query))
        rows = _rows_sharing_two_words(session, stmt.where(matches.is_(True)), row_words, scope.agent_id, query,
                                       order, n) if large else None
        stmt = stmt.where(matches.is_(True), row_words.op("&&")(query_words))
    if rows is None:
        rows = session.execute(stmt.order_by(*order).limit(n)).all()
    full_match = any(r.full for r in rows)
    if fetch is None:
        return KeywordResult([(r.id, float(r.rank)) for r in rows], full_match=full_match)
    return KeywordResult([(r.id, float(r.rank)) for r in rows], {r.id: r for r in rows},
                         {r.id: float(r.distance) if r.distance is not None else 1.0 for r in rows}, full_match)


KEYWORD_PAIR_WORDS = 6  # at most 15 pairs (index lookups) for a long question


def _rows_sharing_two_words(session: Session, stmt, row_words, agent_id: str, query: str, order, n: int
                            ) -> list[Any] | None:
    """The top n of `stmt` among the scope's rows holding at least two of the query's words, or
    None when fewer than n rows do (the caller then ranks every one-word match)."""
    words = session.scalar(select(func.memwarden_scoped_lexemes(
        cast(literal(agent_id), Text), func.to_tsvector(literal_column("'english'::regconfig"), query))))
    if not words or len(words) < 2:
        return None
    words = sorted(words)[:KEYWORD_PAIR_WORDS]
    pairs = [row_words.op("@>")(cast(postgresql.array([a, b]), postgresql.ARRAY(Text))) for a, b in itertools.combinations(words, 2)]
    rows = session.execute(stmt.where(or_(*pairs)).order_by(*order).limit(n)).all()
    return rows if len(rows) >= n else None


def fetch_with_similarity(session: Session, tenant_id: str, ids: Sequence[str],
                          query_vec: Sequence[float]) -> list[tuple[Memory, float]]:
    """The tenant's rows for `ids` with their cosine similarity to the query."""
    if not ids:
        return []
    similarity = (1 - Memory.embedding.cosine_distance(query_vec)).label("similarity")
    rows = session.execute(select(Memory, similarity).where(Memory.tenant_id == tenant_id,
                                                            Memory.id.in_(list(ids)))).all()
    return [(r[0], float(r[1]) if r[1] is not None else 0.0) for r in rows]
