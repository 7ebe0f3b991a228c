"""Audit chain: append-only entries and signed checkpoints, guarded by triggers.

Revision ID: 0002
"""

from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("""
        CREATE TABLE audit_entries (
            chain_id text NOT NULL,
            seq bigint NOT NULL CHECK (seq >= 1),
            entry bytea NOT NULL,
            leaf_hash bytea NOT NULL CHECK (length(leaf_hash) = 32),
            chain_hash bytea NOT NULL CHECK (length(chain_hash) = 32),
            tenant_id text,
            event_type text NOT NULL,
            ts timestamptz NOT NULL,
            actor text NOT NULL,
            subject_type text,
            subject_id text,
            PRIMARY KEY (chain_id, seq)
        )""")
    op.execute("CREATE INDEX audit_entries_subject ON audit_entries (chain_id, subject_id) WHERE subject_id IS NOT NULL")
    op.execute("""
        CREATE TABLE audit_checkpoints (
            chain_id text NOT NULL,
            size bigint NOT NULL CHECK (size >= 0),
            note text NOT NULL,
            frontier jsonb NOT NULL,
            created_at timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (chain_id, size)
        )""")
    # Speed bumps, not the control (signatures are): refuse rewrites even from the owner.
    op.execute("""
        CREATE FUNCTION audit_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            RAISE EXCEPTION 'audit log is append-only: % on % refused', TG_OP, TG_TABLE_NAME
                USING ERRCODE = 'insufficient_privilege';
        END $$""")
    for table in ("audit_entries", "audit_checkpoints"):
        op.execute(f"""
            CREATE TRIGGER {table}_no_update_delete BEFORE UPDATE OR DELETE ON {table}
            FOR EACH ROW EXECUTE FUNCTION audit_refuse_change()""")
        op.execute(f"""
            CREATE TRIGGER {table}_no_truncate BEFORE TRUNCATE ON {table}
            FOR EACH STATEMENT EXECUTE FUNCTION audit_refuse_change()""")
        op.execute(f"ALTER TABLE {table} ENABLE ALWAYS TRIGGER {table}_no_update_delete")
        op.execute(f"ALTER TABLE {table} ENABLE ALWAYS TRIGGER {table}_no_truncate")


def downgrade() -> None:
    op.execute("DROP TABLE audit_checkpoints")
    op.execute("DROP TABLE audit_entries")
    op.execute("DROP FUNCTION audit_refuse_change()")
