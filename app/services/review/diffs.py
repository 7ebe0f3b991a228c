"""Diffs against live state: what a staged change would do if applied now, computed at review time
and fingerprinted (a decision quotes the fingerprint; a stale one is refused), and the views of a
change with its live diff (`review_view`; for an API key, its reads accounted)."""

from __future__ import annotations

import hashlib
import json
from typing import Any, Callable

from app.core import diff as textdiff
from app.core import fsm, jsontext
from app.core.access import Principal
from app.db.models import Change, Memory
from app.repos.memory import memories as repo
from app.repos.memory import search
from app.repos.memory.memories import Scope
from app.services.audit import recover
from app.services.memory import consolidation, supersession, workspace
from app.services.memory import memories as mem
from app.services.review import change_reads, duties
from app.services.review.changes import (AgentCheck, brief, change_json, decided_diff, decided_erased, explained,
                                         load_change, staged_memory)
from app.services.runtime.context import AppContext

NEIGHBOURS = 5

Shown = Callable[[str, list[str]], None]
"""Called with (agent id, memory ids) before a diff quoting those memories is answered: the read's
accounting (`app.services.review.change_reads`); raising refuses the answer."""


def _fingerprint(parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:32]


def compute_diff(ctx: AppContext, session, change: Change) -> dict[str, Any]:
    """The change against live state now, with the fingerprint a decision must quote."""
    kind = change.operation
    if kind == "remember":
        body = _remember_diff(ctx, session, change)
    elif kind in ("forget", "expire"):
        rows = resolve_targets(session, change)
        reasons = (change.request.get("evidence") or {}) if change.request.get("consolidation_run") else {}
        body = {"affected": [{**brief(m), **({"evicted_because": reasons[m.id]} if m.id in reasons else {})}
                             for m in rows], "count": len(rows),
                "hard_delete": bool(change.request.get("hard_delete")),
                "action": change.request.get("action", "forget") if kind == "expire" else
                ("hard_delete" if change.request.get("hard_delete") else "forget")}
        body["_state"] = [(m.id, m.updated_at) for m in rows]
    elif kind == "merge":
        body = _merge_diff(session, change)
    elif kind in ("workspace_write", "workspace_delete"):
        body = workspace.review_diff(session, change)
    elif kind in recover.RECOVER_OPERATIONS:
        body = recover.diff(session, change)
        body["memory"] = brief(body["memory"]) if body["memory"] is not None else None
    else:
        body = {"_state": []}
    state = body.pop("_state")
    body.update({"operation": kind, "policy_rule": change.policy_rule, "redactions": list(change.redactions),
                 "risk_flags": [explained(f) for f in change.risk_flags or []], "risk_level": change.risk_level,
                 "approvals": list(change.approvals), "approvals_required": change.approvals_required,
                 "fingerprint": _fingerprint([change.id, change.status, len(change.approvals), state])})
    return body


def candidates_for(session, change, memory, embedding: list[float] | None = None) -> list[tuple[Memory, float]]:
    """The live memories nearest the staged `memory` (by vector and by keyword, NEIGHBOURS of each),
    most similar first, with their cosine similarity (and their embeddings loaded, for the
    contradiction reader); `embedding` when edits re-embedded it."""
    if embedding is None:
        embedding = _embedding(session, change, memory)
    scope = Scope(change.tenant_id, change.agent_id, memory.user_id)
    ids = [i for i, _ in search.vector_candidates(session, scope, {}, embedding, NEIGHBOURS)]
    ids += [i for i, _ in search.keyword_candidates(session, scope, {}, memory.content or "", NEIGHBOURS)]
    found = search.fetch_with_similarity(session, change.tenant_id, [i for i in dict.fromkeys(ids) if i != memory.id],
                                         embedding, vectors=True)
    return sorted(found, key=lambda pair: (-pair[1], pair[0].id))


def _embedding(session, change, memory) -> list[float]:
    """The staged memory's stored embedding, read once per decision (`candidates_for`, `replaced`)."""
    cached = getattr(memory, "_review_embedding", None)
    if cached is None:
        cached = [float(x) for x in repo.embedding_of(session, tenant_id=change.tenant_id, memory_id=memory.id)]
        memory._review_embedding = cached  # a plain attribute on the loaded row, not a column
    return cached


def replaced(ctx: AppContext, session, change, memory, candidates, content: str | None = None,
              embedding: list[float] | None = None) -> list[dict[str, Any]]:
    """What approving the staged `memory` would retire (`app.services.memory.supersession`); `embedding`
    when edits re-embedded it."""
    if embedding is None:
        embedding = _embedding(session, change, memory)
    return supersession.plan(session, tenant_id=change.tenant_id, agent_id=change.agent_id, memory=memory,
                             content=memory.content if content is None else content, candidates=candidates,
                             encoder=ctx.embedder.embed, model=ctx.embedder.name, vector=embedding,
                             contradiction_model=ctx.contradiction_model)


def _remember_diff(ctx: AppContext, session, change: Change) -> dict[str, Any]:
    memory = staged_memory(session, change)
    candidates = candidates_for(session, change, memory)
    neighbours = candidates[:NEIGHBOURS]
    planned = replaced(ctx, session, change, memory, candidates)
    closest = neighbours[0] if neighbours else None
    body: dict[str, Any] = {"proposed": brief(memory), "similar": [brief(m, s) for m, s in neighbours],
                            "closest": None, "segments": [], "flags": {"duplicate": False, "contradiction": None}}
    if closest is not None:
        near, cosine = closest
        body["closest"] = brief(near, cosine)
        body["segments"] = [{"op": s.op, "text": s.text} for s in textdiff.word_diff(near.content, memory.content)]
        body["flags"]["duplicate"] = textdiff.is_likely_duplicate(
            textdiff.similarity(near.content, memory.content), cosine)
    # Every live memory approving retires, each with why (the page's plan and the API's diff say so).
    body["replaces"] = [{**brief(p["memory"], p.get("similarity")), **{k: v for k, v in p.items() if k != "memory"}}
                        for p in planned]
    contradicted = next((p for p in planned if p["reason"] == "contradiction"), None)
    if contradicted is not None:
        body["flags"]["contradiction"] = {"memory_id": contradicted["memory"].id, "frame": contradicted["frame"],
                                          "old_value": contradicted["old_value"],
                                          "new_value": contradicted["new_value"], "kind": contradicted["kind"]}
    if memory.type == "procedural":
        body["fsm"] = _fsm_diff(memory, [m for m, _ in neighbours])
        if body["fsm"] and _changes_transitions(body["fsm"]):
            body["flags"]["duplicate"] = False  # a procedure that does something else is no duplicate
    # The word diff (and "both stay live") is only meaningful against a memory about the same thing.
    body["strong_match"] = closest is not None and (
        textdiff.is_strong_match(closest[1]) or body["flags"]["duplicate"]
        or (body["flags"]["contradiction"] or {}).get("memory_id") == closest[0].id)
    body["_state"] = ([(memory.id, memory.updated_at, memory.status)] + [(m.id, m.updated_at) for m, _ in neighbours]
                      + [("replaces", p["memory"].id) for p in planned])
    _with_evidence(session, change, memory, body)
    return body


def _with_evidence(session, change: Change, memory: Memory, body: dict[str, Any]) -> None:
    """A promotion consolidation wrote: its sources (as they are now) and why they scored, from the
    claim the server recorded (never from the write's own metadata, which an agent could forge)."""
    evidence = consolidation.evidence_for(session, change.tenant_id, memory.id)
    if evidence is None:
        return
    ids = list(evidence.get("source_ids") or [])
    rows = repo.matching(session, scope=Scope(change.tenant_id, change.agent_id), ids=ids) if ids else []
    found = {m.id for m in rows}
    body["consolidation"] = {k: evidence.get(k) for k in ("run_id", "mentions", "items", "salience", "recency",
                                                          "confidence", "stance", "score", "statement_from",
                                                          "reasons")}
    body["consolidation"]["missing"] = [i for i in ids if i not in found]
    body["evidence"] = [brief(m) for m in sorted(rows, key=lambda m: (m.created_at, m.id))]


def _fsm_diff(memory: Memory, neighbours: list[Memory]) -> dict[str, Any] | None:
    """A procedure's transition table against the live procedure of the same name among `neighbours`
    (`against` names it; None when it is new: every transition is then added)."""
    name = _fsm_name(memory.content)
    live = next((m for m in neighbours if m.type == "procedural" and name is not None
                 and _fsm_name(m.content) == name), None)
    table = fsm.transition_table_diff(live.content if live else None, memory.content or "")
    return {**table, "against": live.id if live else None} if table is not None else None


def _fsm_name(content: str | None) -> str | None:
    try:
        doc = jsontext.loads(content or "")
    except (TypeError, ValueError):
        return None
    return doc.get("name") if isinstance(doc, dict) and isinstance(doc.get("name"), str) else None


def _changes_transitions(table: dict[str, Any]) -> bool:
    return any(table[k] for k in ("added", "removed", "changed", "states_added", "states_removed"))


def resolve_targets(session, change: Change, lock: bool = False) -> list[Memory]:
    """What a staged forget/expire would touch if applied now."""
    request = change.request
    scope = Scope(change.tenant_id, change.agent_id, request.get("user_id"))
    if change.operation == "forget":
        return repo.matching(session, scope=scope, ids=request.get("ids") or None,
                             metadata=request.get("filter") or None, lock=lock)
    return mem._expire_rows(session, scope, request.get("policy") or {}, lock=lock, ids=request.get("ids"))


def _merge_diff(session, change: Change) -> dict[str, Any]:
    request = change.request
    canonical, duplicates = request["canonical"], request["duplicates"]
    rows = repo.matching(session, scope=Scope(change.tenant_id, change.agent_id), ids=[canonical, *duplicates])
    by_id = {m.id: m for m in rows}
    missing = [i for i in [canonical, *duplicates] if i not in by_id]
    strategy = request.get("strategy", "keep_canonical")
    similarity = _similar_to(session, change.tenant_id, by_id.get(canonical), duplicates)
    body: dict[str, Any] = {"before": [{**brief(m, similarity.get(m.id)), "canonical": m.id == canonical}
                                       for m in sorted(rows, key=lambda m: (m.id != canonical, m.id))],
                            "missing": missing, "strategy": strategy, "after": None,
                            "unrelated": sorted(i for i, s in similarity.items()
                                                if not textdiff.is_strong_match(s))}
    if not missing:
        plan = mem.plan_merge(rows, canonical, strategy)
        body["after"] = {"id": canonical, "content": plan.content, "tags": plan.tags, "metadata": plan.metadata,
                         "confidence": plan.confidence}
        body["segments"] = [{"op": s.op, "text": s.text}
                            for s in textdiff.word_diff(by_id[canonical].content, plan.content)]
    body["_state"] = [(m.id, m.updated_at) for m in rows]
    return body


def _similar_to(session, tenant_id: str, canonical: Memory | None, ids: list[str]) -> dict[str, float]:
    """Cosine similarity of each of `ids` to the canonical memory (empty when it is gone)."""
    if canonical is None:
        return {}
    embedding = repo.embedding_of(session, tenant_id=tenant_id, memory_id=canonical.id)
    if embedding is None:
        return {}
    pairs = search.fetch_with_similarity(session, tenant_id, ids, [float(x) for x in embedding])
    return {m.id: round(s, 4) for m, s in pairs}


def review_view(ctx: AppContext, tenant_id: str, change_id: str, may_see: AgentCheck,
                reviewer: dict[str, Any] | None = None) -> dict[str, Any]:
    """A change with its live diff (what the UI and `GET /v1/changes/{id}/diff` show). Given the
    `reviewer` about to decide (an actor), also `own_change`: whether they are its author."""
    with ctx.db.sessions.begin() as session:
        change = load_change(session, tenant_id, change_id, may_see)
        view = view_of(ctx, session, change)
        # A decided change's diff as decided is in `GET /v1/changes/{id}`; this is the live diff only.
        shown = {k: v for k, v in view.items() if k in ("change", "diff")}
        if reviewer is not None:
            shown["own_change"] = duties.is_own_change(session, tenant_id, change.submitted_by, reviewer)
        return shown


def review_view_for_key(ctx: AppContext, principal: Principal, change_id: str) -> dict[str, Any]:
    """`review_view` for an API key: the live memories its diff quotes are taken from the key's read
    budget and recorded (429, nothing answered, when the budget is spent); the proposed content of
    a pending write is not a read."""
    view = review_view(ctx, principal.tenant_id, change_id, principal.may_act_for)
    change_reads.for_key(ctx, principal, operation="change.diff", agent_id=view["change"]["agent_id"],
                         memory_ids=change_reads.shown_in_diff(view.get("diff")), change_id=change_id)
    return view


def key_shown(ctx: AppContext, principal: Principal, change_id: str) -> Shown:
    """The accounting of a diff a key's decision is answered with (a stale review's fresh diff).
    `ctx`: the app's own, not one bound to an idempotent request's transaction, which the refusal
    rolls back."""
    return lambda agent_id, ids: change_reads.for_key(ctx, principal, operation="change.conflict",
                                                      agent_id=agent_id, memory_ids=ids, change_id=change_id)


def view_of(ctx: AppContext, session, change: Change) -> dict[str, Any]:
    """A change with its live diff while pending; once decided, the diff as its reviewer saw it
    (`decided_diff`) instead."""
    view = {"change": change_json(change)}
    if change.status == "pending":
        view["diff"] = compute_diff(ctx, session, change)
    else:
        view["decided_diff"] = decided_diff(change)
        view["decided_erased"] = decided_erased(change)
        view["result"] = change.result
    return view
