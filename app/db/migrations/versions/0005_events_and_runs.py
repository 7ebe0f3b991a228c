"""Events (per-tenant log behind SSE and webhooks), runs, opaque memory refs, webhooks.

Revision ID: 0005
"""

from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # `id` is assigned per tenant under the tenant's advisory lock (app/services/events/events.py), so
    # for one tenant id order is commit order: a reader resuming after id N never skips an event.
    op.execute("""
        CREATE TABLE events (
            tenant_id text NOT NULL REFERENCES tenants(id),
            id bigint NOT NULL CHECK (id > 0),
            type text NOT NULL,
            payload jsonb NOT NULL,
            created_at timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (tenant_id, id)
        )""")
    op.execute("""
        CREATE TABLE runs (
            id text PRIMARY KEY,
            tenant_id text NOT NULL REFERENCES tenants(id),
            agent_id text,
            started_at timestamptz NOT NULL,
            created_by text NOT NULL
        )""")
    op.execute("CREATE INDEX runs_tenant ON runs (tenant_id, started_at)")
    op.execute("""
        CREATE TABLE memory_refs (
            ref text PRIMARY KEY,
            tenant_id text NOT NULL REFERENCES tenants(id),
            agent_id text NOT NULL,
            user_id text,
            created_at timestamptz NOT NULL DEFAULT now()
        )""")
    # One ref per scope; user ids are never empty (schema minLength 1), so '' stands for "none".
    op.execute("CREATE UNIQUE INDEX memory_refs_scope ON memory_refs (tenant_id, agent_id, coalesce(user_id, ''))")
    op.execute("""
        CREATE TABLE webhooks (
            id text PRIMARY KEY,
            tenant_id text NOT NULL REFERENCES tenants(id),
            url text NOT NULL,
            secret_enc bytea NOT NULL,
            event_types text[] NOT NULL DEFAULT '{}',
            agents text[] NOT NULL DEFAULT '{*}',
            active boolean NOT NULL DEFAULT true,
            created_at timestamptz NOT NULL DEFAULT now(),
            created_by text NOT NULL
        )""")
    op.execute("CREATE INDEX webhooks_tenant ON webhooks (tenant_id) WHERE active")
    op.execute("""
        CREATE TABLE webhook_deliveries (
            id bigserial PRIMARY KEY,
            webhook_id text NOT NULL REFERENCES webhooks(id) ON DELETE CASCADE,
            tenant_id text NOT NULL,
            event_id bigint NOT NULL,
            status text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'delivered', 'failed')),
            attempt integer NOT NULL DEFAULT 0,
            status_code integer,
            error text,
            next_attempt_at timestamptz,
            last_attempt_at timestamptz,
            delivered_at timestamptz,
            created_at timestamptz NOT NULL DEFAULT now(),
            FOREIGN KEY (tenant_id, event_id) REFERENCES events (tenant_id, id),
            UNIQUE (webhook_id, event_id)
        )""")
    op.execute("CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at) WHERE status = 'pending'")


def downgrade() -> None:
    for table in ("webhook_deliveries", "webhooks", "memory_refs", "runs", "events"):
        op.execute(f"DROP TABLE {table}")
