"""Citus-ready keys: every primary key, unique key and foreign key of a tenant's table includes
`tenant_id`, so the tables can be distributed by tenant and colocated (docs/operators/scale-out.md).

Surrogate keys become `(id, tenant_id)`: `id` stays the leading column, so every existing lookup by
id alone (authentication by key id, the webhook delivery worker) keeps its index, and a tenant's
lookup by (tenant, id) uses the same one. Ids are random, so nothing that was unique stops being so
in practice; the database now guarantees it per tenant, which is all Citus can check per shard.
Tenant-less tables (tenants, users, web sessions, sign-in throttling) become reference tables and
the audit tables are distributed by chain; tests/integration/test_citus_ready.py holds the lists.

Revision ID: 0013
"""

from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None

# table -> (primary key constraint, its single column)
SURROGATE_KEYS = {
    "api_keys": ("api_keys_pkey", "id"),
    "changes": ("changes_pkey", "id"),
    "compaction_runs": ("compaction_runs_pkey", "id"),
    "memories": ("memories_pkey", "id"),
    "memory_refs": ("memory_refs_pkey", "ref"),
    "runs": ("runs_pkey", "id"),
    "tenant_secrets": ("tenant_secrets_pkey", "id"),
    "webhooks": ("webhooks_pkey", "id"),
    "webhook_deliveries": ("webhook_deliveries_pkey", "id"),
}


def upgrade() -> None:
    # The delivery -> webhook foreign key depends on webhooks' primary key: drop it first.
    op.execute("ALTER TABLE webhook_deliveries DROP CONSTRAINT webhook_deliveries_webhook_id_fkey")
    for table, (pkey, column) in SURROGATE_KEYS.items():
        op.execute(f"ALTER TABLE {table} DROP CONSTRAINT {pkey}, ADD CONSTRAINT {pkey} PRIMARY KEY ({column}, tenant_id)")
    op.execute("""
        ALTER TABLE webhook_deliveries
            ADD CONSTRAINT webhook_deliveries_webhook_id_fkey FOREIGN KEY (webhook_id, tenant_id)
                REFERENCES webhooks (id, tenant_id) ON DELETE CASCADE,
            DROP CONSTRAINT webhook_deliveries_webhook_id_event_id_key,
            ADD CONSTRAINT webhook_deliveries_webhook_id_event_id_key UNIQUE (webhook_id, event_id, tenant_id)""")
    op.execute("""
        ALTER TABLE api_keys
            DROP CONSTRAINT api_keys_token_hash_key,
            ADD CONSTRAINT api_keys_token_hash_key UNIQUE (token_hash, tenant_id)""")


def downgrade() -> None:
    op.execute("""
        ALTER TABLE api_keys
            DROP CONSTRAINT api_keys_token_hash_key,
            ADD CONSTRAINT api_keys_token_hash_key UNIQUE (token_hash)""")
    op.execute("""
        ALTER TABLE webhook_deliveries
            DROP CONSTRAINT webhook_deliveries_webhook_id_fkey,
            DROP CONSTRAINT webhook_deliveries_webhook_id_event_id_key,
            ADD CONSTRAINT webhook_deliveries_webhook_id_event_id_key UNIQUE (webhook_id, event_id)""")
    for table, (pkey, column) in SURROGATE_KEYS.items():
        op.execute(f"ALTER TABLE {table} DROP CONSTRAINT {pkey}, ADD CONSTRAINT {pkey} PRIMARY KEY ({column})")
    op.execute("""
        ALTER TABLE webhook_deliveries
            ADD CONSTRAINT webhook_deliveries_webhook_id_fkey FOREIGN KEY (webhook_id)
                REFERENCES webhooks (id) ON DELETE CASCADE""")
