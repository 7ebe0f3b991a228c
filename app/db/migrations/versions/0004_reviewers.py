"""Reviewers: users, per-tenant roles with agent allow-lists, revocable sessions, sign-in throttling.

Revision ID: 0004
"""

from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("""
        CREATE TABLE users (
            id text PRIMARY KEY,
            username text NOT NULL UNIQUE CHECK (username ~ '^[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}$'),
            password_hash text NOT NULL,
            created_at timestamptz NOT NULL DEFAULT now(),
            disabled_at timestamptz,
            sessions_valid_after timestamptz NOT NULL DEFAULT now()
        )""")
    op.execute("""
        CREATE TABLE user_roles (
            user_id text NOT NULL REFERENCES users(id),
            tenant_id text NOT NULL REFERENCES tenants(id),
            role text NOT NULL CHECK (role IN ('viewer', 'reviewer', 'auditor', 'admin')),
            agents text[] NOT NULL DEFAULT '{*}',
            PRIMARY KEY (user_id, tenant_id)
        )""")
    op.execute("""
        CREATE TABLE web_sessions (
            id text PRIMARY KEY,
            user_id text NOT NULL REFERENCES users(id),
            created_at timestamptz NOT NULL DEFAULT now(),
            last_seen_at timestamptz NOT NULL DEFAULT now(),
            revoked_at timestamptz
        )""")
    op.execute("CREATE INDEX web_sessions_user ON web_sessions (user_id)")
    op.execute("""
        CREATE TABLE login_attempts (
            username text NOT NULL,
            at timestamptz NOT NULL DEFAULT now(),
            succeeded boolean NOT NULL
        )""")
    op.execute("CREATE INDEX login_attempts_recent ON login_attempts (username, at DESC)")


def downgrade() -> None:
    for table in ("login_attempts", "web_sessions", "user_roles", "users"):
        op.execute(f"DROP TABLE {table}")
