"""Browse and search live memory (viewer role and up). Pages work without JavaScript; htmx swaps
only the result list when filtering or paging. Permission checks live here, never in templates."""

from __future__ import annotations

import json
from urllib.parse import urlencode

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request

from app.errors import NotFound
from app.services.review import browse
from app.services.audit import read_audit
from app.services.runtime.cursors import decode_cursor
from app.services.tenancy.users import Reviewer, TenantRole
from app.web.auth import current_user, pick_tenant
from app.web.reads import ReadingRoute
from app.web.templating import is_htmx, render, tenant_query

PAGE = 50
READERS_SHOWN = 20  # the newest reads on a memory page; the rest: `memwarden audit readers`
TYPES = ("semantic", "episodic", "procedural", "emotional")
FILTERS = ("agent", "user", "type", "tag", "q")


def wants_fragment(request: Request) -> bool:
    """An htmx request for a part of the page (a history restore wants the whole page)."""
    return is_htmx(request) and request.headers.get("hx-history-restore-request") != "true"


def _filters(request: Request) -> tuple[browse.BrowseFilter, dict[str, str]]:
    q = request.query_params
    raw = {k: q.get(k, "").strip() for k in FILTERS}
    raw["type"] = raw["type"] if raw["type"] in TYPES else ""
    raw["q"] = raw["q"][:browse.MAX_QUERY]
    for key in ("agent", "user", "tag"):
        raw[key] = raw[key][:200]
    flt = browse.BrowseFilter(agent_id=raw["agent"] or None, user_id=raw["user"] or None, type=raw["type"] or None,
                              tag=raw["tag"] or None, query=raw["q"] or None)
    return flt, {k: v for k, v in raw.items() if v}


async def index(request: Request):
    user = current_user(request)
    role = pick_tenant(request, user, "read")
    flt, shown = _filters(request)
    after_raw = request.query_params.get("after")
    after = decode_cursor(after_raw, "/after") if after_raw else None
    rows, cursor = await run_in_threadpool(browse.browse, request.app.state.ctx, tenant_id=role.tenant_id,
                                           agents=role.agents, flt=flt, limit=PAGE, after=after)
    await run_in_threadpool(_note_listed, request.app.state.ctx, user, role.tenant_id, rows, shown)
    context = {
        "role": role, "tenants": user.tenants_with("read"), "rows": rows, "filters": shown, "types": TYPES,
        "paged": after is not None, "first_url": f"/memories?{tenant_query(role.tenant_name, shown)}",
        "next_url": f"/memories?{tenant_query(role.tenant_name, shown, after=cursor)}" if cursor else None,
    }
    template = "memories/_results.html" if wants_fragment(request) else "memories/index.html"
    return render(request, template, context)


def _note_listed(ctx, user: Reviewer, tenant_id: str, rows: list[dict], shown: dict[str, str]) -> None:
    """The list quotes each memory's content: one read per agent listed (people have no budget)."""
    by_agent: dict[str, list[str]] = {}
    for row in rows:
        by_agent.setdefault(row["agent_id"], []).append(row["id"])
    for agent_id, ids in by_agent.items():
        read_audit.note_read(ctx, tenant_id=tenant_id, actor=user.actor, key_id=None, agent_id=agent_id,
                             operation="browse", memory_ids=ids, query=shown)


def _locate(ctx, user: Reviewer, memory_id: str) -> TenantRole:
    """The role under which this user may open the memory; 404 for other tenants and hidden agents."""
    found = browse.locate(ctx, [role.tenant_id for role in user.roles], memory_id)
    if found is None or not user.may("read", found[0], found[1]):
        raise NotFound("memory not found")
    return user.role_in(found[0])


async def detail(request: Request):
    user = current_user(request)
    ctx = request.app.state.ctx
    memory_id = request.path_params["memory_id"]
    role = await run_in_threadpool(_locate, ctx, user, memory_id)
    view = await run_in_threadpool(browse.memory_detail, ctx, tenant_id=role.tenant_id, agents=role.agents,
                                   memory_id=memory_id)
    memory = view["memory"]
    # A person reading a memory's content is a read like an agent's (no budget: people are
    # accountable by sign-in, and their views are recorded the same way).
    await run_in_threadpool(read_audit.note_read, ctx, tenant_id=role.tenant_id, actor=user.actor, key_id=None,
                            agent_id=memory["agent_id"], operation="view", memory_ids=[memory_id])
    readers = None
    if role.can("audit"):
        readers = await run_in_threadpool(read_audit.readers, ctx, role.tenant_id, memory_id, READERS_SHOWN)
    return render(request, "memories/detail.html", {
        "role": role, "memory": memory, "extra": view["extra"], "events": view["events"], "readers": readers,
        "metadata_json": json.dumps(memory["metadata"], indent=2, ensure_ascii=False, sort_keys=True),
        "back_url": f"/memories?{urlencode({'tenant': role.tenant_name})}",
    })


routes = [
    ReadingRoute("/memories", index, methods=["GET"]),
    ReadingRoute("/memories/{memory_id}", detail, methods=["GET"]),
]
