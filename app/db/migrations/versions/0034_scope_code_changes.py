"""When a row last changed in a way recall's vector search sees, for the in-process cache of a large
scope's binary codes.

Recall keeps a large scope's binary codes (`embedding_bits`, migration 0033) in memory and compares
the query with them there (`app.repos.memory.code_cache`): a scan of 50,000-100,000 codes in PostgreSQL
cost 12-37 ms of executor time, the same in numpy ~1-3 ms. What the cached copy cannot know is
what changed after it was read; `search_changed_at` is set by PostgreSQL itself (a trigger, so every
writer is covered: remember, review, recover, merge, import, COPY) whenever a row is inserted or its
status, embedding or scope changes, and each cached search re-reads the scope's rows changed since
shortly before the copy was taken (`memories_scope_changed`, only rows with a value, so the rows
already in a table when this migration runs are not indexed).

The column has no default, so adding it rewrites nothing; the partial index reads the table once
(seconds at 1M rows, blocking writes meanwhile) and holds nothing until rows change.

Revision ID: 0034
"""

from alembic import op

revision = "0034"
down_revision = "0033"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("ALTER TABLE memories ADD COLUMN search_changed_at timestamptz")
    op.execute("""
        CREATE FUNCTION memwarden_search_changed() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            NEW.search_changed_at := clock_timestamp();
            RETURN NEW;
        END
        $$""")
    op.execute("CREATE TRIGGER memories_search_changed_insert BEFORE INSERT ON memories "
               "FOR EACH ROW EXECUTE FUNCTION memwarden_search_changed()")
    op.execute("CREATE TRIGGER memories_search_changed_update BEFORE UPDATE ON memories FOR EACH ROW "
               "WHEN (OLD.status IS DISTINCT FROM NEW.status OR OLD.embedding IS DISTINCT FROM NEW.embedding "
               "OR OLD.tenant_id IS DISTINCT FROM NEW.tenant_id OR OLD.agent_id IS DISTINCT FROM NEW.agent_id "
               "OR OLD.user_id IS DISTINCT FROM NEW.user_id) "
               "EXECUTE FUNCTION memwarden_search_changed()")
    op.execute("CREATE INDEX memories_scope_changed ON memories (tenant_id, agent_id, search_changed_at) "
               "WHERE status = 'live' AND search_changed_at IS NOT NULL")


def downgrade() -> None:
    op.execute("DROP INDEX memories_scope_changed")
    op.execute("DROP TRIGGER memories_search_changed_update ON memories")
    op.execute("DROP TRIGGER memories_search_changed_insert ON memories")
    op.execute("DROP FUNCTION memwarden_search_changed()")
    op.execute("ALTER TABLE memories DROP COLUMN search_changed_at")
