"""How `memories` rows sit on their pages: recall counters must update in place (HOT), never by a
new row version elsewhere plus a new entry in every index (HNSW and word indexes included)."""

import numpy as np
from sqlalchemy import text

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
    bumped: every update must be HOT. At fillfactor 100 four ~1.8 kB rows fill a page and none is."""
    tenant = create_tenant(committed_ctx, name=unique("pages"), actor=ACTOR)
    # Enough rows that many land on pages the table grows for them: a long suite leaves free space
    # (vacuumed rows of other tests) on old pages, and the first rows fill that.
    vectors = np.random.default_rng(3).standard_normal((400, 384))
    with committed_ctx.db.sessions.begin() as session:
        session.execute(text("INSERT INTO memories (id, tenant_id, agent_id, type, content, embedding, status, live_from) "
                             "VALUES (:id, :t, 'pages', 'semantic', :c, CAST(:v AS vector), 'live', now())"),
                        [{"id": f"mem_{unique('p')}", "t": tenant.id, "c": f"fact number {i}", "v": str(v.tolist())}
                         for i, v in enumerate(vectors)])
    with committed_ctx.db.sessions.begin() as session:
        # Only pages that hold this test's rows alone: other tests (and other servers' jobs on the
        # same database) leave rows, and their own updates, on shared pages.
        one_per_page = session.scalars(text(
            "SELECT DISTINCT ON (page) id FROM (SELECT id, tenant_id, (ctid::text::point)[0] AS page FROM memories) m "
            "WHERE tenant_id = :t AND page NOT IN (SELECT (ctid::text::point)[0] FROM memories WHERE tenant_id <> :t) "
            "ORDER BY page, id"), {"t": tenant.id}).all()
        # The counters as read before and after: on PostgreSQL 15+ they also hold the backend's
        # not-yet-reported counts of earlier transactions on this pooled connection.
        counters = text("SELECT pg_stat_get_xact_tuples_updated('memories'::regclass), "
                        "pg_stat_get_xact_tuples_hot_updated('memories'::regclass)")
        updated_before, hot_before = session.execute(counters).one()
        repo.record_recall(session, tenant_id=tenant.id, ids=one_per_page)
        updated, hot = session.execute(counters).one()
        updated, hot = updated - updated_before, hot - hot_before
    assert len(one_per_page) >= 5  # the rows really spread over several pages of their own
    # All are HOT on pages this test filled alone. Rows of earlier tests may share a page whose free
    # fifth their own updates used up (run after other suites, one or two of ~10 pages), so allow a
    # few; at fillfactor 100 none would be HOT at all.
    assert updated == len(one_per_page)
    assert hot >= 0.8 * updated, (updated, hot)
