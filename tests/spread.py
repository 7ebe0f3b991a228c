"""Spreading a tenant's human decisions over time, for tests of learned rules: a suggestion needs
approvals made on separate occasions over several days, which a test makes in a second."""

from sqlalchemy import text


def spread_decisions(ctx, tenant_id: str, hours: int = 5) -> None:
    """Backdate the tenant's human decisions, newest first, `hours` apart: each is then its own
    occasion, and they span several days (what one person deciding one write at a time leaves)."""
    with ctx.db.sessions.begin() as session:
        session.execute(text(
            "UPDATE changes c SET decided_at = now() - interval '1 hour' * (:h * o.n) "
            "FROM (SELECT id, row_number() OVER (ORDER BY decided_at DESC, id DESC) AS n FROM changes "
            "      WHERE tenant_id = :t AND decided_at IS NOT NULL AND decided_by NOT LIKE 'learned\\_rule:%') o "
            "WHERE c.tenant_id = :t AND c.id = o.id"), {"t": tenant_id, "h": hours})
