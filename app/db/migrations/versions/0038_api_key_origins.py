"""API keys can be limited in which origins their writes may claim.

`api_keys.origins` lists the provenance origins (`app.core.screening.provenance.ORIGINS`:
`user`, `document`, `email`, `web`, `tool`, `inferred`) a key's writes may name in `source`; a
write claiming another documented origin is refused (`app.services.memory.remembering.prepare_remember`).
Empty (every key made before, and the default): no limit. An absent or undocumented `source` is
untrusted and always allowed, since it claims nothing.

A column with a constant default: adding it rewrites nothing and takes a brief lock only.

Revision ID: 0038
"""

from alembic import op

revision = "0038"
down_revision = "0037"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("ALTER TABLE api_keys ADD COLUMN origins text[] NOT NULL DEFAULT '{}'")


def downgrade() -> None:
    op.execute("ALTER TABLE api_keys DROP COLUMN origins")
