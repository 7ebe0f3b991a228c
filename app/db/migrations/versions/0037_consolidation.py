"""Consolidation (short-term to long-term memory): its runs and the claims that make it idempotent.

`consolidation_runs` records each pass (`memwarden consolidate`, the schedule, the API), as
`compaction_runs` does for compaction. `consolidation_claims` holds one row per promotion or
eviction a pass carried out or staged, keyed by a digest of the window and the source memory ids:
the row is inserted in the same transaction as the `remember` (or `expire`) it claims, so a rerun
after a crash, or a second process, can never promote the same evidence twice; the primary key
decides, not a check before the insert. The claim also keeps the evidence (source ids and the
scores, never content) that the change page shows a reviewer.

Revision ID: 0037
"""

from alembic import op

revision = "0037"
down_revision = "0036"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("""
        CREATE TABLE consolidation_runs (
            id text NOT NULL,
            tenant_id text NOT NULL REFERENCES tenants(id),
            agent_id text,
            trigger text NOT NULL CHECK (trigger IN ('schedule', 'cli', 'api')),
            dry_run boolean NOT NULL DEFAULT false,
            status text NOT NULL DEFAULT 'running' CHECK (status IN ('running', 'done', 'failed')),
            started_at timestamptz NOT NULL DEFAULT now(),
            finished_at timestamptz,
            stats jsonb NOT NULL DEFAULT '{}'::jsonb,
            PRIMARY KEY (id, tenant_id)
        )""")
    op.execute("CREATE INDEX consolidation_runs_tenant ON consolidation_runs (tenant_id, started_at DESC)")
    op.execute("""
        CREATE TABLE consolidation_claims (
            tenant_id text NOT NULL REFERENCES tenants(id),
            key text NOT NULL,
            kind text NOT NULL CHECK (kind IN ('promote', 'evict')),
            run_id text NOT NULL,
            agent_id text NOT NULL,
            user_id text,
            source_ids text[] NOT NULL,
            memory_id text,
            change_id text,
            evidence jsonb NOT NULL DEFAULT '{}'::jsonb,
            created_at timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (tenant_id, key)
        )""")
    op.execute("CREATE INDEX consolidation_claims_memory ON consolidation_claims (tenant_id, memory_id) "
               "WHERE memory_id IS NOT NULL")
    op.execute("CREATE INDEX consolidation_claims_window ON consolidation_claims (tenant_id, agent_id, kind)")


def downgrade() -> None:
    op.execute("DROP TABLE consolidation_claims")
    op.execute("DROP TABLE consolidation_runs")
