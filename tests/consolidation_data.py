"""Episodic notes on distinct days for consolidation tests, written through the import path
(`prepare_remember` + `write_prepared`: redaction, screening, policy), each with its own day."""

from __future__ import annotations

from datetime import timedelta

from app.core.access import Principal
from app.core.ids import new_id
from app.core.timefmt import utcnow
from app.services.memory import remembering
from app.services.tenancy.tenant_config import rules_for

VEGETARIAN = ["Booked dinner at Tasca; the user asked for a vegetarian menu.",
              "Hotel breakfast order: the user asked for a vegetarian menu again.",
              "Catering for the offsite: the user asked for a vegetarian menu.",
              "Lunch at the co-working space, the user asked for a vegetarian menu."]
NOISE = ["Looked up the opening hours of the pharmacy.", "Renewed the parking permit for the Porto office.",
         "Printed the boarding pass for Madrid.", "Filed the receipt from the bakery."]


def write_notes(ctx, tenant_id: str, notes: list[tuple[float, str]], agent_id: str = "assistant",
                user_id: str | None = "user-1", confidence: float = 0.9) -> list[str]:
    """`notes` are (days ago, content); returns the memory ids in order."""
    principal = Principal(tenant_id=tenant_id, key_id="key_seed", scopes=frozenset({"memory:write"}), agents=("*",))
    rules, now = rules_for(ctx, principal), utcnow()
    vectors = ctx.embedder.embed([content for _, content in notes])
    writes = []
    for days_ago, content in notes:
        at = now - timedelta(days=days_ago)
        body = {"agent_id": agent_id, "type": "episodic", "content": content, "confidence": confidence}
        if user_id is not None:
            body["user_id"] = user_id
        writes.append(remembering.prepare_remember(ctx, principal, body, rules, memory_id=new_id("mem"), created_at=at,
                                           updated_at=at, precheck=False))
    with ctx.db.sessions.begin() as session:
        remembering.write_prepared(ctx, session, principal, writes, [v.tolist() for v in vectors])
    return [w.memory.id for w in writes]


def preference_and_noise(ctx, tenant_id: str, **kw) -> tuple[list[str], list[str]]:
    """A preference on four distinct recent days, and four one-off notes three weeks old."""
    evidence = write_notes(ctx, tenant_id, [(1 + 2 * i, text) for i, text in enumerate(VEGETARIAN)], **kw)
    noise = write_notes(ctx, tenant_id, [(21 + i, text) for i, text in enumerate(NOISE)], confidence=0.5, **kw)
    return evidence, noise
