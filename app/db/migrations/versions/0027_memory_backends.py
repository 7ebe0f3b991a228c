"""Memory backends (the router): stores besides the built-in one that a tenant's governed
memories are delivered to, the outbox of those deliveries, and what each backend holds.

The outbox is filled by a trigger on `memories`, so every path that makes a memory live, changes a
live memory or ends one (remember, approve, edit, merge, supersede, forget, expire, delete, import,
compaction, recover) owes a delivery in its own transaction without each service remembering to.
Pending rows (the review sentinel) owe nothing: a backend only ever receives governed content.
Every key includes `tenant_id`, the distribution column under Citus (docs/operators/scale-out.md).

Revision ID: 0027
"""

from alembic import op

revision = "0027"
down_revision = "0026"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("""
        CREATE TABLE memory_backends (
            id text NOT NULL,
            tenant_id text NOT NULL REFERENCES tenants(id),
            name text NOT NULL,
            kind text NOT NULL CHECK (kind IN ('mem0', 'memwarden', 'memorywire')),
            agents_like text NOT NULL DEFAULT '%',
            agents text NOT NULL DEFAULT '*',
            options jsonb NOT NULL DEFAULT '{}',
            secret_enc bytea,
            weight real NOT NULL DEFAULT 1,
            timeout_ms integer NOT NULL DEFAULT 2000,
            enabled boolean NOT NULL DEFAULT true,
            created_at timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (id, tenant_id),
            UNIQUE (tenant_id, name)
        )""")
    op.execute("CREATE INDEX memory_backends_tenant ON memory_backends (tenant_id) WHERE enabled")
    op.execute("""
        CREATE TABLE backend_deliveries (
            id bigserial NOT NULL,
            tenant_id text NOT NULL,
            backend_id text NOT NULL,
            memory_id text NOT NULL,
            status text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'delivered', 'failed')),
            attempt integer NOT NULL DEFAULT 0,
            claims integer NOT NULL DEFAULT 0,
            action text,
            error text,
            next_attempt_at timestamptz NOT NULL DEFAULT now(),
            created_at timestamptz NOT NULL DEFAULT now(),
            delivered_at timestamptz,
            PRIMARY KEY (id, tenant_id),
            FOREIGN KEY (backend_id, tenant_id) REFERENCES memory_backends(id, tenant_id) ON DELETE CASCADE
        )""")
    op.execute("CREATE INDEX backend_deliveries_due ON backend_deliveries (next_attempt_at, id) "
               "WHERE status = 'pending'")
    op.execute("CREATE INDEX backend_deliveries_memory ON backend_deliveries (tenant_id, memory_id, id DESC)")
    op.execute("""
        CREATE TABLE backend_records (
            backend_id text NOT NULL,
            memory_id text NOT NULL,
            tenant_id text NOT NULL,
            backend_ref text NOT NULL,
            content_digest text NOT NULL,
            delivered_at timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (backend_id, memory_id, tenant_id),
            FOREIGN KEY (backend_id, tenant_id) REFERENCES memory_backends(id, tenant_id) ON DELETE CASCADE
        )""")
    op.execute("CREATE UNIQUE INDEX backend_records_ref ON backend_records (backend_id, backend_ref, tenant_id)")
    # One delivery owed per backend that takes the memory's agent, whenever the row's live state
    # changes: it becomes live, a live row's content/metadata/tags/type/expiry change, or it stops
    # being live (or goes). The delivery job reads the row's state when it runs, so a burst of
    # changes in one transaction needs no ordering and a redelivery is harmless.
    op.execute("""
        CREATE FUNCTION memwarden_owe_backends() RETURNS trigger LANGUAGE plpgsql AS $$
        DECLARE
            row_ memories%ROWTYPE;
        BEGIN
            IF TG_OP = 'DELETE' THEN
                row_ := OLD;
                IF OLD.status <> 'live' THEN RETURN NULL; END IF;
            ELSE
                row_ := NEW;
                IF TG_OP = 'INSERT' AND NEW.status <> 'live' THEN RETURN NULL; END IF;
                IF TG_OP = 'UPDATE' AND OLD.status <> 'live' AND NEW.status <> 'live' THEN RETURN NULL; END IF;
                IF TG_OP = 'UPDATE' AND OLD.status = 'live' AND NEW.status = 'live'
                   AND OLD.content IS NOT DISTINCT FROM NEW.content
                   AND OLD.metadata IS NOT DISTINCT FROM NEW.metadata
                   AND OLD.tags IS NOT DISTINCT FROM NEW.tags
                   AND OLD.type IS NOT DISTINCT FROM NEW.type
                   AND OLD.expires_at IS NOT DISTINCT FROM NEW.expires_at THEN
                    RETURN NULL;  -- recall counts, score multipliers: nothing a backend holds
                END IF;
            END IF;
            INSERT INTO backend_deliveries (tenant_id, backend_id, memory_id)
            SELECT b.tenant_id, b.id, row_.id FROM memory_backends b
             WHERE b.tenant_id = row_.tenant_id AND b.enabled AND row_.agent_id LIKE b.agents_like;
            RETURN NULL;
        END $$""")
    op.execute("""
        CREATE TRIGGER memories_owe_backends AFTER INSERT OR UPDATE OR DELETE ON memories
        FOR EACH ROW EXECUTE FUNCTION memwarden_owe_backends()""")


def downgrade() -> None:
    op.execute("DROP TRIGGER memories_owe_backends ON memories")
    op.execute("DROP FUNCTION memwarden_owe_backends()")
    op.execute("DROP TABLE backend_records")
    op.execute("DROP TABLE backend_deliveries")
    op.execute("DROP TABLE memory_backends")
