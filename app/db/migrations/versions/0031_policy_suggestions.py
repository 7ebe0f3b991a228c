"""Policy rules suggested from decision history (`GET /v1/policy/suggestions`).

`policy_suggestions`: one row per suggested pattern and tenant. The id is derived from the rule's
match (so the same pattern keeps its id while its evidence changes); `status` open / accepted /
dismissed; a dismissed row keeps the support it had (`dismissed_support`) so it reopens only when
the evidence grows materially. Keyed by tenant (distributed by `tenant_id`, docs/operators/scale-out.md).

Revision ID: 0031
"""

from alembic import op

revision = "0031"
down_revision = "0030"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("""
        CREATE TABLE policy_suggestions (
            tenant_id text NOT NULL REFERENCES tenants (id),
            id text NOT NULL,
            match jsonb NOT NULL,
            action text NOT NULL,
            evidence jsonb NOT NULL,
            status text NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'accepted', 'dismissed')),
            dismissed_support integer,
            rule_id text,
            decided_by text,
            decided_at timestamptz,
            created_at timestamptz NOT NULL DEFAULT now(),
            updated_at timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (tenant_id, id)
        )""")


def downgrade() -> None:
    op.execute("DROP TABLE policy_suggestions")
