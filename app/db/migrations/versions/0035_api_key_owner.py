"""API keys can belong to a person, so a two-person approval counts people, not credentials.

`api_keys.owner_user_id` names the user a key belongs to (NULL: a key of no one, as every key
made before). An approval given with an owned key is recorded as its owner's, so one person
holding a `review:decide` key and a sign-in (or two keys) cannot give both approvals of a
two-person change (`app.services.review.review`).

A nullable column with no default: adding it rewrites nothing and takes a brief lock only. The
foreign key is added NOT VALID (no scan of existing rows, which are all NULL anyway).

Revision ID: 0035
"""

from alembic import op

revision = "0035"
down_revision = "0034"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("ALTER TABLE api_keys ADD COLUMN owner_user_id text")
    op.execute("ALTER TABLE api_keys ADD CONSTRAINT api_keys_owner_user_id_fkey "
               "FOREIGN KEY (owner_user_id) REFERENCES users (id) NOT VALID")


def downgrade() -> None:
    op.execute("ALTER TABLE api_keys DROP CONSTRAINT api_keys_owner_user_id_fkey")
    op.execute("ALTER TABLE api_keys DROP COLUMN owner_user_id")
