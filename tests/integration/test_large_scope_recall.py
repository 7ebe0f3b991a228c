"""Recall in scopes past EXACT_SCAN_MAX, on committed rows read in autocommit as the server reads them
(the test harness's rolled-back transaction would hide what autocommit undoes between statements)."""

import numpy as np
import pytest
from sqlalchemy import create_engine, event, text
from sqlalchemy.orm import Session

from app.db import prepared
from app.db.vectors import SqlVector, vector_param
from app.repos.memory import code_cache, search_keyword, search_sizes, search_sql, search_vector
from app.repos.memory.memories import Scope
from app.services.tenancy.tenants import create_tenant
from tests.harness import unique

ACTOR = {"kind": "test", "id": "pytest"}
CROWD, OURS = 3000, 2000  # other agents' rows nearest the query; ours are all farther than any of them


def _unit(v: np.ndarray) -> np.ndarray:
    return v / np.linalg.norm(v, axis=-1, keepdims=True)


@pytest.fixture
def watch():
    """`watch(conn, statements)`: every statement sent on `conn` is appended to `statements` (with
    `params`, as (text, parameters)): those SQLAlchemy runs and those psycopg runs itself
    (`app.db.prepared`, where recall's candidate queries go)."""
    added = []

    def start(conn, statements: list, params: bool = False) -> None:
        driver = conn.connection.driver_connection

        def record(sql, parameters):
            statements.append((sql, parameters) if params else sql)

        def observe(sql, on, parameters):
            if on is driver:
                record(sql, parameters)

        event.listen(conn, "before_cursor_execute", lambda *a: record(a[2], a[3]))
        prepared.observers.append(observe)
        added.append(observe)

    yield start
    for observe in added:
        prepared.observers.remove(observe)


@pytest.fixture(scope="module")
def crowded(settings, committed_ctx):
    """A tenant where agent `ours` holds OURS rows about "feel", and CROWD rows of other agents sit
    right at the query vector and share its words; ours are spread from unrelated to fairly near."""
    tenant = create_tenant(committed_ctx, name=unique("large-scope"), actor=ACTOR)
    rng = np.random.default_rng(7)
    query = _unit(rng.standard_normal(384))
    crowd = _unit(query + rng.standard_normal((CROWD, 384)) * 0.01)
    nearness = rng.uniform(0.0, 0.6, (OURS, 1))
    ours = _unit(nearness * query + (1 - nearness) * _unit(rng.standard_normal((OURS, 384))))
    rows = [{"id": f"mem_{unique('c')}", "agent": f"crowd-{i % 30}", "content": f"They feel fine, says crowd member {i}",
             "v": str(v.tolist())} for i, v in enumerate(crowd)]
    rows += [{"id": f"mem_{unique('o')}", "agent": "ours", "content": f"We feel calm about item {i}",
              "v": str(v.tolist())} for i, v in enumerate(ours)]
    with committed_ctx.db.sessions.begin() as session:
        session.execute(text("INSERT INTO memories (id, tenant_id, agent_id, type, content, embedding, status, live_from) "
                             "VALUES (:id, :t, :agent, 'semantic', :content, CAST(:v AS vector), 'live', now())"),
                        [{**row, "t": tenant.id} for row in rows])
    owner = create_engine(settings.migration_database_url)  # statistics and visibility, as autovacuum would
    with owner.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(text("VACUUM (ANALYZE) memories"))
    owner.dispose()
    return tenant.id, SqlVector(query.tolist())


def test_a_large_scope_gets_its_full_top_n_though_other_agents_rows_are_nearer(committed_ctx, crowded, monkeypatch):
    """pgvector's iterative scan must be in force for the HNSW statement itself: without it the
    graph walk stops at ef_search (40) candidates, all of them other agents' rows, and the scope
    gets almost none of its own."""
    tenant_id, query = crowded
    monkeypatch.setattr(search_sizes, "EXACT_SCAN_MAX", 100)  # OURS rows is a "large" scope now
    monkeypatch.setattr(search_vector, "CODE_SCAN_COST_RATIO", 0.0)  # whatever the table's size: HNSW past EXACT_SCAN_MAX
    monkeypatch.setattr(search_vector, "CACHED_CODES", False)  # the statement a filtered request still takes
    monkeypatch.setattr(search_sizes, "scope_sizes", search_sizes.ScopeSizes())
    with committed_ctx.db.reader() as conn, Session(bind=conn) as session:
        assert conn.connection.dbapi_connection.autocommit
        found = search_vector.vector_search(session, Scope(tenant_id, "ours", None), {}, query, 20, fetch=True)
        exact = conn.execute(text("SELECT id FROM memories WHERE tenant_id = :t AND agent_id = 'ours' "
                                  "ORDER BY (embedding <=> CAST(:q AS vector)) + 0 LIMIT 20"),  # + 0: never the index
                             {"t": tenant_id, "q": query.to_text()}).scalars().all()
        assert conn.connection.dbapi_connection.info.transaction_status == 0  # nothing left open
        with search_vector._filtered_hnsw_scan(session, ef_search=40):
            plan = "\n".join(conn.execute(text(
                "EXPLAIN SELECT id FROM memories WHERE tenant_id = :t AND agent_id = 'ours' AND status = 'live' "
                "ORDER BY embedding <=> CAST(:q AS vector) LIMIT 20"), {"t": tenant_id, "q": query.to_text()}).scalars())
    assert "memories_embedding_live" in plan  # the premise: this scope takes the HNSW path
    assert not found.stats.exact
    assert len(found.hits) == 20 and {row.agent_id for row in found.rows.values()} == {"ours"}
    assert len(set(found.rows) & set(exact)) >= 18  # approximate, but it is the scope's own top 20


def test_a_mid_size_scope_is_scanned_over_its_binary_codes_and_reranked(watch, committed_ctx, crowded, monkeypatch):
    """Past FULL_SCAN_MAX every row's binary code is compared with the query's from the covering
    index (no vector read from the table), and the shortlist is re-ranked with the full vectors:
    the scope's own exact top 20, and the scope mean from its centroid."""
    tenant_id, query = crowded
    monkeypatch.setattr(search_sizes, "FULL_SCAN_MAX", 100)  # OURS rows is a mid-size scope now
    monkeypatch.setattr(search_sizes, "scope_sizes", search_sizes.ScopeSizes())  # counted afresh
    monkeypatch.setattr(search_vector, "CACHED_CODES", False)  # the statement a filtered request still takes
    statements: list[str] = []
    with committed_ctx.db.reader() as conn, Session(bind=conn) as session:
        watch(conn, statements)
        found = search_vector.vector_search(session, Scope(tenant_id, "ours", None), {}, query, 20, fetch=True)
        exact = conn.execute(text("SELECT id, embedding <=> CAST(:q AS vector) FROM memories WHERE tenant_id = :t "
                                  "AND agent_id = 'ours' ORDER BY 2 LIMIT 20"),
                             {"t": tenant_id, "q": query.to_text()}).all()
        mean = conn.execute(text("SELECT avg(1 - (embedding <=> CAST(:q AS vector))) FROM memories "
                                 "WHERE tenant_id = :t AND agent_id = 'ours'"), {"t": tenant_id, "q": query.to_text()}).scalar()
        scan = next(s for s in statements if "<~>" in s)
        plan = "\n".join(conn.exec_driver_sql("EXPLAIN " + scan, {
            "tenant": tenant_id, "agent": "ours", "user": None, "q": query.to_text(), "n": 20,
            "shortlist": search_vector.SHORTLIST}).scalars())
    assert "memories_scope_bits" in plan and "memories_embedding_live" not in plan
    assert not found.stats.exact and found.stats.rows == OURS
    assert found.stats.mean_similarity == pytest.approx(float(mean), abs=1e-4)  # every row is in the sample here
    assert [i for i, _ in found.hits] == [i for i, _ in exact]
    assert [d for _, d in found.hits] == pytest.approx([float(d) for _, d in exact], abs=1e-6)
    assert {row.agent_id for row in found.rows.values()} == {"ours"}


def test_past_exact_scan_max_the_path_is_the_cheaper_of_codes_and_hnsw_for_the_tables_size():
    """A filtered HNSW walk visits about HNSW_OVERFETCH / (the scope's share of the table) nodes, a
    code scan every row of the scope: a scope that is a few percent of a large table is scanned,
    one that is most of its table walks the graph."""
    limit = search_vector.code_scan_limit
    assert limit(0) == limit(1_000) == search_sizes.EXACT_SCAN_MAX
    assert 50_000 <= limit(1_050_000)  # the bench's 50,000-row agent in the 1M-row table: scanned
    assert limit(120_000) < 100_000  # its 100,000-row agent in a 120,000-row table: HNSW
    assert limit(4 * 1_050_000) == pytest.approx(2 * limit(1_050_000), rel=0.01)  # as the square root


def test_keyword_matches_in_a_large_scope_are_the_scopes_own(committed_ctx, crowded):
    """The agent-keyed word index finds the scope's rows sharing a word with the query; other
    agents' rows with the same words never come back, and every matching row of ours can."""
    tenant_id, query = crowded
    with committed_ctx.db.reader() as conn, Session(bind=conn) as session:
        found = search_keyword.keyword_search(session, Scope(tenant_id, "ours", None), {}, "How do they feel?", OURS + 100,
                                      fetch=query)
        plan = "\n".join(conn.execute(text(
            "EXPLAIN SELECT id FROM memories WHERE tenant_id = :t AND agent_id = 'ours' AND status = 'live' "
            "AND (content_tsv @@ to_tsquery('english', 'feel')) IS TRUE AND memwarden_scoped_lexemes(agent_id, "
            "content_tsv) && memwarden_scoped_lexemes('ours', to_tsvector('english', 'How do they feel?'))"),
            {"t": tenant_id}).scalars())
    assert len(found.hits) == OURS
    assert {row.agent_id for row in found.rows.values()} == {"ours"}
    assert "memories_tsv_live" not in plan  # never the table-wide word index for an agent's scope


def test_a_large_scopes_keyword_leg_ranks_rows_sharing_most_words_first_with_the_same_answer(watch, committed_ctx, crowded):
    """`large`: the rows holding three, then two, of the query's words come from lookups on the
    agent-keyed index instead of ranking every row that holds one of them; the top n is the same,
    and a query whose two-word rows do not fill n falls back to the full match."""
    tenant_id, query = crowded
    scope = Scope(tenant_id, "ours", None)
    statements: list[str] = []
    with committed_ctx.db.reader() as conn, Session(bind=conn) as session:
        watch(conn, statements)
        # (question, n, statements sent): the words, then each tier tried, then the full match if needed
        for question, n, sent_count in (("Do we feel calm?", 20, 2),  # two words: pairs fill 20
                                        ("Do we feel calm?", OURS + 1, 3),  # pairs do not fill: full match
                                        ("We feel calm about the item", 20, 2),  # every row holds all three
                                        ("Calm about item 7", 5, 3)):  # one row holds all three: pairs
            statements.clear()
            tiered = search_keyword.keyword_search(session, scope, {}, question, n, fetch=query, large=True)
            sent = list(statements)
            full = search_keyword.keyword_search(session, scope, {}, question, n, fetch=query)
            assert tiered.hits == full.hits and tiered.full_match == full.full_match
            assert " @> " in sent[1] and len(sent) == sent_count, (question, sent)
    assert {row.agent_id for row in tiered.rows.values()} == {"ours"}


def test_a_large_scope_gets_every_copy_of_a_repeated_text_in_its_top_n(watch, committed_ctx, settings, monkeypatch):
    """Identical texts have identical vectors, which an HNSW graph links poorly; the HNSW path adds
    every in-scope copy of its candidates' texts, so a fact stored 30 times fills the top 20."""
    tenant = create_tenant(committed_ctx, name=unique("copies"), actor=ACTOR)
    rng = np.random.default_rng(11)
    query = _unit(rng.standard_normal(384))
    repeated = _unit(query + rng.standard_normal(384) * 0.3)
    others = _unit(rng.standard_normal((1500, 384)))
    rows = [{"id": f"mem_{unique('r')}", "agent": "copies" if i % 2 else "elsewhere", "content": "Ada drinks rooibos.",
             "v": str(repeated.tolist())} for i in range(60)]
    rows += [{"id": f"mem_{unique('x')}", "agent": "copies", "content": f"Unrelated fact {i}", "v": str(v.tolist())}
             for i, v in enumerate(others)]
    with committed_ctx.db.sessions.begin() as session:
        session.execute(text("INSERT INTO memories (id, tenant_id, agent_id, type, content, embedding, status, live_from) "
                             "VALUES (:id, :t, :agent, 'semantic', :content, CAST(:v AS vector), 'live', now())"),
                        [{**row, "t": tenant.id} for row in rows])
    monkeypatch.setattr(search_sizes, "EXACT_SCAN_MAX", 100)
    monkeypatch.setattr(search_vector, "CODE_SCAN_COST_RATIO", 0.0)
    monkeypatch.setattr(search_vector, "CACHED_CODES", False)
    statements: list[str] = []
    with committed_ctx.db.reader() as conn, Session(bind=conn) as session:
        watch(conn, statements)
        found = search_vector.vector_search(session, Scope(tenant.id, "copies", None), {}, SqlVector(query.tolist()),
                                     20, fetch=True)
    assert not found.stats.exact
    assert any("<=>" in s and "md5(m.content)" in s for s in statements)  # the copies are looked up by text digest
    assert [found.rows[i].content for i, _ in found.hits] == ["Ada drinks rooibos."] * 20


def _exact(conn, tenant_id: str, query, agent: str = "ours", n: int = 20) -> list:
    return conn.execute(text("SELECT id, (embedding <=> CAST(:q AS vector)) + 0 FROM memories WHERE tenant_id = :t "
                             "AND agent_id = :agent AND status = 'live' ORDER BY 2, id LIMIT :n"),  # + 0: never HNSW
                        {"t": tenant_id, "agent": agent, "q": query.to_text(), "n": n}).all()


def test_a_large_scope_is_shortlisted_from_its_codes_held_in_process(watch, committed_ctx, crowded, monkeypatch):
    """Past FULL_SCAN_MAX the query's code is compared with a copy of the scope's codes in process
    (no scan statement), and the shortlist re-ranked with the full vectors gives the exact top 20."""
    tenant_id, query = crowded
    monkeypatch.setattr(search_sizes, "FULL_SCAN_MAX", 100)
    monkeypatch.setattr(search_sizes, "scope_sizes", search_sizes.ScopeSizes())
    monkeypatch.setattr(code_cache, "cache", code_cache.CodeCache())
    statements: list[str] = []
    with committed_ctx.db.reader() as conn, Session(bind=conn) as session:
        watch(conn, statements)
        found = search_vector.vector_search(session, Scope(tenant_id, "ours", None), {}, query, 20, fetch=True)
        exact = _exact(conn, tenant_id, query)
        statements.clear()
        again = search_vector.vector_search(session, Scope(tenant_id, "ours", None), {}, query, 20, fetch=True)
    assert not any("<~>" in s or "memories_embedding_live" in s for s in statements)
    assert len(statements) == 1 and "search_changed_at" in statements[0]  # one statement once the copy is read
    assert [i for i, _ in found.hits] == [i for i, _ in again.hits] == [i for i, _ in exact]
    assert [d for _, d in found.hits] == pytest.approx([float(d) for _, d in exact], abs=1e-6)
    assert len(found.pool) == search_vector.SHORTLIST and set(found.rows) <= set(found.pool)


def test_the_codes_held_in_process_never_hide_a_later_write_nor_return_a_removed_row(committed_ctx, crowded,
                                                                                      monkeypatch):
    """Rows written after the copy was read are read from the table by every search (the trigger of
    migration 0034 stamps them), and a shortlisted row that left the scope is filtered out."""
    tenant_id, query = crowded
    monkeypatch.setattr(search_sizes, "FULL_SCAN_MAX", 100)
    monkeypatch.setattr(search_sizes, "scope_sizes", search_sizes.ScopeSizes())
    monkeypatch.setattr(code_cache, "cache", code_cache.CodeCache())
    scope = Scope(tenant_id, "ours", None)
    with committed_ctx.db.reader() as conn, Session(bind=conn) as session:
        before = search_vector.vector_search(session, scope, {}, query, 20)  # the copy is read now
        assert code_cache.cache.get(session, tenant_id, "ours") is not None
    new_id = f"mem_{unique('late')}"
    with committed_ctx.db.sessions.begin() as session:  # nearest of all, written after the copy
        session.execute(text("INSERT INTO memories (id, tenant_id, agent_id, type, content, embedding, status, "
                             "live_from) VALUES (:id, :t, 'ours', 'semantic', 'We feel calm, late', "
                             "CAST(:v AS vector), 'live', now())"), {"id": new_id, "t": tenant_id, "v": query.to_text()})
        session.execute(text("UPDATE memories SET status = 'forgotten' WHERE tenant_id = :t AND id = :id"),
                        {"t": tenant_id, "id": before.hits[0][0]})
    try:
        with committed_ctx.db.reader() as conn, Session(bind=conn) as session:
            after = search_vector.vector_search(session, scope, {}, query, 20)
            exact = _exact(conn, tenant_id, query)
        assert after.hits[0] == (new_id, pytest.approx(0.0, abs=1e-6))
        assert before.hits[0][0] not in {i for i, _ in after.hits}
        assert [i for i, _ in after.hits] == [i for i, _ in exact]
    finally:
        with committed_ctx.db.sessions.begin() as session:
            session.execute(text("UPDATE memories SET status = 'live' WHERE tenant_id = :t AND id = :id"),
                            {"t": tenant_id, "id": before.hits[0][0]})
            session.execute(text("DELETE FROM memories WHERE tenant_id = :t AND id = :id"),
                            {"t": tenant_id, "id": new_id})


def test_a_large_scopes_one_word_rows_come_from_the_vector_shortlist(watch, committed_ctx, crowded):
    """When the rows holding two of the query's words do not fill n, the rest are the vector leg's
    shortlisted rows holding one word (primary-key lookups), not a ranking of every one-word match."""
    tenant_id, query = crowded
    scope = Scope(tenant_id, "ours", None)
    statements: list[str] = []
    with committed_ctx.db.reader() as conn, Session(bind=conn) as session:
        ours = conn.execute(text("SELECT id, content FROM memories WHERE tenant_id = :t AND agent_id = 'ours' "
                                 "ORDER BY id"), {"t": tenant_id}).all()
        shortlist = [r.id for r in ours[:300]]
        watch(conn, statements)
        # "calm" is in every row of ours, "7" in one ("item 7"), "crowd"/"member" in none of ours
        found = search_keyword.keyword_search(session, scope, {}, "How calm is crowd member 7?", 20, fetch=query, large=True,
                                      among=shortlist)
    contents = {r.id: r.content for r in ours}
    assert len(found.hits) == 20
    assert contents[found.hits[0][0]] == "We feel calm about item 7"  # the one row holding two words first
    assert {i for i, _ in found.hits[1:]} <= set(shortlist)
    assert not any("&&" in s for s in statements)  # never every one-word match of the scope


def test_the_codes_shortlist_is_the_nearest_by_hamming_distance_of_the_scope_or_one_user():
    """`ScopeCodes.nearest` against a plain Hamming distance over pgvector's `binary_quantize` bits
    (sign bits, most significant first): the same shortlist, of the whole scope or of one user."""
    rng = np.random.default_rng(3)
    vectors = rng.standard_normal((500, 384))
    users = [f"user-{i % 7}" for i in range(500)]
    raw = np.packbits(vectors > 0, axis=1)  # (500, 48) bytes, as PostgreSQL stores bit(384)
    index = {u: n for n, u in enumerate(dict.fromkeys(users))}
    codes = code_cache.ScopeCodes(np.array([f"mem_{i}".encode() for i in range(500)], dtype=np.bytes_),
                                  np.array([index[u] for u in users], dtype=np.int32), index,
                                  np.ascontiguousarray(raw.view(np.uint64).T), since=None, loaded=0.0)
    query = rng.standard_normal(384)
    hamming = np.unpackbits(raw ^ np.packbits(query > 0), axis=1).sum(axis=1)
    for user, rows in ((None, np.arange(500)), ("user-3", np.flatnonzero(np.array(users) == "user-3"))):
        shortlist = codes.nearest(query, 30, user)
        cutoff = np.sort(hamming[rows])[29]
        assert len(shortlist) == 30 and len(set(shortlist)) == 30
        assert {int(i[4:]) for i in shortlist} <= set(rows.tolist())
        assert all(hamming[int(i[4:])] <= cutoff for i in shortlist)  # none farther than the 30th nearest
        assert sum(hamming[rows] < cutoff) <= 30  # and every row nearer than it is in
        assert {int(i[4:]) for i in shortlist} >= set(rows[hamming[rows] < cutoff].tolist())
    assert codes.rows_of("user-3") == len(rows) and codes.rows_of(None) == 500 and codes.nearest(query, 5, "nobody") == []


def test_sets_of_words_common_in_the_scope_are_not_looked_up_over_it(watch, committed_ctx, crowded, monkeypatch):
    """Every row of ours holds "feel", "calm" and "item": ranking the rows holding two of them would
    read the whole scope, so with the vector shortlist given, only sets holding a rarer word ("7")
    are looked up, and the rest of the n come from the shortlist."""
    tenant_id, query = crowded
    monkeypatch.setattr(search_keyword, "COMMON_WORD_ROWS", 100)
    monkeypatch.setattr(search_keyword, "word_counts", search_keyword.WordCounts(background=False))  # counted in the request
    scope = Scope(tenant_id, "ours", None)
    statements: list[tuple[str, dict]] = []
    with committed_ctx.db.reader() as conn, Session(bind=conn) as session:
        ours = conn.execute(text("SELECT id, content FROM memories WHERE tenant_id = :t AND agent_id = 'ours' "
                                 "ORDER BY id"), {"t": tenant_id}).all()
        shortlist = [r.id for r in ours[:300]]
        watch(conn, statements, params=True)
        found = search_keyword.keyword_search(session, scope, {}, "Do we feel calm about item 7?", 20, fetch=query,
                                      large=True, among=shortlist, scope_rows=search_keyword.COUNT_WORDS_PAST + 1)
    looked_up = [set(p[k]) for sql, p in statements if isinstance(p, dict) for k in p if k.startswith("pair_")]
    contents = {r.id: r.content for r in ours}
    assert looked_up and all(any(w.endswith(" 7") for w in group) for group in looked_up)
    assert contents[found.hits[0][0]] == "We feel calm about item 7" and found.full_match
    assert len(found.hits) == 20 and {i for i, _ in found.hits[1:]} <= set(shortlist)


def test_words_are_counted_off_the_request(committed_ctx, crowded, monkeypatch):
    """A word not counted yet is taken as rare (looked up as before); its count arrives from a
    background thread on its own connection, and then the word is known to be common."""
    tenant_id, _ = crowded
    monkeypatch.setattr(search_keyword, "COMMON_WORD_ROWS", 100)
    counts = search_keyword.WordCounts()
    shape, params = search_sql.shape_and_params(Scope(tenant_id, "ours", None), {})
    words = ["ours calm", "ours 7"]
    with committed_ctx.db.reader() as conn, Session(bind=conn) as session:
        assert counts.common(session, shape, params, words) == set()  # not counted yet: nothing skipped
        counts._worker.shutdown(wait=True)
        assert counts.common(session, shape, params, words) == {"ours calm"}


def test_a_vector_bound_in_binary_is_the_vector_its_text_names(committed_ctx):
    """Statements bind vectors in pgvector's binary form (`app.db.vectors`): the server reads the very
    vector the text form names, for awkward values too (tiny, negative, not exact in decimal)."""
    values = [1 / 3, -2.5e-8, 0.0, -0.7071067811865476, 1e-38, 123.456] + [0.001 * i for i in range(378)]
    vec = SqlVector(values)
    with committed_ctx.db.reader() as conn:
        same, distance, dims = conn.exec_driver_sql(
            "SELECT %(b)s::vector = %(t)s::vector, %(b)s::vector <=> %(t)s::vector, vector_dims(%(b)s::vector)",
            {"b": vector_param(vec), "t": vec.to_text()}).one()
        none = conn.exec_driver_sql("SELECT %(b)s::vector IS NULL", {"b": None}).scalar()
    assert same and distance == 0.0 and dims == 384 and none
    assert vector_param(values).data == vec.param.data  # a plain list packs the same bytes
