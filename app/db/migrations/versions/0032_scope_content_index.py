"""Copies of a text within a scope, for recall's HNSW path in large scopes.

Identical texts have identical embeddings, and an HNSW graph links such points poorly, so the
graph walk of a large scope reaches a few copies of a repeated fact and misses the rest of the
scope's exact top n (`memwarden bench scale`: 0.7-0.87 of an exact scan's top 20). Recall now adds
every copy in scope of each candidate's text; this index finds them by (tenant, agent, text digest)
without walking the scope. A plain build: it reads the table once (seconds at 1M rows) and blocks
writes to `memories` meanwhile.

Revision ID: 0032
"""

from alembic import op

revision = "0032"
down_revision = "0031"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("CREATE INDEX memories_scope_content ON memories (tenant_id, agent_id, md5(content)) "
               "WHERE status = 'live'")


def downgrade() -> None:
    op.execute("DROP INDEX memories_scope_content")
