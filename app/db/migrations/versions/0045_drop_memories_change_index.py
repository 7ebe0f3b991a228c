"""Drop `memories_change`: no query looks a memory up by the change it was written through.

Changes name their memories in `changes.memory_ids`, and every read that pairs a memory with its
change starts from the memory's id (`learned_rules.learned_approvals` joins memory → change on the
change's primary key), so the index on `memories.change_id` was only ever written: one more entry
to keep for every staged, learned-rule or approved write, and on every row a vacuum or non-HOT
update moves.

Revision ID: 0045
"""

from alembic import op

revision = "0045"
down_revision = "0044"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("DROP INDEX IF EXISTS memories_change")


def downgrade() -> None:
    op.execute("CREATE INDEX memories_change ON memories (change_id) WHERE change_id IS NOT NULL")
