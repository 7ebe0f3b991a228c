"""Recall's graph hops (`hops` in a recall request) walk merge and supersede links in both
directions: "which rows were merged into (or superseded by) these?" needs an index on each link,
else every hop would scan the tenant's memories. Few rows carry a link, so the indexes are partial.

Revision ID: 0024
"""

from alembic import op

revision = "0024"
down_revision = "0023"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("CREATE INDEX memories_merged_into ON memories (tenant_id, merged_into) WHERE merged_into IS NOT NULL")
    op.execute("CREATE INDEX memories_superseded_by ON memories (tenant_id, superseded_by) "
               "WHERE superseded_by IS NOT NULL")


def downgrade() -> None:
    op.execute("DROP INDEX memories_superseded_by")
    op.execute("DROP INDEX memories_merged_into")
