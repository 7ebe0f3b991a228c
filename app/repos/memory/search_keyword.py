"""Recall's keyword leg: full-text candidates within a scope, filtered inside the scan.

The keyword leg in a scope past FULL_SCAN_MAX (`app.repos.memory.search_sizes`) ranks the rows holding
three, else two, of the query's words (`keyword_search`); when they do not fill the n, the rest
come from the vector shortlist (`app.repos.memory.search_vector`), and sets made only of words common in
the scope (`WordCounts`) are not looked up.
"""

from __future__ import annotations

import functools
import itertools
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.orm import Session

from app.db.vectors import vector_param
from app.repos.memory import search_sql
from app.repos.memory.memories import Scope
from app.repos.memory.search_sql import (
    ANDED,
    ENTRY,
    ORED,
    QUERY,
    QUERY_WORDS,
    ROW_WORDS,
    Shape,
    shape_and_params,
    where,
)


@dataclass
class KeywordResult:
    hits: list[tuple[str, float]]
    """(id, ts_rank_cd), best first."""
    rows: dict[str, Any] = field(default_factory=dict)
    distances: dict[str, float] = field(default_factory=dict)
    """With `fetch`: each hit's row and cosine distance to `fetch`'s query vector."""
    full_match: bool = False
    """Some returned row holds every word of the query (a full-text AND match)."""


KEYWORD_PAIR_WORDS = 6  # at most 20 triples and 15 pairs (index lookups) for a long question
# A word held by more of an agent's rows than this is common there: a set of the query's words made
# only of common words is not looked up over the whole scope ("book" and "read" are each in ~3,200 of
# the 1M-row bench table's 50,000-row agent; ranking the rows holding both took 70-80 ms). A set
# with a rarer word ranks at most this many rows. A first name there is in ~530 rows, so it stays a
# word worth looking up.
COMMON_WORD_ROWS = 1000
WORD_RECOUNT_S = 300.0
# Words are counted only in scopes this large: in a smaller one a set of words ranks a few hundred
# rows at most (~5 ms), and counting would cost more CPU than it saves.
COUNT_WORDS_PAST = 10 * COMMON_WORD_ROWS


class WordCounts:
    """How many of an agent's live rows hold a word, up to COMMON_WORD_ROWS + 1, as last counted by
    this process (bounded LRU; a count older than WORD_RECOUNT_S is counted again).

    Counting reads a heap page per row (up to 1,001: ~2 ms from shared buffers, 7-70 ms from the OS
    cache on a loaded box), so it happens off the request, on a background thread with its own
    connection: a word not counted yet is taken as not common (looked up, as before this existed)."""

    def __init__(self, capacity: int = 100_000, background: bool = True):
        self.capacity = capacity
        self.background = background
        self._counts: OrderedDict[tuple[str, str], tuple[int, float]] = OrderedDict()
        self._pending: set[tuple[str, str]] = set()
        self._lock = threading.Lock()
        self._worker: Any = None

    def common(self, session: Session, shape: Shape, params: dict[str, Any], words: list[str]) -> set[str]:
        """The words of `words` (scoped lexemes) known to be common in the agent's scope."""
        now, tenant, counts, missing = time.monotonic(), params["tenant"], {}, []
        with self._lock:
            for word in words:
                found = self._counts.get((tenant, word))
                if found is not None:
                    counts[word] = found[0]
                    self._counts.move_to_end((tenant, word))
                if (found is None or now - found[1] > WORD_RECOUNT_S) and (tenant, word) not in self._pending:
                    missing.append(word)
                    self._pending.add((tenant, word))
        if missing:
            job = {"tenant": tenant, "agent": params["agent"], "words": missing, "cap": COMMON_WORD_ROWS + 1}
            if self.background:
                self._submit(session.connection().engine, job)
            else:
                counts.update(self._count(session.connection(), job))
        return {word for word, count in counts.items() if count > COMMON_WORD_ROWS}

    def _submit(self, engine: Any, job: dict[str, Any]) -> None:
        from concurrent.futures import ThreadPoolExecutor

        with self._lock:
            if self._worker is None:
                self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="word-counts")
        self._worker.submit(self._count_on, engine, job)

    def _count_on(self, engine: Any, job: dict[str, Any]) -> None:
        try:
            with engine.connect() as conn:
                self._count(conn, job)
                conn.commit()
        except Exception:  # a count is only an optimisation: forget the attempt, try again later
            with self._lock:
                self._pending -= {(job["tenant"], word) for word in job["words"]}

    def _count(self, conn: Any, job: dict[str, Any]) -> dict[str, int]:
        fresh = dict(conn.exec_driver_sql(_word_counts_sql(), job).all())
        counts = {word: int(fresh.get(word, 0)) for word in job["words"]}
        now = time.monotonic()
        with self._lock:
            for word, count in counts.items():
                self._counts[(job["tenant"], word)] = (count, now)
                self._pending.discard((job["tenant"], word))
            while len(self._counts) > self.capacity:
                self._counts.popitem(last=False)
        return counts


word_counts = WordCounts()


@functools.cache
def _word_counts_sql() -> str:
    """Each scoped word's live rows in the agent (the agent-keyed word index), counted up to `%(cap)s`."""
    return ("SELECT w.word, (SELECT count(*) FROM (SELECT 1 FROM memories m WHERE m.tenant_id = %(tenant)s "
            f"AND m.agent_id = %(agent)s AND m.status = 'live' AND {ROW_WORDS} @> ARRAY[w.word] LIMIT %(cap)s) s) "
            "FROM unnest(%(words)s::text[]) AS w(word)")


def keyword_search(session: Session, scope: Scope, filters: dict[str, Any], query: str, n: int,
                   query_vec: Sequence[float] | None = None, *, fetch: Sequence[float] | None = None,
                   large: bool = False, among: Sequence[str] | None = None,
                   scope_rows: int = 0) -> KeywordResult:
    """`keyword_candidates`; with `fetch` (the query vector) also the rows and their distances to
    it, in the same statement.

    `large` (an agent's scope past FULL_SCAN_MAX): ranking every row that shares one word with the
    query reads and ranks thousands of rows there (a common word such as "feel" is in a tenth of an
    agent's memories: 77 ms for a 100,000-row agent). So the rows sharing at least three of its
    words, then at least two, are ranked first, from the agent-keyed word index (each set of words
    an index lookup); when they fill the n, they are the top n (a row's cover-density rank counts
    the query words it holds, so a row holding fewer ranks below them, bar a word repeated in it).
    Otherwise, with `among` (the vector leg's shortlist), the rest of the n are the rows of that
    shortlist holding one of the words, ranked as before (a bounded set of primary-key lookups);
    without it the full one-word match runs. The three-word tier is for questions whose
    two common words are everywhere: "What kind of books does Sara read?" holds "book" and "read"
    in 6,000 of a 100,000-row agent's memories, Sara's reading facts all three. Ranking every
    one-word match instead ("What does Karim do for a living?": `karim`, `live`) read thousands of
    rows for places 10-20 of the list, mostly ties broken by id: 50-260 ms in a 50,000-row agent of
    the 1M-row table."""
    if not query.strip():
        return KeywordResult([])
    shape, params = shape_and_params(scope, filters)
    vec = fetch if fetch is not None else query_vec
    params.update(text=query, n=n, q=vector_param(vec) if vec is not None else None)
    tie = query_vec is not None  # with `fetch` as well, the same vector is bound once
    rows, full_match = None, False
    if large and shape.agent:
        rows, full_match = _rows_sharing_most_words(session, shape, params, fetch is not None, tie, n, among,
                                                    count_words=scope_rows > COUNT_WORDS_PAST)
    if rows is None:
        rows = search_sql.execute(session, keyword_sql(shape, fetch is not None, tie), params).all()
    return keyword_result(rows, fetch is not None, full_match)


def keyword_result(rows: list[Any], fetch: bool, full_match: bool = False) -> KeywordResult:
    """The keyword statement's rows as a `KeywordResult` (with `fetch`: their rows and distances)."""
    full_match = full_match or any(r.full for r in rows)
    if not fetch:
        return KeywordResult([(r.id, float(r.rank)) for r in rows], full_match=full_match)
    return KeywordResult([(r.id, float(r.rank)) for r in rows], {r.id: r for r in rows},
                         {r.id: float(r.distance) if r.distance is not None else 1.0 for r in rows}, full_match)


def _rows_sharing_most_words(session: Session, shape: Shape, params: dict[str, Any], fetch: bool, tie: bool,
                             n: int, among: Sequence[str] | None = None,
                             count_words: bool = False) -> tuple[list[Any] | None, bool]:
    """The top n among the scope's rows holding at least three, else at least two, of the query's
    words; when fewer than n rows hold two, those rows and then `among`'s rows holding one word, or
    (no `among`) None: the caller then ranks every one-word match. With `among`, sets made only of
    words common in the scope (`COMMON_WORD_ROWS`; counted with `count_words`, i.e. past
    COUNT_WORDS_PAST rows) are not looked up: their rows come from `among`.
    Also whether a row of the scope holds every word, when the rows returned cannot tell."""
    words = search_sql.execute(session, f"SELECT {QUERY_WORDS}", params).scalar()
    words = sorted(words or [])[:KEYWORD_PAIR_WORDS]
    common = (word_counts.common(session, shape, params, words) if count_words and among is not None and len(words) > 1
              else set())
    best: list[Any] = []
    for size in (3, 2):
        sets = [group for group in itertools.combinations(words, size) if not set(group) <= common]
        if not sets:
            continue
        set_params = {f"pair_{i}": list(group) for i, group in enumerate(sets)}
        rows = search_sql.execute(session, keyword_sql(shape, fetch, tie, len(sets)), {**params, **set_params}).all()
        if len(rows) >= n:
            return rows, False
        best = rows  # the two-word rows include the three-word ones
    if among is None or not words:
        return None, False
    # Every row holding two or more words (bar sets of common words) is in `best` (fewer than n), so
    # one holding every word is too unless every word is common; the word index answers otherwise.
    seen = {r.id for r in best}
    rest = search_sql.execute(session, keyword_sql(shape, fetch, tie, among=True),
                    {**params, "among": [i for i in among if i not in seen]}).all()
    rows = best + rest[:n - len(best)]
    full = (len(words) == 1 or set(words) <= common) and not any(r.full for r in rows) and bool(
        search_sql.execute(session, _word_exists_sql(shape), {**params, "pair_0": words}).scalar())
    return rows, full


@functools.cache
def _word_exists_sql(shape: Shape) -> str:
    """Whether a row of the agent's scope holds the words `%(pair_0)s` (the agent-keyed word index;
    stops at the first)."""
    return (f"SELECT EXISTS (SELECT 1 FROM memories m WHERE {where(shape)} AND (m.content_tsv @@ {ANDED}) IS TRUE "
            f"AND {ROW_WORDS} @> %(pair_0)s::text[])")


@functools.cache
def keyword_sql(shape: Shape, fetch: bool, tie_by_distance: bool, pairs: int = 0, among: bool = False) -> str:
    """Rows sharing a stemmed word with the query, best cover-density rank first (equal ranks by
    distance to the query vector or by id, never by physical row order, which every UPDATE changes);
    `pairs` > 0: only rows holding one of that many pairs of the query's words (`%(pair_i)s`);
    `among`: only rows whose id is in `%(among)s` (primary-key lookups, however common the words)."""
    columns = f"{ENTRY}, m.embedding <=> {QUERY} AS distance" if fetch else "m.id"
    conds = [where(shape)]
    if shape.agent:
        # The same match keyed by agent, so a large scope's matches come from
        # `memories_agent_lexemes_live` (migration 0015). `IS TRUE` keeps the planner off the
        # table-wide word index, where a common word matches tens of thousands of other agents'
        # rows; small scopes still walk their ~100 rows on the scope index.
        conds.append(f"(m.content_tsv @@ {ORED}) IS TRUE")
        if among:
            pass  # the rows of `%(among)s`, joined below by primary key
        elif pairs:
            conds.append("(" + " OR ".join(f"{ROW_WORDS} @> %(pair_{i})s::text[]" for i in range(pairs)) + ")")
        else:
            conds.append(f"{ROW_WORDS} && {QUERY_WORDS}")
    else:
        conds.append(f"m.content_tsv @@ {ORED}")
    tie = f"m.embedding <=> {QUERY}" if tie_by_distance else "m.id"
    # Rows holding every query word rank at the top (ts_rank_cd counts the words matched), so
    # checking the n returned for a full AND match is enough.
    # `among` as a join, not `m.id = ANY(…)`: the planner took that as a filter on the scope index,
    # reading every index entry of the scope (5.5 ms for 10,000 rows) instead of 200 key lookups.
    rows = ("unnest(%(among)s::text[]) AS a(id) JOIN memories m ON m.tenant_id = %(tenant)s AND m.id = a.id"
            if among else "memories m")
    return (f"SELECT {columns}, ts_rank_cd(m.content_tsv, {ORED}) AS rank, (m.content_tsv @@ {ANDED}) AS full "
            f"FROM {rows} WHERE {' AND '.join(conds)} ORDER BY rank DESC, {tie}, m.id LIMIT %(n)s")
