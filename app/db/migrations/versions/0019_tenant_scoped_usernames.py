"""Accounts a tenant's admin creates live in that tenant's own username namespace.

Usernames were global, so an admin of tenant A learned whether a username existed in tenant B (409
on create against 303). An account now has an optional home tenant: accounts an admin creates on
the admin page are homed in that tenant and sign in as `<tenant>/<username>`; accounts the operator
creates with the CLI have none and sign in with the bare username, as before. A name is unique
within its namespace only, so creating "rita" in A says nothing about B or about operator accounts.

Revision ID: 0019
"""

from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("ALTER TABLE users ADD COLUMN home_tenant_id text REFERENCES tenants (id)")
    op.execute("ALTER TABLE users DROP CONSTRAINT users_username_key")
    op.execute("CREATE UNIQUE INDEX users_operator_username ON users (username) WHERE home_tenant_id IS NULL")
    op.execute("CREATE UNIQUE INDEX users_tenant_username ON users (home_tenant_id, username) "
               "WHERE home_tenant_id IS NOT NULL")


def downgrade() -> None:
    op.execute("DROP INDEX users_tenant_username")
    op.execute("DROP INDEX users_operator_username")
    op.execute("ALTER TABLE users ADD CONSTRAINT users_username_key UNIQUE (username)")
    op.execute("ALTER TABLE users DROP COLUMN home_tenant_id")
