"""One round trip for what a commit-time write needs under a chain's lock.

Revision ID: 0007
"""

from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # VOLATILE: each statement in the body takes a fresh snapshot under READ COMMITTED, so the
    # heads are read after the lock is granted and include every earlier holder's commit.
    op.execute("""
        CREATE FUNCTION memwarden_lock_chain(p_chain text, p_tenant text, p_notify boolean,
                                             OUT audit_seq bigint, OUT audit_hash bytea,
                                             OUT event_id bigint, OUT has_webhooks boolean)
        LANGUAGE plpgsql VOLATILE AS $$
        BEGIN
            PERFORM pg_advisory_xact_lock(hashtext('memwarden.audit:' || p_chain));
            SELECT e.seq, e.chain_hash INTO audit_seq, audit_hash
              FROM audit_entries e WHERE e.chain_id = p_chain ORDER BY e.seq DESC LIMIT 1;
            IF p_tenant IS NOT NULL THEN
                SELECT coalesce(max(v.id), 0) INTO event_id FROM events v WHERE v.tenant_id = p_tenant;
                has_webhooks := EXISTS (SELECT 1 FROM webhooks w WHERE w.tenant_id = p_tenant AND w.active);
                IF p_notify THEN
                    PERFORM pg_notify('memwarden_events', p_tenant || ':' || (event_id + 1));
                END IF;
            END IF;
        END $$""")


def downgrade() -> None:
    op.execute("DROP FUNCTION memwarden_lock_chain(text, text, boolean)")
