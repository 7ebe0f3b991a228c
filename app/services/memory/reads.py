"""Memory reads for agents: get, list, history.

With `MEMWARDEN_INTEGRITY_FAIL_CLOSED`, a read that would serve a row differing from its last
audited state is refused (`app.services.audit.state_check`); a read served is taken from the key's
read budget and recorded (`read_budgets.account`). History is read from the audit log, so it never
holds content: only digests and identifiers.
"""

from __future__ import annotations

import json
from typing import Any

from app.core.access import Principal
from app.core.cursor import encode_cursor
from app.errors import NotFound
from app.repos.audit import audit_reads
from app.repos.memory import memories as repo
from app.repos.memory.memories import Scope
from app.services.audit import read_budgets, state_check
from app.services.audit.audit import chain_for
from app.services.memory.memories import _as_of, _timestamp, entry_json, require_agent
from app.services.runtime.context import AppContext
from app.services.runtime.cursors import decode_cursor


def get_memory(ctx: AppContext, principal: Principal, memory_id: str, as_of: Any = None) -> dict[str, Any]:
    """A visible memory in the key's tenant, for an agent the key may read; 404 otherwise."""
    as_of_dt = _timestamp(as_of, "/as_of") if as_of is not None else None
    with ctx.db.stale_session(principal.tenant_id, principal.key_id) as session:
        memory = repo.get_visible(session, scope=Scope(principal.tenant_id, as_of=as_of_dt), memory_id=memory_id)
        if memory is None or not principal.may_act_for(memory.agent_id):
            raise NotFound("memory not found")
        mismatched = state_check.served_mismatches(ctx, session, principal.tenant_id, [memory.id])
        entry = entry_json(memory)
    state_check.refuse_mismatched(ctx, principal.tenant_id, mismatched)
    read_budgets.account(ctx, principal, operation="get", agent_id=entry["agent_id"], memory_ids=[memory_id],
                         query={"id": memory_id, "as_of": as_of})
    return entry


def list_memories(ctx: AppContext, principal: Principal, query: dict[str, Any]) -> dict[str, Any]:
    """Newest first with an opaque keyset cursor."""
    require_agent(principal, query["agent_id"])
    scope = Scope(principal.tenant_id, query["agent_id"], query.get("user_id"), _as_of(query))
    limit = query.get("limit", 100)
    after = decode_cursor(query["cursor"]) if query.get("cursor") else None
    with ctx.db.stale_session(principal.tenant_id, principal.key_id) as session:
        rows = repo.page(session, scope=scope, limit=limit + 1, after=after, type_=query.get("type"),
                         tag=query.get("tag"))
        more = len(rows) > limit
        rows = rows[:limit]
        mismatched = state_check.served_mismatches(ctx, session, principal.tenant_id, [m.id for m in rows])
    state_check.refuse_mismatched(ctx, principal.tenant_id, mismatched)
    cursor = encode_cursor(rows[-1].created_at, rows[-1].id) if more else None
    read_budgets.account(ctx, principal, operation="list", agent_id=query["agent_id"],
                         memory_ids=[m.id for m in rows], query=query)
    return {"items": [entry_json(m) for m in rows], "next_cursor": cursor}


def history(ctx: AppContext, principal: Principal, memory_id: str) -> dict[str, Any]:
    """The memory's audit trail, oldest first (never content: only digests and identifiers)."""
    with ctx.db.sessions() as session:
        memory = repo.get_in_tenant(session, tenant_id=principal.tenant_id, memory_id=memory_id)
        if (memory is None or memory.status in ("pending", "rejected", "withdrawn")
                or not principal.may_act_for(memory.agent_id)):
            raise NotFound("memory not found")
        rows = audit_reads.about_subject(session, chain_id=chain_for(principal.tenant_id), subject_id=memory_id)
        agent_id = memory.agent_id
    read_budgets.account(ctx, principal, operation="history", agent_id=agent_id, memory_ids=[memory_id],
                         query={"id": memory_id})
    events = []
    for row in rows:
        entry = json.loads(row.entry)
        events.append({"seq": row.seq, "type": entry["type"], "ts": entry["ts"], "actor": entry["actor"],
                       "data": entry["data"]})
    return {"memory_id": memory_id, "events": events}
