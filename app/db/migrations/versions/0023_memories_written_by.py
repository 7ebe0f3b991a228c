"""Who wrote each memory: `memories.written_by` holds the API key id of the write (or
`cli:<user>` for an operator's import), so `memwarden recover --key K` finds what a compromised
key wrote without replaying the audit log. Rows written before this migration have NULL; recover
finds those through the actor of their `memory.remembered` / `memory.staged` audit entries.

Revision ID: 0023
"""

from alembic import op

revision = "0023"
down_revision = "0022"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("ALTER TABLE memories ADD COLUMN written_by text")
    op.execute("CREATE INDEX memories_written_by ON memories (tenant_id, written_by, created_at) "
               "WHERE written_by IS NOT NULL")


def downgrade() -> None:
    op.execute("DROP INDEX memories_written_by")
    op.execute("ALTER TABLE memories DROP COLUMN written_by")
