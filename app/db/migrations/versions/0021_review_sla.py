"""Review SLAs: `changes.sla_announced_at` records that a pending change past its tenant's review
SLA (`settings["review_sla_seconds"]`) has had its `review.sla_breached` event written, so each
breach is announced once, whichever process runs the round. `webhooks.format` picks the body a
webhook receives: `json` (the signed event envelope) or `slack` (`{"text": ...}`, an incoming-webhook
message).

Revision ID: 0021
"""

from alembic import op

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("ALTER TABLE changes ADD COLUMN sla_announced_at timestamptz")
    # The announcing round's scan: pending changes not yet announced, oldest first, per tenant
    # (announced ones leave the index, so the round reads only what it may still announce).
    op.execute("CREATE INDEX changes_sla_unannounced ON changes (tenant_id, submitted_at)"
               " WHERE status = 'pending' AND sla_announced_at IS NULL")
    op.execute("ALTER TABLE webhooks ADD COLUMN format text NOT NULL DEFAULT 'json'"
               " CONSTRAINT webhooks_format CHECK (format IN ('json', 'slack'))")


def downgrade() -> None:
    op.execute("ALTER TABLE webhooks DROP COLUMN format")
    op.execute("DROP INDEX changes_sla_unannounced")
    op.execute("ALTER TABLE changes DROP COLUMN sla_announced_at")
