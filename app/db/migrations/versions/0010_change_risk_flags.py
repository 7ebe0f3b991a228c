"""Write screening results on staged changes: the risk flags (names, severities, scores, evidence
spans, never content) and the overall risk level, so reviewers see why a write was staged and the
queue can sort and filter by risk.

Revision ID: 0010
"""

from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("ALTER TABLE changes ADD COLUMN risk_flags jsonb NOT NULL DEFAULT '[]'")
    op.execute("ALTER TABLE changes ADD COLUMN risk_level text NOT NULL DEFAULT 'none' "
               "CHECK (risk_level IN ('none', 'low', 'medium', 'high'))")


def downgrade() -> None:
    op.execute("ALTER TABLE changes DROP COLUMN risk_level")
    op.execute("ALTER TABLE changes DROP COLUMN risk_flags")
