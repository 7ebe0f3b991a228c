"""Erasure receipts: one signed receipt per memory and store, for each delete a store confirmed.

The router writes a row when a store, read back after its delete, no longer returns the item
(`app.services.audit.erasure`): the memory id, the backend (its id, and its name as the receipt names
it), the confirmation time, the audit sequence of the event that ended the memory, and the signed
note itself (`app.core.auditchain.receipts`). No foreign key to the backend: a receipt outlives the
backend's removal. Append-only for the app role, like the audit log: receipts are evidence.

Revision ID: 0043
"""

from alembic import op

revision = "0043"
down_revision = "0042"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("""
        CREATE TABLE erasure_receipts (
            id bigserial NOT NULL,
            tenant_id text NOT NULL REFERENCES tenants(id),
            memory_id text NOT NULL,
            backend_id text NOT NULL,
            store text NOT NULL,
            audit_seq bigint NOT NULL,
            confirmed_at timestamptz NOT NULL,
            note text NOT NULL,
            PRIMARY KEY (id, tenant_id)
        )""")
    op.execute("CREATE INDEX erasure_receipts_memory ON erasure_receipts (tenant_id, memory_id, id)")


def downgrade() -> None:
    op.execute("DROP TABLE erasure_receipts")
