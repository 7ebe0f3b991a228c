"""`memwarden_lock_chain` also returns what the append's head check verifies: the head row's
stored bytes and leaf hash, and its predecessor's seq and chain hash. With writers in several
processes the head is almost always someone else's, and reading those rows in a second query
cost one more round trip while the chain's lock was held (docs/benchmarks/, "Audit").

The function also refuses a chain that is not the tenant's own, so it can never pair one
tenant's audit head with another tenant's event-log head.

Revision ID: 0014
"""

from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None

_SIGNATURE = "memwarden_lock_chain(text, text, boolean)"


def upgrade() -> None:
    # DROP and CREATE (in the migration's transaction): OUT columns cannot be added by CREATE OR
    # REPLACE. Callers read columns by name, so code from before this revision keeps working.
    # VOLATILE: each statement in the body takes a fresh snapshot under READ COMMITTED, so the
    # rows are read after the lock is granted and include every earlier holder's commit; the head
    # row's columns come from one statement, so they are one row version.
    op.execute(f"DROP FUNCTION {_SIGNATURE}")
    op.execute("""
        CREATE FUNCTION memwarden_lock_chain(p_chain text, p_tenant text, p_notify boolean,
                                             OUT audit_seq bigint, OUT audit_hash bytea,
                                             OUT head_entry bytea, OUT head_leaf bytea,
                                             OUT prev_seq bigint, OUT prev_hash bytea,
                                             OUT event_id bigint, OUT has_webhooks boolean)
        LANGUAGE plpgsql VOLATILE AS $$
        BEGIN
            IF p_chain IS DISTINCT FROM (CASE WHEN coalesce(p_tenant, '') = '' THEN 'system'
                                              ELSE 'tenant:' || p_tenant END) THEN
                RAISE EXCEPTION 'memwarden_lock_chain: chain % is not the chain of tenant %', p_chain, p_tenant
                    USING ERRCODE = 'invalid_parameter_value';
            END IF;
            PERFORM pg_advisory_xact_lock(hashtext('memwarden.audit:' || p_chain));
            SELECT e.seq, e.chain_hash, e.entry, e.leaf_hash INTO audit_seq, audit_hash, head_entry, head_leaf
              FROM audit_entries e WHERE e.chain_id = p_chain ORDER BY e.seq DESC LIMIT 1;
            IF audit_seq > 1 THEN
                SELECT e.seq, e.chain_hash INTO prev_seq, prev_hash
                  FROM audit_entries e WHERE e.chain_id = p_chain AND e.seq = audit_seq - 1;
            END IF;
            IF p_tenant IS NOT NULL THEN
                SELECT coalesce(max(v.id), 0) INTO event_id FROM events v WHERE v.tenant_id = p_tenant;
                has_webhooks := EXISTS (SELECT 1 FROM webhooks w WHERE w.tenant_id = p_tenant AND w.active);
                IF p_notify THEN
                    PERFORM pg_notify('memwarden_events', p_tenant || ':' || (event_id + 1));
                END IF;
            END IF;
        END $$""")


def downgrade() -> None:
    op.execute(f"DROP FUNCTION {_SIGNATURE}")
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
