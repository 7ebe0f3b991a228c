"""Audit a throttled sign-in once per block, not once per refused attempt.

Refused attempts are unauthenticated and cheap (no password hash), so auditing each one let
anyone append entries to a tenant's audit chain — or the system chain, for unknown usernames — as
fast as they could send requests. `refusal_audited_for` holds the `blocked_until` whose first
refusal was audited; later refusals under the same block are answered 429 without an entry.

Revision ID: 0018
"""

from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("ALTER TABLE login_throttle ADD COLUMN refusal_audited_for timestamptz")


def downgrade() -> None:
    op.execute("ALTER TABLE login_throttle DROP COLUMN refusal_audited_for")
