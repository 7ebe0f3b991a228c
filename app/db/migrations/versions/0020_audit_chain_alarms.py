"""Fail closed on the whole chain, not only its head: `audit_chain_alarms` records a chain found
not to verify (by an append's head check, a checkpoint, an export or the periodic full
verification), durably, in its own transaction. While a chain has an open alarm (`cleared_at`
NULL) every write to it is refused: `memwarden_lock_chain`, which every write already calls at
commit under the chain's lock, also returns the open alarm (one index probe, no extra round trip).
`memwarden audit clear-alarm` closes it once the whole chain verifies again. `announced_at` is set
when the `audit.chain_broken` event has been written to the tenant's event log.

Revision ID: 0020
"""

from alembic import op

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None

_SIGNATURE = "memwarden_lock_chain(text, text, boolean)"


def _function(alarm_columns: bool) -> str:
    """0016's function; with `alarm_columns`, also the chain's open alarm (NULLs without one)."""
    out = ", OUT alarm_id bigint, OUT alarm_seq bigint, OUT alarm_reason text" if alarm_columns else ""
    read_alarm = """
            SELECT a.id, a.first_bad_seq, a.reason INTO alarm_id, alarm_seq, alarm_reason
              FROM audit_chain_alarms a WHERE a.chain_id = p_chain AND a.cleared_at IS NULL;""" if alarm_columns else ""
    return f"""
        CREATE FUNCTION memwarden_lock_chain(p_chain text, p_tenant text, p_notify boolean,
                                             OUT audit_seq bigint, OUT audit_hash bytea,
                                             OUT head_entry bytea, OUT head_leaf bytea,
                                             OUT prev_seq bigint, OUT prev_hash bytea,
                                             OUT event_id bigint, OUT has_webhooks boolean{out})
        LANGUAGE plpgsql VOLATILE AS $$
        BEGIN
            IF p_chain IS DISTINCT FROM (CASE WHEN coalesce(p_tenant, '') = '' THEN 'system'
                                              ELSE 'tenant:' || p_tenant END) THEN
                RAISE EXCEPTION 'memwarden_lock_chain: chain % is not the chain of tenant %', p_chain, p_tenant
                    USING ERRCODE = 'invalid_parameter_value';
            END IF;
            PERFORM pg_advisory_xact_lock(hashtext('memwarden.audit:' || p_chain));{read_alarm}
            SELECT e.seq, e.chain_hash, e.entry, e.leaf_hash INTO audit_seq, audit_hash, head_entry, head_leaf
              FROM audit_entries e WHERE e.chain_id = p_chain ORDER BY e.seq DESC LIMIT 1;
            IF audit_seq > 1 THEN
                SELECT e.seq, e.chain_hash INTO prev_seq, prev_hash
                  FROM audit_entries e WHERE e.chain_id = p_chain AND e.seq = audit_seq - 1;
            END IF;
            IF p_tenant IS NOT NULL AND p_notify THEN
                SELECT coalesce(max(v.id), 0) INTO event_id FROM events v WHERE v.tenant_id = p_tenant;
                has_webhooks := EXISTS (SELECT 1 FROM webhooks w WHERE w.tenant_id = p_tenant AND w.active);
                PERFORM pg_notify('memwarden_events', p_tenant || ':' || (event_id + 1));
            END IF;
        END $$"""


def upgrade() -> None:
    # No foreign key to tenants: the alarm is written in its own transaction while the refused one
    # may still hold locks on the tenant's row, and a key-share lock would wait for it forever.
    op.execute("""
        CREATE TABLE audit_chain_alarms (
            id bigint GENERATED ALWAYS AS IDENTITY,
            chain_id text NOT NULL,
            tenant_id text,
            first_bad_seq bigint,
            reason text NOT NULL,
            detail text NOT NULL DEFAULT '',
            detected_by text NOT NULL,
            detected_at timestamptz NOT NULL DEFAULT now(),
            announced_at timestamptz,
            cleared_at timestamptz,
            cleared_by text,
            PRIMARY KEY (chain_id, id)
        )""")  # keyed by chain, like audit_entries: distributable by chain_id (docs/operators/scale-out.md)
    # At most one open alarm per chain: a second detection of the same break adds nothing.
    op.execute("CREATE UNIQUE INDEX audit_chain_alarms_open ON audit_chain_alarms (chain_id) WHERE cleared_at IS NULL")
    op.execute("CREATE INDEX audit_chain_alarms_tenant ON audit_chain_alarms (tenant_id, detected_at)")
    # DROP and CREATE: OUT columns cannot be added by CREATE OR REPLACE (see 0014).
    op.execute(f"DROP FUNCTION {_SIGNATURE}")
    op.execute(_function(alarm_columns=True))


def downgrade() -> None:
    op.execute(f"DROP FUNCTION {_SIGNATURE}")
    op.execute(_function(alarm_columns=False))
    op.execute("DROP TABLE audit_chain_alarms")
