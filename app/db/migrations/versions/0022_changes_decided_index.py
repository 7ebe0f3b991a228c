"""The decisions log reads a tenant's decided changes newest decision first (`GET
/v1/audit/decisions`, keyset on (decided_at, id)); `changes_queue` is ordered by submission time,
so without this a large tenant's log sorted every decided change it had.

Revision ID: 0022
"""

from alembic import op

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("CREATE INDEX changes_decided ON changes (tenant_id, decided_at DESC, id DESC) "
               "WHERE decided_at IS NOT NULL")


def downgrade() -> None:
    op.execute("DROP INDEX changes_decided")
