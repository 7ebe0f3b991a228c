"""Read budgets: at most N distinct memories returned per key, and per agent, per window.

A leaked read key that pages through a tenant's memory (by list, or by many varied recalls) is
stopped once it has been returned `read_budget_per_key` distinct memories in the current window
(`read_budget_per_agent` counts one agent's memories over all keys): the read that would pass the
budget gets 429 `read_budget_exceeded` with `Retry-After` (the window's end) and returns nothing.
Memories already returned in the window count once, so re-reading them is free. A tenant may set
its own budgets (`settings["read_budget"]`, `memwarden tenant set --read-budget-per-key/-agent`).

The count is exact across processes: `memwarden_take_read_budget` (migration 0026) locks the
principal's window row and counts ids not yet seen in it, in one statement in autocommit. The first
refusal of a window writes a `read_budget.exceeded` audit entry and event (so webhooks) and flags
the key for the admin page. Defaults and how they were chosen: docs/benchmarks/ ("Read budgets").
"""

from __future__ import annotations

import math
from contextlib import nullcontext
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any, Sequence

from app.core.timefmt import format_ts, utcnow
from app.db import prepared
from app.errors import ReadBudgetExceeded
from app.repos.audit import reads as repo
from app.services.events import events
from app.services.audit import read_audit
from app.services.tenancy.tenant_config import rules_for

if TYPE_CHECKING:
    from app.core.access import Principal
    from app.services.runtime.context import AppContext

EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def window_of(now: datetime, seconds: int) -> tuple[datetime, datetime]:
    """The fixed, epoch-aligned window holding `now`: (start, end)."""
    seconds = max(seconds, 1)
    start = EPOCH + timedelta(seconds=int((now - EPOCH).total_seconds()) // seconds * seconds)
    return start, start + timedelta(seconds=seconds)


def budgets_for(ctx: AppContext, principal: Principal) -> dict[str, int]:
    """The budgets that apply to the key (`per_key`, `per_agent`): the tenant's own, else the settings'."""
    own = dict(rules_for(ctx, principal).read_budget)
    return {"per_key": own.get("per_key", ctx.settings.read_budget_per_key),
            "per_agent": own.get("per_agent", ctx.settings.read_budget_per_agent)}


def take(ctx: AppContext, principal: Principal, agent_id: str | None, memory_ids: Sequence[str], *,
         conn: prepared.Conn | None = None) -> None:
    """Count the memories a read is about to return against the key's and the agent's budgets;
    raise `ReadBudgetExceeded` (nothing counted) when either would pass its limit. `agent_id`
    None (a workspace file, which belongs to no agent): the key's budget only. `conn`: the
    read's own connection to the primary, in autocommit (or in the outer transaction the sessions
    are bound to), which saves a pool checkout; else one is taken."""
    if not memory_ids:
        return
    budgets = budgets_for(ctx, principal)
    principals, limits = [], []
    if budgets["per_key"] > 0:
        principals.append(f"key:{principal.key_id}")
        limits.append(budgets["per_key"])
    if budgets["per_agent"] > 0 and agent_id is not None:
        principals.append(f"agent:{agent_id}")
        limits.append(budgets["per_agent"])
    if not principals:
        return
    now = utcnow()
    start, end = window_of(now, ctx.settings.read_budget_window_seconds)
    with nullcontext(conn) if conn is not None else prepared.autocommit(ctx.db) as on:
        verdict = repo.take_budget(on, tenant_id=principal.tenant_id, principals=principals, limits=limits,
                                   window_start=start, ids=list(memory_ids))
    if verdict.allowed:
        return
    limit = limits[principals.index(verdict.refused_principal)]
    if verdict.first_refusal:
        _announce(ctx, principal, agent_id, verdict.refused_principal, limit, start)
    kind = verdict.refused_principal.partition(":")[0]
    raise ReadBudgetExceeded(
        f"read budget exceeded: this {'key' if kind == 'key' else 'agent'} was returned {verdict.used} distinct "
        f"memories in this window; the limit is {limit}",
        details={"budget": "per_key" if kind == "key" else "per_agent", "limit": limit, "used": verdict.used,
                 "window_start": format_ts(start), "window_end": format_ts(end)},
        headers={"retry-after": str(max(1, math.ceil((end - now).total_seconds())))})


def _announce(ctx: AppContext, principal: Principal, agent_id: str | None, refused: str, limit: int,
              window_start: datetime) -> None:
    """The first refusal of a window: an audit entry, the `read_budget.exceeded` event (webhooks)
    and the key flagged, in one transaction. A read of no agent's memory (a workspace file) has no
    event: events are about an agent (`agentId`, whom a key's stream may see)."""
    budget = "per_key" if refused.startswith("key:") else "per_agent"
    data: dict[str, Any] = {"budget": budget, "limit": limit, "agent_id": agent_id,
                            "window_start": format_ts(window_start),
                            "window_seconds": ctx.settings.read_budget_window_seconds}
    with ctx.db.sessions.begin() as session:
        ctx.audit.append(session, tenant_id=principal.tenant_id, event_type="read_budget.exceeded",
                         actor=principal.actor, subject={"type": "api_key", "id": principal.key_id}, data=data)
        if agent_id is not None:
            events.emit(session, principal.tenant_id, "read_budget.exceeded", {
                "keyId": principal.key_id, "agentId": agent_id, "budget": budget, "limit": limit,
                "windowStart": format_ts(window_start), "windowSeconds": ctx.settings.read_budget_window_seconds})
        repo.flag_key(session, tenant_id=principal.tenant_id, key_id=principal.key_id, at=utcnow())


def account(ctx: AppContext, principal: Principal, *, operation: str, agent_id: str | None, memory_ids: Sequence[str],
            query: dict[str, Any] | None = None, conn: prepared.Conn | None = None,
            run_id: str | None = None) -> None:
    """What every read that returns memory calls before answering: take the read budget (429
    when spent), then record the read in the audit chain (`app.services.audit.read_audit`). `conn`: as
    for `take`; `run_id`: the agent run the read served, when the reader named one."""
    take(ctx, principal, agent_id, memory_ids, conn=conn)
    read_audit.note_read(ctx, tenant_id=principal.tenant_id, actor=principal.actor, key_id=principal.key_id,
                         agent_id=agent_id, operation=operation, memory_ids=memory_ids, query=query,
                         run_id=run_id)


def purge_ended(ctx: AppContext) -> int:
    """Drop budget windows that ended (background job); returns how many."""
    start, _ = window_of(utcnow(), ctx.settings.read_budget_window_seconds)
    with ctx.db.reader() as conn:
        return repo.purge_windows(conn, before=start)
