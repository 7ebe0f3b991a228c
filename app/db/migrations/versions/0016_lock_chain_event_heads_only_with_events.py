"""`memwarden_lock_chain` reads the event-log head and the tenant's webhooks only for a transaction
that writes events (`p_notify`, which already meant that: the wake-up NOTIFY goes with them).
Those two lookups ran under the chain's lock on every append, about half of the function's time
after the lock is granted, and an audit-only transaction never used them (docs/benchmarks/,
"Audit"). Same signature and columns; `event_id` and `has_webhooks` are NULL without events.

Revision ID: 0016
"""

from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def _function(event_heads_when: str) -> str:
    """0014's function, reading the event-log head and webhooks when `event_heads_when` holds."""
    return f"""
        CREATE OR REPLACE FUNCTION memwarden_lock_chain(p_chain text, p_tenant text, p_notify boolean,
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
            IF {event_heads_when} THEN
                SELECT coalesce(max(v.id), 0) INTO event_id FROM events v WHERE v.tenant_id = p_tenant;
                has_webhooks := EXISTS (SELECT 1 FROM webhooks w WHERE w.tenant_id = p_tenant AND w.active);
                IF p_notify THEN
                    PERFORM pg_notify('memwarden_events', p_tenant || ':' || (event_id + 1));
                END IF;
            END IF;
        END $$"""


def upgrade() -> None:
    op.execute(_function("p_tenant IS NOT NULL AND p_notify"))


def downgrade() -> None:
    op.execute(_function("p_tenant IS NOT NULL"))
