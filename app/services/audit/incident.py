"""The incident report of a recover: what each poisoned memory could have influenced.

For a recover target (a principal and a window, or the id of a recover that ran), the report
lists each recovered memory (`recover.roots_of`: what the principal wrote there, in any status,
and the canonical memories of its merges), every memory derived from it transitively
(`derivations.blast_radius`, with the path and the kind and maker of each edge), and every read of
the read audit that returned any of them once it could hold the poison: a read of a merge's
canonical memory before the poison was merged into it is not counted. Each read says who (actor,
key), for which agent, by which route (`operation`), when, and its audit entry's seq.

The report is ids, statuses, times and digests: no memory content, so it is no read of memory
(the auditors' page that quotes content records that itself). It is computed on every request.
"""

from __future__ import annotations

import json
from typing import Any, Callable

from app.core.timefmt import format_ts, utcnow
from app.errors import NotFound, ValidationFailed
from app.repos.audit import audit_reads, recovery
from app.repos.memory import derivations as derivations_repo
from app.services.review import change_reads
from app.services.memory import derivations
from app.services.audit import read_audit, recover
from app.services.audit.audit import actor_label, chain_for
from app.services.runtime.context import AppContext

KIND = "memwarden.incident-report"
EXCERPT_CHARS = 280
"""How much of a memory's content the auditors' page quotes."""


def target_of(ctx: AppContext, tenant_id: str, recover_id: str) -> tuple[recover.Target, dict[str, Any]]:
    """The target of the tenant's recover `recover_id` (from its audit entry) and who ran it when; 404
    for a recover the tenant never ran. A window the recover left open ends when it ran."""
    with ctx.db.sessions() as session:
        rows = audit_reads.about_subject(session, chain_id=chain_for(tenant_id), subject_id=recover_id)
    entries = [json.loads(bytes(entry)) for _, entry in rows]
    entry = next((e for e in entries if e.get("type") == "recover"), None)
    if entry is None:
        raise NotFound("recover not found")
    data = entry["data"]
    principal = data["principal"]
    target = recover.parse_target(**{principal["kind"]: principal["id"]}, since=data["since"],
                                  until=data.get("until") or entry["ts"])
    return target, {"recover_id": recover_id, "recovered_at": entry["ts"], "recovered_by": actor_label(entry["actor"])}


def report_of_recover(ctx: AppContext, tenant_id: str, recover_id: str) -> dict[str, Any]:
    """The incident report of the tenant's recover `recover_id`: its target, and who ran it when."""
    target, ran = target_of(ctx, tenant_id, recover_id)
    return report(ctx, tenant_id, target, ran=ran)


def report(ctx: AppContext, tenant_id: str, target: recover.Target, *,
           ran: dict[str, Any] | None = None) -> dict[str, Any]:
    """The incident report of `target` (see the module docstring); `ran`: the recover that ran
    (`target_of`'s second value), when the report is of one."""
    read_audit.flush(ctx)  # this process's reads so far are in it too
    with ctx.db.sessions() as session:
        if target.kind == "key" and not recovery.key_known(session, tenant_id=tenant_id, key_id=target.value):
            raise ValidationFailed.at("/key", f"no API key {target.value!r} in this tenant")
        roots = recover.roots_of(session, tenant_id, target)
        radius = derivations.blast_radius(session, tenant_id=tenant_id, roots=roots)
        memories = recovery.memories_by_id(session, tenant_id=tenant_id,
                                           ids=sorted(set(roots) | radius.derived_ids()))
        since = radius.first_tainted()
        for root in roots:
            if root in memories:
                since[root] = memories[root].created_at
        reads = derivations_repo.reads_of(session, tenant_id=tenant_id, chain_id=chain_for(tenant_id), since=since)
    return _build(tenant_id, target, ran, roots, radius, memories, reads)


def _memory_json(memory) -> dict[str, Any]:
    return {"memory_id": memory.id, "agent_id": memory.agent_id, "user_id": memory.user_id,
            "status": memory.status, "created_at": format_ts(memory.created_at), "source": memory.source,
            "written_by": memory.written_by, "run_id": memory.run_id}


def _build(tenant_id, target, ran, roots, radius, memories, reads) -> dict[str, Any]:
    # Which roots' radius holds each memory, from when: a read counts for a root if it returned one
    # of its memories at or after that memory could hold the root's content.
    holders: dict[str, list[tuple[str, Any]]] = {}
    for root in roots:
        if root in memories:
            holders.setdefault(root, []).append((root, memories[root].created_at))
        for memory_id, r in radius.by_root.get(root, {}).items():
            holders.setdefault(memory_id, []).append((root, r.tainted_at))
    # (memory, read) rows → each read once, with the radius memories it returned.
    by_read: dict[str, dict[str, Any]] = {}
    read_ids_of: dict[str, dict[str, None]] = {root: {} for root in roots}
    for row in reads:
        item = by_read.get(row.id)
        if item is None:
            item = by_read[row.id] = {"read_id": row.id, "read_at": format_ts(row.read_at), "actor": row.actor,
                                      "key_id": row.key_id, "agent_id": row.agent_id, "operation": row.operation,
                                      "query_digest": row.query_digest, "run_id": row.run_id, "audit_seq": row.seq,
                                      "memory_ids": []}
        item["memory_ids"].append(row.memory_id)
        for root, tainted_at in holders.get(row.memory_id, ()):
            if row.read_at >= tainted_at:
                read_ids_of[root][row.id] = None
    recovered: list[dict[str, Any]] = []
    runs: dict[str, Any] = {}
    for root in roots:
        memory = memories.get(root)
        if memory is None:
            continue
        reached = radius.by_root.get(root, {})
        read_ids = list(read_ids_of[root])
        derived = []
        for memory_id, r in sorted(reached.items(), key=lambda item: (item[1].depth, item[1].tainted_at, item[0])):
            row = memories.get(memory_id)
            derived.append({"memory_id": memory_id, "agent_id": row.agent_id if row else None,
                            "status": row.status if row else None, "depth": r.depth,
                            "tainted_at": format_ts(r.tainted_at), "path": list(r.path), "kinds": list(r.kinds),
                            "vias": list(r.vias)})
            for via in r.vias:
                if via:
                    runs.setdefault(via, set()).add(memory_id)
        recovered.append({**_memory_json(memory), "derived": derived, "read_ids": read_ids,
                          "counts": {"derived": len(derived), "reads": len(read_ids)},
                          "truncated": root in radius.truncated})
    reached_ids = radius.derived_ids() - set(roots)
    readers: dict[str, dict[str, Any]] = {}
    for item in by_read.values():
        who = readers.setdefault(item["actor"], {"actor": item["actor"], "key_id": item["key_id"], "reads": 0,
                                                 "first_read_at": item["read_at"], "operations": set()})
        who["reads"] += 1
        who["last_read_at"] = item["read_at"]
        who["operations"].add(item["operation"])
    agent_runs = _agent_runs(by_read.values())
    return {
        "kind": KIND, "tenant_id": tenant_id, "generated_at": format_ts(utcnow()),
        "recover_id": (ran or {}).get("recover_id"), "recovered_at": (ran or {}).get("recovered_at"),
        "recovered_by": (ran or {}).get("recovered_by"),
        "principal": target.principal_json(), **target.window_json(), "max_depth": radius.max_depth,
        "counts": {"recovered": len(recovered), "derived": len(reached_ids), "reads": len(by_read),
                   "readers": len(readers), "agent_runs": len(agent_runs), "truncated": len(radius.truncated)},
        "recovered": recovered,
        "reads": list(by_read.values()),
        "readers": [{**r, "operations": sorted(r["operations"])} for r in
                    sorted(readers.values(), key=lambda r: (-r["reads"], r["actor"]))],
        "agent_runs": agent_runs,
        "runs": [{"id": via, "memory_ids": sorted(ids)} for via, ids in sorted(runs.items())],
    }


def _agent_runs(reads) -> list[dict[str, Any]]:
    """The agent runs the reads served (those that named one), most reads first: what the poison
    reached, run by run."""
    runs: dict[str, dict[str, Any]] = {}
    for item in reads:  # oldest first
        if item["run_id"] is None:
            continue
        run = runs.setdefault(item["run_id"], {"run_id": item["run_id"], "agent_ids": {}, "reads": 0, "memory_ids": {},
                                               "first_read_at": item["read_at"]})
        run["reads"] += 1
        run["last_read_at"] = item["read_at"]
        if item["agent_id"] is not None:
            run["agent_ids"][item["agent_id"]] = None
        run["memory_ids"].update(dict.fromkeys(item["memory_ids"]))
    return [{**run, "agent_ids": list(run["agent_ids"]), "memory_ids": sorted(run["memory_ids"])}
            for run in sorted(runs.values(), key=lambda r: (-r["reads"], r["run_id"]))]


def shown(ctx: AppContext, *, tenant_id: str, actor: dict[str, str], memory_ids: list[str],
          may_see: Callable[[str], bool], query: dict[str, Any]) -> dict[str, str]:
    """The content excerpts the auditors' page quotes for `memory_ids` (those of agents `may_see`
    allows, hard-deleted ones have none), recorded in the read audit for the signed-in `actor`,
    one read per agent, before the page is answered."""
    with ctx.db.sessions() as session:
        rows = recovery.memories_by_id(session, tenant_id=tenant_id, ids=sorted(set(memory_ids)))
    out: dict[str, str] = {}
    by_agent: dict[str, list[str]] = {}
    for memory_id in dict.fromkeys(memory_ids):
        memory = rows.get(memory_id)
        if memory is None or memory.content is None or not may_see(memory.agent_id):
            continue
        text = memory.content
        out[memory_id] = text if len(text) <= EXCERPT_CHARS else text[:EXCERPT_CHARS] + "…"
        by_agent.setdefault(memory.agent_id, []).append(memory_id)
    for agent_id, ids in by_agent.items():
        change_reads.for_person(ctx, tenant_id=tenant_id, actor=actor, operation="incident_report",
                                agent_id=agent_id, memory_ids=ids, query=query)
    return out
