"""Read replicas: the WAL position each API key's last write reached (read-your-writes).

`key_commit_lsns` holds, per key, `pg_current_wal_insert_lsn()` taken on the primary once the
key's write request has committed. A read routed to a replica is served there only when the
replica has replayed at least that far (`app.db.replicas`). UNLOGGED: it is written after every
write request while replicas are configured, and an unlogged write makes no WAL to flush or ship;
the table is read on the primary only (standbys cannot read unlogged tables). A primary crash
empties it: reads then trust replicas until the keys write again (docs/operators/replicas.md).

Revision ID: 0030
"""

from alembic import op

revision = "0030"
down_revision = "0029"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("""
        CREATE UNLOGGED TABLE key_commit_lsns (
            tenant_id text NOT NULL,
            key_id text NOT NULL,
            lsn pg_lsn NOT NULL,
            PRIMARY KEY (tenant_id, key_id)
        )""")


def downgrade() -> None:
    op.execute("DROP TABLE key_commit_lsns")
