"""Reads name the agent run they served: `read_records.run_id`.

An agent that starts a run (`POST /v1/runs`) and passes its id with a recall has the read recorded
against that run, so an incident report can say which runs a poisoned memory was injected into,
not only which keys read it. Reads made before this revision, and reads that name no run, keep
NULL. The partial index serves "the reads of one run" without weighing on the reads with none.

Revision ID: 0042
"""

from alembic import op

revision = "0042"
down_revision = "0041"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("ALTER TABLE read_records ADD COLUMN run_id text")
    op.execute("CREATE INDEX read_records_run ON read_records (tenant_id, run_id, read_at) WHERE run_id IS NOT NULL")


def downgrade() -> None:
    op.execute("DROP INDEX read_records_run")
    op.execute("ALTER TABLE read_records DROP COLUMN run_id")
