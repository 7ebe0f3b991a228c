"""How `memories` rows sit on their pages: recall counters must update in place (HOT), never by a
new row version elsewhere plus a new entry in every index (HNSW and word indexes included)."""

import numpy as np
from sqlalchemy import text
from sqlalchemy.orm import Session

from app.repos.memory import memories as repo
from app.services.tenancy.tenants import create_tenant
from tests.harness import unique

ACTOR = {"kind": "test", "id": "pytest"}


def test_the_table_leaves_room_on_each_page(committed_ctx):
    with committed_ctx.db.sessions() as session:
        options = session.scalar(text("SELECT reloptions FROM pg_class WHERE oid = 'memories'::regclass"))
    assert "fillfactor=80" in (options or [])


def test_a_recall_counter_update_stays_on_its_page(committed_ctx):
    """One committed row per page (full pages as a bulk write leaves them) gets its counters
    bumped: every update must be HOT. At fillfactor 100 four ~1.8 kB rows fill a page and none is.

    The rows go into a session-local copy of `memories` (its columns, indexes and fillfactor), which
    the unqualified `memories` of the repo's UPDATE resolves to (pg_temp is searched first): after
    a long suite the shared table's free space is scattered over pages other tests' rows hold, so
    rows written there land beside them."""
    tenant = create_tenant(committed_ctx, name=unique("pages"), actor=ACTOR)
    vectors = np.random.default_rng(3).standard_normal((40, 384))
    with committed_ctx.db.engine.connect() as conn:
        options = conn.scalar(text("SELECT reloptions FROM pg_class WHERE oid = 'public.memories'::regclass"))
        fillfactor = int(next(o for o in options if o.startswith("fillfactor=")).split("=")[1])
        conn.execute(text(f"CREATE TEMP TABLE memories (LIKE public.memories INCLUDING ALL) "
                          f"WITH (fillfactor = {fillfactor})"))
        conn.execute(text("INSERT INTO memories (id, tenant_id, agent_id, type, content, embedding, status, live_from) "
                          "VALUES (:id, :t, 'pages', 'semantic', :c, CAST(:v AS vector), 'live', now())"),
                     [{"id": f"mem_{unique('p')}", "t": tenant.id, "c": f"fact number {i}", "v": str(v.tolist())}
                      for i, v in enumerate(vectors)])
        conn.commit()
        try:
            with Session(bind=conn) as session:
                one_per_page = session.scalars(text(
                    "SELECT DISTINCT ON (page) id FROM (SELECT id, (ctid::text::point)[0] AS page FROM memories) m "
                    "ORDER BY page, id")).all()
                # The counters as read before and after: on PostgreSQL 15+ they also hold the
                # backend's not-yet-reported counts of earlier transactions on this connection.
                counters = text("SELECT pg_stat_get_xact_tuples_updated('memories'::regclass), "
                                "pg_stat_get_xact_tuples_hot_updated('memories'::regclass)")
                updated_before, hot_before = session.execute(counters).one()
                repo.record_recall(session, tenant_id=tenant.id, ids=one_per_page)
                updated, hot = session.execute(counters).one()
                updated, hot = updated - updated_before, hot - hot_before
                session.commit()
        finally:
            conn.execute(text("DROP TABLE pg_temp.memories"))
            conn.commit()
    assert len(one_per_page) >= 5  # the rows really spread over several pages
    assert updated == len(one_per_page)
    assert hot == updated, (updated, hot)  # every one in place: at fillfactor 100 none would be
