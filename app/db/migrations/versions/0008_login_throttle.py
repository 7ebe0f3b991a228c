"""Sign-in throttling state shared by every serving process: one row per (username, client) pair
with its failure count and back-off, plus one per-username row (client '*') for the global ceiling.
Replaces the append-only login_attempts log, which could only express a per-username lock.

Revision ID: 0008
"""

from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("""
        CREATE TABLE login_throttle (
            username text NOT NULL,
            client text NOT NULL,
            failures integer NOT NULL DEFAULT 0,
            last_failure_at timestamptz,
            blocked_until timestamptz,
            last_success_at timestamptz,
            updated_at timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (username, client)
        )""")
    op.execute("CREATE INDEX login_throttle_stale ON login_throttle (updated_at)")
    op.execute("DROP TABLE login_attempts")


def downgrade() -> None:
    op.execute("""
        CREATE TABLE login_attempts (
            username text NOT NULL,
            at timestamptz NOT NULL DEFAULT now(),
            succeeded boolean NOT NULL
        )""")
    op.execute("CREATE INDEX login_attempts_recent ON login_attempts (username, at DESC)")
    op.execute("DROP TABLE login_throttle")
