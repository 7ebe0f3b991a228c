"""A decided change keeps what its reviewer saw: `decided_view` holds the diff (and the proposed
content) as it was at the decision, and `decided_refs` the ids of the memories whose content that
copy holds, so a hard delete of any of them can erase the copy too (GIN-indexed for that lookup).

Revision ID: 0028
"""

from alembic import op

revision = "0028"
down_revision = "0027"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("ALTER TABLE changes ADD COLUMN decided_view jsonb, "
               "ADD COLUMN decided_refs text[] NOT NULL DEFAULT '{}'")
    op.execute("CREATE INDEX changes_decided_refs ON changes USING gin (decided_refs)")


def downgrade() -> None:
    op.execute("DROP INDEX changes_decided_refs")
    op.execute("ALTER TABLE changes DROP COLUMN decided_view, DROP COLUMN decided_refs")
