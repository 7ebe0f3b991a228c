"""People who sign in through the deployment's OpenID provider have accounts tied to their
identity there (issuer and subject), not to a password: the name and email a provider reports can
change or be reused, the subject cannot. Such an account's password hash is unusable.

Revision ID: 0025
"""

from alembic import op

revision = "0025"
down_revision = "0024"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("ALTER TABLE users ADD COLUMN oidc_issuer text, ADD COLUMN oidc_subject text")
    op.execute("CREATE UNIQUE INDEX users_oidc_identity ON users (oidc_issuer, oidc_subject) "
               "WHERE oidc_subject IS NOT NULL")


def downgrade() -> None:
    op.execute("DROP INDEX users_oidc_identity")
    op.execute("ALTER TABLE users DROP COLUMN oidc_subject, DROP COLUMN oidc_issuer")
