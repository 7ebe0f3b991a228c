"""Per-key rate-limit buckets shared by every serving process and worker.

One row per API key holding a token bucket (tokens left and when they were last counted). It is
UNLOGGED: the row is rewritten on every authenticated request, and an unlogged write produces no WAL,
so the autocommit update does not wait for a WAL flush. After a database crash the table is empty,
which only means every key starts again with a full bucket. `tenant_id` leads the key so the table
can be distributed by tenant (docs/operators/scale-out.md); there is no foreign key, so the hot-path update
checks nothing else.

Revision ID: 0011
"""

from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("""
        CREATE UNLOGGED TABLE rate_limit_buckets (
            tenant_id text NOT NULL,
            key_id text NOT NULL,
            tokens double precision NOT NULL,
            allowed boolean NOT NULL,
            updated_at timestamptz NOT NULL,
            PRIMARY KEY (tenant_id, key_id)
        )""")


def downgrade() -> None:
    op.execute("DROP TABLE rate_limit_buckets")
