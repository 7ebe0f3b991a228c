"""Foundation: pgvector, tenants and API keys.

Revision ID: 0001
"""

from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("CREATE EXTENSION IF NOT EXISTS vector")
    op.execute("""
        CREATE TABLE tenants (
            id text PRIMARY KEY,
            name text NOT NULL UNIQUE CHECK (name ~ '^[a-z0-9][a-z0-9_-]{0,62}$'),
            created_at timestamptz NOT NULL DEFAULT now(),
            settings jsonb NOT NULL DEFAULT '{}'::jsonb
        )""")
    op.execute("""
        CREATE TABLE api_keys (
            id text PRIMARY KEY,
            tenant_id text NOT NULL REFERENCES tenants(id),
            name text NOT NULL DEFAULT '',
            token_hash bytea NOT NULL UNIQUE,
            scopes text[] NOT NULL,
            agents text[] NOT NULL,
            created_at timestamptz NOT NULL DEFAULT now(),
            revoked_at timestamptz,
            last_used_at timestamptz
        )""")
    op.execute("CREATE INDEX api_keys_tenant ON api_keys (tenant_id)")


def downgrade() -> None:
    op.execute("DROP TABLE api_keys")
    op.execute("DROP TABLE tenants")
