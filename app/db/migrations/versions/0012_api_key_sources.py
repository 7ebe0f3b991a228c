"""API keys carry the `source` values they may assert (globs): a write whose `source` claims a
privileged origin (`system`, `admin`, `user:verified`, `tool:*` …) outside that list is flagged
`provenance_laundering` by write screening. Existing keys get none.

Revision ID: 0012
"""

from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("ALTER TABLE api_keys ADD COLUMN sources text[] NOT NULL DEFAULT '{}'")


def downgrade() -> None:
    op.execute("ALTER TABLE api_keys DROP COLUMN sources")
