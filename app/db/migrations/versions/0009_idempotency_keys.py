"""Idempotency keys: the first answer to a `/v1` write, stored in the write's own transaction.

Keyed by tenant, so one tenant's keys never collide with (or reveal) another's. `fingerprint` is a
SHA-256 of method, path, API key id and canonical body: a reused key with another body is refused.

Revision ID: 0009
"""

from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("""
        CREATE TABLE idempotency_keys (
            tenant_id text NOT NULL REFERENCES tenants(id),
            key text NOT NULL CHECK (length(key) BETWEEN 1 AND 255),
            fingerprint bytea NOT NULL,
            status_code integer NOT NULL,
            headers jsonb NOT NULL DEFAULT '[]',
            body bytea NOT NULL,
            created_at timestamptz NOT NULL DEFAULT now(),
            expires_at timestamptz NOT NULL,
            PRIMARY KEY (tenant_id, key)
        )""")
    op.execute("CREATE INDEX idempotency_keys_expires_at ON idempotency_keys (expires_at)")


def downgrade() -> None:
    op.execute("DROP TABLE idempotency_keys")
