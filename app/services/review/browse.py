"""Reviewer-side reads of live memory: tenant-wide browsing and search, one memory with its history.

Unlike the agent API (one agent per request), a reviewer sees every agent their role's allow-list
covers. The allow-list (glob patterns) is applied in SQL, so keyset pages stay full, and checked
again in Python on every row, so a translation slip can shorten a page but never leak a row.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Sequence

from app.core.access import agent_allowed
from app.core.cursor import encode_cursor
from app.core.diff import STRONG_MATCH_COSINE
from app.core.timefmt import format_ts
from app.errors import NotFound
from app.repos.audit import audit_reads
from app.repos.router import backends as backends_repo
from app.repos.review import browse as repo
from app.repos.review import changes as changes_repo
from app.repos.memory import memories as memories_repo
from app.repos.memory.memories import Scope
from app.services.audit import recover
from app.services.audit.audit import chain_for
from app.services.runtime.context import AppContext
from app.services.memory.memories import entry_json
from app.services.runtime.outbound import shown_reason

MAX_QUERY = 500


# --- browsing ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class BrowseFilter:
    agent_id: str | None = None
    user_id: str | None = None
    type: str | None = None
    tag: str | None = None
    query: str | None = None


def browse(ctx: AppContext, *, tenant_id: str, agents: Sequence[str], flt: BrowseFilter, limit: int = 50,
           after: tuple[datetime, str] | None = None) -> tuple[list[dict[str, Any]], str | None]:
    """Live, unexpired memories of a tenant the allow-list covers, newest first; (entries, next cursor).

    `flt.query` is a web-search-style full-text query on content (or an exact memory id)."""
    with ctx.db.sessions() as session:
        rows = repo.browse_page(session, tenant_id=tenant_id, agents=agents, agent_id=flt.agent_id,
                                user_id=flt.user_id, type_=flt.type, tag=flt.tag,
                                query=flt.query[:MAX_QUERY] if flt.query else None, limit=limit + 1, after=after)
    more = len(rows) > limit
    rows = rows[:limit]
    cursor = encode_cursor(rows[-1].created_at, rows[-1].id) if more and rows else None
    return [entry_json(m) for m in rows if agent_allowed(m.agent_id, tuple(agents))], cursor


def _actor_text(actor: Any) -> str:
    if not isinstance(actor, dict):
        return str(actor)
    name = actor.get("name") or actor.get("id") or "?"
    return f"{name} ({actor.get('kind', '?')})"


def locate(ctx: AppContext, tenant_ids: Sequence[str], memory_id: str) -> tuple[str, str] | None:
    """(tenant id, agent id) of a live, unexpired memory in one of `tenant_ids`, or None. Callers
    check who may see its agent."""
    with ctx.db.sessions() as session:
        row = memories_repo.live_owner(session, tenant_ids=tenant_ids, memory_id=memory_id)
    return (row.tenant_id, row.agent_id) if row else None


def memory_detail(ctx: AppContext, *, tenant_id: str, agents: Sequence[str], memory_id: str) -> dict[str, Any]:
    """One live memory (Entry plus a few governance fields) and its audit trail, oldest first.

    The trail lists event type, time and actor only: audit entries hold digests, never content."""
    with ctx.db.sessions() as session:
        memory = memories_repo.get_visible(session, scope=Scope(tenant_id), memory_id=memory_id)
        if memory is None or not agent_allowed(memory.agent_id, tuple(agents)):
            raise NotFound("memory not found")
        entry = entry_json(memory)
        extra = {"recall_count": memory.recall_count, "change_id": memory.change_id, "run_id": memory.run_id,
                 "node_id": memory.node_id,
                 "pending_changes": [c for c in changes_repo.pending_touching(
                     session, tenant_id=tenant_id, memory_id=memory_id) if agent_allowed(c.agent_id, tuple(agents))],
                 # A staged remember about the same thing may supersede this memory when approved.
                 "pending_writes": changes_repo.pending_writes_about(
                     session, tenant_id=tenant_id, memory_id=memory_id, min_cosine=STRONG_MATCH_COSINE)}
        rows = audit_reads.about_subject(session, chain_id=chain_for(tenant_id), subject_id=memory_id)
        deliveries = backends_repo.deliveries_of(session, tenant_id=tenant_id, memory_id=memory_id)
    extra["deliveries"] = [{"backend": d.name, "status": d.status, "attempts": d.attempt, "action": d.action,
                            "error": shown_reason(d.error), "delivered_at": format_ts(d.delivered_at),
                            "backend_ref": d.backend_ref}
                           for d in deliveries]
    events = []
    for row in rows:
        stored = json.loads(row.entry)
        events.append({"seq": row.seq, "type": stored.get("type"), "ts": stored.get("ts"),
                       "actor": _actor_text(stored.get("actor"))})
    return {"memory": entry, "extra": extra, "events": events}


# --- the review queue's row previews -------------------------------------------------------------

PREVIEW_SOURCE_CHARS = 2000  # a preview shows one line; never load a whole large memory for it


def queue_previews(ctx: AppContext, tenant_id: str, changes: Sequence[Any]) -> dict[str, dict[str, Any]]:
    """What each queued change is about, for one line of the queue: `{change id: {"text", "type"}}`.

    A staged remember shows the start of its (already redacted) content; a forget or merge the
    content of what it targets (the first memory forgotten, the canonical memory merged into); other
    operations a summary. One query for the whole page."""
    wanted = [_preview_target(c) for c in changes]
    found: dict[str, Any] = {}
    if any(wanted):
        with ctx.db.sessions() as session:
            found = repo.previews(session, tenant_id=tenant_id, memory_ids=[i for i in wanted if i],
                                  chars=PREVIEW_SOURCE_CHARS)
    previews: dict[str, dict[str, Any]] = {}
    for change, target in zip(changes, wanted):
        request = change.request or {}
        row = found.get(target) if target else None
        content = (row.content or "") if row is not None else None
        text, memory_type = "", None
        if change.operation in ("remember", "quarantine") and row is not None:
            text, memory_type = content, row.type
        elif change.operation == "forget":
            count = len(change.memory_ids or request.get("ids") or [])
            verb = "permanently delete" if request.get("hard_delete") else "forget"
            if content is not None:
                more = f" (+{count - 1} more)" if count > 1 else ""
                text = f"{verb}: “{_first_line(content)}”{more}"
            else:
                ids = request.get("ids") or []
                text = (f"{verb} {len(ids)} memor{'y' if len(ids) == 1 else 'ies'}: {', '.join(ids[:3])}" if ids
                        else f"{verb} memories matching " + json.dumps(request.get("filter") or {}, sort_keys=True))
        elif change.operation == "merge":
            count = len(request.get("duplicates") or [])
            into = f"“{_first_line(content)}”" if content is not None else request.get("canonical", "?")
            text = f"merge {count} memor{'y' if count == 1 else 'ies'} into {into} ({request.get('strategy', 'keep_canonical')})"
        elif change.operation == "expire":
            text = f"{request.get('action', 'forget')} memories where " + json.dumps(request.get("policy") or {},
                                                                                      sort_keys=True)
        elif change.operation == "revert":
            undone = recover.ENDED_AS.get(str(request.get("reverts")), "?")
            text = f"revert the {undone} of {change.memory_ids[0] if change.memory_ids else '?'}"
        elif change.operation in ("workspace_write", "workspace_delete"):
            body = str(request.get("content") or "")[:PREVIEW_SOURCE_CHARS]
            text = f"{request.get('path', '?')}: {body}" if change.operation == "workspace_write" \
                else f"delete {request.get('path', '?')}"
        # `quotes`: the live memory whose content the line shows (a read); a staged write's own
        # content is not one.
        quotes = target if content is not None and change.operation in ("forget", "merge", "quarantine") else None
        previews[change.id] = {"text": text, "type": memory_type, "quotes": quotes}
    return previews


def _preview_target(change: Any) -> str | None:
    """The memory whose content a queue row shows: the staged (or quarantined) one, the first
    forgotten, the canonical."""
    if change.operation in ("remember", "quarantine", "forget") and change.memory_ids:
        return change.memory_ids[0]
    if change.operation == "merge":
        return (change.request or {}).get("canonical")
    return None


def _first_line(text: str, limit: int = 80) -> str:
    """The first non-blank line, cut to `limit` characters (… when cut), so a summary fits one row."""
    line = next((line.strip() for line in text.splitlines() if line.strip()), "")
    return line[:limit] + ("…" if len(line) > limit else "")


def still_pending(ctx: AppContext, tenant_id: str, change_ids: Sequence[str]) -> set[str]:
    """Which of these changes of the tenant are still pending (a queue drops the others it shows)."""
    if not change_ids:
        return set()
    with ctx.db.sessions() as session:
        return changes_repo.still_pending(session, tenant_id=tenant_id, change_ids=change_ids)
