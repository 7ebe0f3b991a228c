"""Reviewer canaries: which pending changes are synthetic poisoned writes, and what became of each.

`canaries` holds one row per canary change (the change and its staged memory are ordinary rows in
`changes` and `memories`, so the queue, the page, the API and the events show a canary exactly as a
real write). This table is the only record that a change is a canary: no reviewer-facing query
joins it. `entry_id` names the corpus row it was drawn from and `flags` the screening flag names
the reviewer is told about when they approve it; `outcome` is `caught` (rejected) or `missed`
(approved), `decided_by` the reviewer's actor label, `notified_at` when a reviewer who missed it
was shown so.

Revision ID: 0044
"""

from alembic import op

revision = "0044"
down_revision = "0043"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("""
        CREATE TABLE canaries (
            tenant_id text NOT NULL REFERENCES tenants(id),
            change_id text NOT NULL,
            corpus text NOT NULL,
            entry_id text NOT NULL,
            family text NOT NULL,
            flags text[] NOT NULL DEFAULT '{}',
            created_at timestamptz NOT NULL DEFAULT now(),
            outcome text CHECK (outcome IN ('caught', 'missed')),
            decided_by text,
            decided_at timestamptz,
            notified_at timestamptz,
            PRIMARY KEY (tenant_id, change_id)
        )""")
    op.execute("CREATE INDEX canaries_decided_by ON canaries (tenant_id, decided_by) WHERE outcome IS NOT NULL")


def downgrade() -> None:
    op.execute("DROP TABLE canaries")
