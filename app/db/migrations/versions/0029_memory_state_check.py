"""Memory state bound to the audit log (`memwarden audit verify --state`, `GET /v1/audit/state-check`).

- `audit_entries_memory_state`: the entries about memories, by memory and newest first, so the
  state check reads the latest audited state of every memory of a tenant in one ordered index
  scan, and a fail-closed read finds that of a few memories with one probe each.
- `integrity_alarms`: a tenant whose stored memories were found to differ from their audited
  state (the first mismatch found, how many). At most one open alarm per tenant, so the periodic
  check raises its `integrity.mismatch` event and webhooks once, not every round; `announced_at`
  is set when the event is written; a check that finds the tenant intact again clears it.

Revision ID: 0029
"""

from alembic import op

revision = "0029"
down_revision = "0028"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("CREATE INDEX audit_entries_memory_state ON audit_entries (chain_id, subject_id, seq DESC) "
               "WHERE subject_type = 'memory'")
    op.execute("""
        CREATE TABLE integrity_alarms (
            id bigint GENERATED ALWAYS AS IDENTITY,
            tenant_id text NOT NULL REFERENCES tenants (id),
            memory_id text,
            expected_seq bigint,
            reason text NOT NULL,
            mismatches integer NOT NULL DEFAULT 1,
            detected_by text NOT NULL,
            detected_at timestamptz NOT NULL DEFAULT now(),
            announced_at timestamptz,
            cleared_at timestamptz,
            PRIMARY KEY (tenant_id, id)
        )""")
    op.execute("CREATE UNIQUE INDEX integrity_alarms_open ON integrity_alarms (tenant_id) WHERE cleared_at IS NULL")


def downgrade() -> None:
    op.execute("DROP TABLE integrity_alarms")
    op.execute("DROP INDEX audit_entries_memory_state")
