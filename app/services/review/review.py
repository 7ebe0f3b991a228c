"""Reviewing staged changes: diffs against live state (computed at review time, fingerprinted),
and decisions — approve (optionally with edits, merged into or superseding a live memory),
reject, withdraw — each audited in the decision's own transaction.

Exactly one of two concurrent decisions wins: the change row is locked and its status checked
under the lock. A decision made on a stale fingerprint of live state is refused (409 stale_review),
and one by the change's author on every path (403 own_change, `app.services.review.duties`).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, replace
from types import SimpleNamespace
from typing import Any, Callable

from app.core import diff as textdiff
from app.core import fsm, jsontext
from app.core.access import Principal, agent_allowed
from app.core.screening import EXPLANATIONS
from app.core.timefmt import format_ts, utcnow
from app.db.models import Change, Memory
from app.errors import AppError, ConfirmationRequired, Conflict, Forbidden, NotFound, OwnChange, ValidationFailed
from app.observability import metrics
from app.repos.review import changes as changes_repo
from app.repos.memory import memories as repo
from app.repos.memory import search
from app.repos.tenancy import tenants as tenant_repo
from app.repos.tenancy import users as users_repo
from app.repos.review.changes import RISK_RANK, QueueFilter  # noqa: F401 (the queue's filter and sort keys)
from app.repos.memory.memories import Scope
from app.services.review import canaries, change_reads, confirmation, duties
from app.services.memory import compaction, consolidation, derivations
from app.services.events import events
from app.services.audit import recover
from app.services.memory import supersession, workspace
from app.services.tenancy import tenant_config
from app.services.memory import memories as mem
from app.services.runtime.context import AppContext
from app.services.tenancy.users import ROLE_POWERS, Reviewer, TenantRole

NEIGHBOURS = 5

AgentCheck = Callable[[str], bool]
Shown = Callable[[str, list[str]], None]
"""Called with (agent id, memory ids) before a diff quoting those memories is answered: the read's
accounting (`app.services.review.change_reads`); raising refuses the answer."""


def change_json(change: Change) -> dict[str, Any]:
    """The contract's change shape (§4)."""
    return {
        "id": change.id, "operation": change.operation, "status": change.status, "agent_id": change.agent_id,
        "user_id": change.user_id, "memory_ids": list(change.memory_ids),
        "submitted_at": format_ts(change.submitted_at), "decided_at": format_ts(change.decided_at),
        "decided_by": change.decided_by, "reason": change.reason, "approvals": list(change.approvals),
        "approvals_required": change.approvals_required, "policy_rule": change.policy_rule,
        "redactions": list(change.redactions), "risk_flags": [_explained(f) for f in change.risk_flags or []],
        "risk_level": change.risk_level, "agent_reason": agent_reason(change),
        "decided_by_name": _reviewer_name(change),
    }


def _explained(flag: Any) -> Any:
    """A stored flag with its reviewer sentence (a fixed text per flag name, never the write's)."""
    if not isinstance(flag, dict) or flag.get("name") not in EXPLANATIONS:
        return flag
    return {**flag, "explanation": EXPLANATIONS[flag["name"]]}


REASONED_OPERATIONS = ("forget", "merge", "expire")


def agent_reason(change) -> str | None:
    """Why the agent asked for a forget, merge or expire (its request's `reason`), or None."""
    reason = (change.request or {}).get("reason") if change.operation in REASONED_OPERATIONS else None
    return reason if isinstance(reason, str) and reason.strip() else None


def _reviewer_name(change) -> str | None:
    """The name of the person (or key) that decided, as kept with the decision."""
    reviewer = (getattr(change, "decided_view", None) or {}).get("reviewer") or {}
    if reviewer.get("name"):
        return reviewer["name"]
    # Decided before decisions kept their reviewer: the approval entry of the decider names them.
    last = next((a for a in reversed(change.approvals or []) if a.get("by") == change.decided_by), {})
    return last.get("name") or None


def load_change(session, tenant_id: str, change_id: str, may_see: AgentCheck, *, lock: bool = False) -> Change:
    """A change of this tenant whose agent the caller may see; 404 otherwise (never reveals others)."""
    change = changes_repo.get(session, tenant_id=tenant_id, change_id=change_id, lock=lock)
    if change is None or not may_see(change.agent_id):
        raise NotFound("change not found")
    return change


def get_change(ctx: AppContext, tenant_id: str, change_id: str, may_see: AgentCheck) -> dict[str, Any]:
    """One change (`GET /v1/changes/{id}`): its contract shape, plus what the reviewer saw when it was
    decided (`diff`, and for a remember the `proposed` memory as proposed), or for a pending remember
    the `proposed` memory as staged."""
    with ctx.db.sessions() as session:
        change = load_change(session, tenant_id, change_id, may_see)
        body = {**change_json(change), "result": change.result}
        decided = decided_diff(change)
        if decided is not None:
            body["diff"] = decided
            if decided.get("proposed"):
                body["proposed"] = _proposed_fields(decided["proposed"])
        elif change.status == "pending" and change.operation == "remember":
            body["proposed"] = _proposed_fields(_brief(_staged_memory(session, change)))
        return body


def get_change_for_key(ctx: AppContext, principal: Principal, change_id: str) -> dict[str, Any]:
    """`get_change` for an API key: what its decided diff quotes is taken from the key's read budget
    and recorded (429, nothing answered, when the budget is spent)."""
    body = get_change(ctx, principal.tenant_id, change_id, principal.may_act_for)
    change_reads.for_key(ctx, principal, operation="change.get", agent_id=body["agent_id"],
                         memory_ids=change_reads.shown_in_change(body), change_id=change_id)
    return body


def _proposed_fields(brief: dict[str, Any]) -> dict[str, Any]:
    return {k: brief.get(k) for k in ("content", "metadata", "tags", "type")}


def decided_diff(change) -> dict[str, Any] | None:
    """The diff its reviewer saw when the change was decided; None while pending, for decisions made
    before it was kept, and once a hard delete erased a memory it quoted (see `decided_erased`)."""
    view = change.decided_view or {}
    diff = view.get("diff")
    if not isinstance(diff, dict):
        return None
    # A plain approval keeps only what was proposed (it quoted no diff): the usual keys read as empty.
    return {**_EMPTY_REMEMBER_DIFF, **diff} if diff.get("operation") == "remember" else diff


_EMPTY_REMEMBER_DIFF = {"similar": [], "closest": None, "segments": [], "strong_match": False, "fingerprint": "",
                        "flags": {"duplicate": False, "contradiction": None}, "replaces": []}


def decided_erased(change) -> bool:
    """Whether a hard delete erased the copy of what this change's reviewer saw."""
    return bool((change.decided_view or {}).get("erased"))


def _snapshot(diff: dict[str, Any], actor: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """What a decided change keeps of the diff its reviewer was shown, and the ids of the memories
    whose content that copy holds. A hard delete keeps no content of what it deletes."""
    diff = {k: v for k, v in diff.items() if not k.startswith("_")}
    if diff.get("operation") == "forget" and diff.get("hard_delete"):
        diff["affected"] = [{**m, "content": None, "metadata": {}, "tags": []} for m in diff.get("affected") or []]
    refs = [m["id"] for key in ("similar", "affected", "before") for m in diff.get(key) or []
            if m.get("content") is not None]
    refs += [diff[key]["id"] for key in ("proposed", "closest", "after") if isinstance(diff.get(key), dict)]
    return {"diff": diff, "reviewer": _reviewer(actor)}, sorted(set(refs))


def _reviewer(actor: dict[str, Any]) -> dict[str, Any]:
    """Who decided, as a decided change keeps it (a person's username is their display name; a
    decision made with an API key also keeps the key's id)."""
    kept = {"kind": actor.get("kind"), "id": actor.get("id"), "name": actor.get("name")}
    return {**kept, "via_key": actor["via_key"]} if actor.get("via_key") else kept


def list_changes(ctx: AppContext, tenant_id: str, may_see_patterns: tuple[str, ...], flt: QueueFilter,
                 limit: int = 50, after: tuple | None = None) -> tuple[list[Change], int]:
    """Keyset-paginated changes in `flt.sort` order; also the total matching count.

    `after` is the last row's (submitted_at, id) — or (risk rank, submitted_at, id) for the risk sort."""
    with ctx.db.sessions() as session:
        return _list_in(session, tenant_id, may_see_patterns, flt, limit, after)


def _list_in(session, tenant_id: str, may_see_patterns: tuple[str, ...], flt: QueueFilter, limit: int,
             after: tuple | None = None) -> tuple[list[Change], int]:
    # Globs are checked in Python; SQL narrows by the literal prefix before the first wildcard.
    prefixes = None if "*" in may_see_patterns else [p.split("*")[0].split("?")[0] for p in may_see_patterns]
    rows, total = changes_repo.page(session, tenant_id=tenant_id, flt=flt, agent_prefixes=prefixes,
                                    limit=limit * 2, after=after)
    return [c for c in rows if agent_allowed(c.agent_id, may_see_patterns)][:limit], total


# --- diffs ---------------------------------------------------------------------------------------

def _fingerprint(parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:32]


def _brief(memory: Memory, similarity: float | None = None) -> dict[str, Any]:
    item = {"id": memory.id, "content": memory.content, "type": memory.type, "tags": list(memory.tags),
            "source": memory.source,
            "metadata": memory.metadata_, "confidence": float(memory.confidence), "user_id": memory.user_id,
            "created_at": format_ts(memory.created_at), "updated_at": format_ts(memory.updated_at)}
    if similarity is not None:
        item["similarity"] = round(similarity, 4)
    return item


def compute_diff(ctx: AppContext, session, change: Change) -> dict[str, Any]:
    """The change against live state now, with the fingerprint a decision must quote."""
    kind = change.operation
    if kind == "remember":
        body = _remember_diff(ctx, session, change)
    elif kind in ("forget", "expire"):
        rows = _resolve_targets(session, change)
        reasons = (change.request.get("evidence") or {}) if change.request.get("consolidation_run") else {}
        body = {"affected": [{**_brief(m), **({"evicted_because": reasons[m.id]} if m.id in reasons else {})}
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
        body["memory"] = _brief(body["memory"]) if body["memory"] is not None else None
    else:
        body = {"_state": []}
    state = body.pop("_state")
    body.update({"operation": kind, "policy_rule": change.policy_rule, "redactions": list(change.redactions),
                 "risk_flags": [_explained(f) for f in change.risk_flags or []], "risk_level": change.risk_level,
                 "approvals": list(change.approvals), "approvals_required": change.approvals_required,
                 "fingerprint": _fingerprint([change.id, change.status, len(change.approvals), state])})
    return body


def _staged_memory(session, change: Change, *, lock: bool = False) -> Memory:
    """The memory a `remember` change staged (keys are (id, tenant))."""
    return repo.get_by_key(session, tenant_id=change.tenant_id, memory_id=change.memory_ids[0], lock=lock)


def _candidates(session, change, memory, embedding: list[float] | None = None) -> list[tuple[Memory, float]]:
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
    """The staged memory's stored embedding, read once per decision (`_candidates`, `_replaced`)."""
    cached = getattr(memory, "_review_embedding", None)
    if cached is None:
        cached = [float(x) for x in repo.embedding_of(session, tenant_id=change.tenant_id, memory_id=memory.id)]
        memory._review_embedding = cached  # a plain attribute on the loaded row, not a column
    return cached


def _replaced(ctx: AppContext, session, change, memory, candidates, content: str | None = None,
              embedding: list[float] | None = None) -> list[dict[str, Any]]:
    """What approving the staged `memory` would retire (`app.services.memory.supersession`); `embedding`
    when edits re-embedded it."""
    if embedding is None:
        embedding = _embedding(session, change, memory)
    return supersession.plan(session, tenant_id=change.tenant_id, agent_id=change.agent_id, memory=memory,
                             content=memory.content if content is None else content, candidates=candidates,
                             encoder=ctx.embedder.embed, model=ctx.embedder.name, vector=embedding)


def _remember_diff(ctx: AppContext, session, change: Change) -> dict[str, Any]:
    memory = _staged_memory(session, change)
    candidates = _candidates(session, change, memory)
    neighbours = candidates[:NEIGHBOURS]
    planned = _replaced(ctx, session, change, memory, candidates)
    closest = neighbours[0] if neighbours else None
    body: dict[str, Any] = {"proposed": _brief(memory), "similar": [_brief(m, s) for m, s in neighbours],
                            "closest": None, "segments": [], "flags": {"duplicate": False, "contradiction": None}}
    if closest is not None:
        near, cosine = closest
        body["closest"] = _brief(near, cosine)
        body["segments"] = [{"op": s.op, "text": s.text} for s in textdiff.word_diff(near.content, memory.content)]
        body["flags"]["duplicate"] = textdiff.is_likely_duplicate(
            textdiff.similarity(near.content, memory.content), cosine)
    # Every live memory approving retires, each with why (the page's plan and the API's diff say so).
    body["replaces"] = [{**_brief(p["memory"], p.get("similarity")), **{k: v for k, v in p.items() if k != "memory"}}
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
    body["evidence"] = [_brief(m) for m in sorted(rows, key=lambda m: (m.created_at, m.id))]


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


def _resolve_targets(session, change: Change, lock: bool = False) -> list[Memory]:
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
    body: dict[str, Any] = {"before": [{**_brief(m, similarity.get(m.id)), "canonical": m.id == canonical}
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
        view = _view(ctx, session, change)
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


def shown_on_page(view: dict[str, Any]) -> list[str]:
    """Ids of the live memories a change page's view quotes (the live diff, or the decided copy)."""
    if view.get("diff") is not None:
        return change_reads.shown_in_diff(view["diff"])
    return change_reads.shown_in_diff(view.get("decided_diff"),
                                      proposed_is_memory=view["change"]["status"] == "approved")


def _view(ctx: AppContext, session, change: Change) -> dict[str, Any]:
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


# --- decisions -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class DecisionRequest:
    decision: str  # "approve" | "reject"
    reason: str | None = None
    edits: dict[str, Any] | None = None
    seen_state: str | None = None
    merge_into: str | None = None
    supersedes: str | None = None
    confirm_risk: bool = False
    """The reviewer confirms an approval that needs it (`app.services.review.confirmation`: medium or high
    risk, a hard delete, a merge that drops facts); every path asks for it."""
    memory_ids: tuple[str, ...] | None = None
    """Forget and expire: the memories (among those it would touch) the approval applies to."""
    keep_both: bool = False
    """Remember: keep live the memories it replaces (`app.services.memory.supersession`) instead of retiring them."""


def confirmation_reasons(change, diff: dict[str, Any] | None = None) -> list[str]:
    """Why approving `change` (a row or its JSON shape) needs explicit confirmation (`app.services.review.confirmation`);
    `diff`, when the caller has it, tells whether a merge drops facts."""
    request = getattr(change, "request", None) if not isinstance(change, dict) else change.get("request")
    operation = change["operation"] if isinstance(change, dict) else change.operation
    level = change["risk_level"] if isinstance(change, dict) else change.risk_level
    drops = False
    if operation == "merge" and diff and diff.get("after"):
        drops = confirmation.merge_drops_facts([m.get("content") or "" for m in diff.get("before") or []],
                                              diff["after"].get("content") or "")
    if request is None and isinstance(diff, dict) and operation in ("forget", "expire"):
        request = {"hard_delete": diff.get("hard_delete"), "action": diff.get("action")}
    return confirmation.reasons(risk_level=level, operation=operation, request=request, merge_drops=drops)


def _require_confirmed(change, request: DecisionRequest, prepared: _Prepared | None = None) -> None:
    """Refuse (422 confirmation_required) an unconfirmed approval that needs confirmation; nothing is decided."""
    if request.decision != "approve" or request.confirm_risk:
        return
    drops = False
    if change.operation == "merge" and prepared is not None and prepared.merge_plan is not None:
        drops = confirmation.merge_drops_facts([m.content or "" for m in prepared.merge_rows or []],
                                              prepared.merge_plan.content)
    found = confirmation.reasons(risk_level=change.risk_level, operation=change.operation,
                                 request=change.request, merge_drops=drops)
    if found:
        names = [str(f.get("name")) for f in change.risk_flags or [] if isinstance(f, dict)]
        raise ConfirmationRequired(
            f"approving this change needs confirmation ({confirmation.describe(found, change.risk_level)}): "
            "send confirm_risk to approve it",
            details={"reason": "confirmation_required", "risk_level": change.risk_level, "risk_flags": names,
                     "confirm": found})


@metrics.counts_decisions
def decide(ctx: AppContext, *, tenant_id: str, change_id: str, actor: dict[str, Any], may_see: AgentCheck,
           request: DecisionRequest, shown: Shown | None = None) -> dict[str, Any]:
    """Approve or reject a pending change (see module docstring for the guarantees). `shown`: the
    accounting of the fresh diff a stale review is refused with (see `Shown`)."""
    quoted: list[tuple[str, list[str]]] = []
    try:
        with ctx.db.sessions() as session:
            result = _decide_in(ctx, session, tenant_id, change_id, actor, may_see, request, quoted=quoted)
            session.commit()
            return result
    except Conflict:
        # Accounted once the decision's transaction is over: its rollback must not take the read with it.
        if shown is not None and quoted:
            shown(*quoted[0])
        raise


def _decide_in(ctx: AppContext, session, tenant_id: str, change_id: str, actor: dict[str, Any], may_see: AgentCheck,
               request: DecisionRequest, *, operation: str | None = None,
               quoted: list[tuple[str, list[str]]] | None = None) -> dict[str, Any]:
    """Decide in `session`'s transaction (the caller commits); returns the change as decided, with
    its `result`. `operation` is the change's when the caller has read it (the change page has).

    Work that must not happen under the change's lock (validation, redaction, embedding) is done
    first, when the request asks for it or the operation needs it (a merge's plan); a plain
    approval learns the operation under the lock, and a merge then lets go, plans and locks again."""
    if request.decision == "reject" and not (request.reason or "").strip():
        raise ValidationFailed.at("/reason", "a reason is required to reject")
    approving = request.decision == "approve"
    if approving:
        supersession.check_choice(keep_both=request.keep_both, supersedes=request.supersedes)
    approver = _approver(session, tenant_id, actor)
    # The one place a canary is told from a real change: it is decided like one (same checks, same
    # answer) but never applied (`_decide_canary`), whatever path the decision came by.
    canary = canaries.lookup(session, tenant_id, change_id)
    prepared = None
    if canary is not None:
        pass  # nothing to validate or embed: nothing of a canary is applied
    elif approving and (request.edits or request.merge_into or request.supersedes or request.memory_ids is not None
                      or request.keep_both or operation == "merge"):
        prepared = _prepare(ctx, session, tenant_id, change_id, may_see, request)
    elif approving and request.seen_state is None:
        # A plain approval: most likely a staged remember that needs no more approvals.
        row = _lock_change_row(session, tenant_id, change_id, may_see)
        duties.refuse_own_change(session, tenant_id, row.submitted_by, actor)
        _require_confirmed(row, request)
        if row.operation == "remember" and row.approvals_required <= len(row.approvals) + 1:
            return _approve_staged_memory(ctx, session, row, actor, approver, request)
    change = load_change(session, tenant_id, change_id, may_see, lock=True)
    if approving and prepared is None and change.operation == "merge":
        session.rollback()  # the lock is let go while the plan is embedded
        prepared = _prepare(ctx, session, tenant_id, change_id, may_see, request)
        change = load_change(session, tenant_id, change_id, may_see, lock=True)
    _require_pending(change)
    duties.refuse_own_change(session, tenant_id, change.submitted_by, actor)
    _require_confirmed(change, request, prepared)
    prepared = prepared or _Prepared()
    fresh = None
    if request.seen_state is not None:  # the diff costs a search; only a quoted fingerprint needs it
        fresh = compute_diff(ctx, session, change)
        if request.seen_state != fresh["fingerprint"]:
            if quoted is not None:  # the refusal quotes the fresh diff: reading it is a read
                quoted.append((change.agent_id, change_reads.shown_in_diff(fresh)))
            raise Conflict("live state changed since this diff was shown; review the fresh diff",
                           details={"reason": "stale_review", "fingerprint": fresh["fingerprint"],
                                    "diff": fresh})
    who = _actor_label(approver)
    now = utcnow()
    if request.decision == "reject":
        change.decided_view, change.decided_refs = _snapshot(fresh or compute_diff(ctx, session, change), approver)
        change.decided_at, change.decided_by, change.reason = now, who, request.reason
        _reject(ctx, session, change, actor, request.reason)
    else:
        _require_owned_key(session, tenant_id, approver, change.approvals_required)
        _require_new_reviewer(change.approvals, who)
        if change.approvals_required > len(change.approvals) + 1:
            _require_no_outcome_choice(change, request)
            change.approvals = _with_approval(change.approvals, who, approver, now)
            ctx.audit.append(session, tenant_id=tenant_id, event_type="change.approval_recorded", actor=actor,
                             subject={"type": "change", "id": change.id},
                             data={"approvals": len(change.approvals), "required": change.approvals_required,
                                   "approver": who})
            events.change_event(session, change, "approval_recorded")  # other reviewers' pages follow it
            session.flush()
            return {**change_json(change), "result": None}
        # What the reviewer saw is kept before the change is applied (applying changes live state).
        change.decided_view, change.decided_refs = _snapshot(fresh or compute_diff(ctx, session, change), approver)
        result = (_decide_canary(session, change, request) if canary is not None
                  else _apply(ctx, session, change, actor, request, prepared))
        # Every column of the change is set together, so it is written in one UPDATE.
        change.approvals = _with_approval(change.approvals, who, approver, now)
        change.result, change.status = result, "approved"
        change.decided_at, change.decided_by, change.reason = now, who, request.reason
        _record_approval(ctx, session, change, actor, request)
    if canary is not None:
        canaries.decided(ctx, session, change, canary, reviewer=who, actor=actor, approved=approving)
    session.flush()
    return {**change_json(change), "result": change.result}


def _decide_canary(session, change: Change, request: DecisionRequest) -> dict[str, Any]:
    """An approved canary: its staged memory ends (never live, nothing it would retire is touched)
    and the change's result has the shape an approved remember's has."""
    staged = _staged_memory(session, change, lock=True)
    staged.status, staged.ended_at, staged.updated_at = "rejected", utcnow(), utcnow()
    return {"memory_id": staged.id, **supersession.outcome([], keep_both=request.keep_both,
                                                           supersedes=request.supersedes)}


# --- the change page -------------------------------------------------------------------------------

@dataclass
class ChangePage:
    """What the reviewer's change page shows, read in the session that decided it (if it did)."""

    role: TenantRole
    change: Change
    """As read (the page shows its risk flags); `view["change"]` is its current state."""
    view: dict[str, Any]
    next_id: str | None = None
    pending: int | None = None
    result: dict[str, Any] | None = None
    also_live: str | None = None
    conflict: AppError | None = None
    """A refused decision: 409 (decided meanwhile, stale review) or 422 confirmation_required."""
    approved_by_you: bool = False
    """The signed-in reviewer has given one of the approvals of this still-pending change."""
    own_change: bool = False
    """The signed-in reviewer is this change's author (`app.services.review.duties`): they cannot decide it."""


def approved_by(view: dict[str, Any], user: Reviewer) -> bool:
    """Whether `user` already approved the pending change in `view` (a second approval must be someone else's)."""
    change, who = view["change"], _actor_label(user.actor)
    return change["status"] == "pending" and _has_approved(change["approvals"], who)


def _own(session, change: Change, user: Reviewer) -> bool:
    """Whether the signed-in `user` is the author of the pending `change` (the page offers no decision)."""
    return change.status == "pending" and duties.is_own_change(session, change.tenant_id, change.submitted_by,
                                                               user.actor)


def _locate(session, user: Reviewer, change_id: str, power: str) -> tuple[TenantRole, Change]:
    """The change in the URL and the role under which this user may use `power` on it; 404 if none."""
    change = changes_repo.find_in_tenants(session, tenant_ids=[r.tenant_id for r in user.roles],
                                          change_id=change_id)
    if change is None or not user.may("read", change.tenant_id, change.agent_id):
        raise NotFound("change not found")
    role = user.role_in(change.tenant_id)
    if power != "read" and not role.can(power):
        raise NotFound("change not found")
    return role, change


NEXT_LOOKAHEAD = 25
"""How many changes at the head of the queue "Next" looks through for one this reviewer has not approved."""


def _next_pending(session, role: TenantRole, decided_id: str, flt: QueueFilter | None = None,
                  user: Reviewer | None = None) -> tuple[str | None, int]:
    """The next pending change to review in the queue's filter and sort (`flt`; oldest first when
    None), not this one nor one `user` already approved (its other approval must be someone else's),
    and how many changes the filter lists."""
    flt = flt or QueueFilter()
    rows, total = _list_in(session, role.tenant_id, role.agents, flt, NEXT_LOOKAHEAD)
    who = _actor_label(user.actor) if user is not None else None
    found = next((c.id for c in rows if c.id != decided_id and not _has_approved(c.approvals, who)), None)
    if found is None and who is not None and total > len(rows):
        # The head of the queue is all approved by this reviewer: ask past it, leaving those out in SQL.
        rest, _ = _list_in(session, role.tenant_id, role.agents, replace(flt, not_approved_by=who), 2)
        found = next((c.id for c in rest if c.id != decided_id), None)
    return found, total


def _still_live(session, role: TenantRole, memory_id: str, result: dict[str, Any]) -> str | None:
    """After a plain approve of a remember, the similar memory the reviewer was shown if it is still
    live — both now are, and the page says so; None when there was none or the decision ended it."""
    outcome = result.get("result") or {}
    if (result.get("operation") != "remember" or result.get("status") != "approved" or not memory_id
            or outcome.get("superseded") or outcome.get("merged_into")):
        return None
    found = repo.live_owner(session, tenant_ids=[role.tenant_id], memory_id=memory_id)
    return memory_id if found and role.sees_agent(found.agent_id) else None


def change_page(ctx: AppContext, user: Reviewer, change_id: str, flt: QueueFilter | None = None) -> ChangePage:
    """The change page: the change with its live diff, the next pending change (in the queue's filter
    and sort `flt`) and the queue's count."""
    with ctx.db.sessions.begin() as session:
        role, change = _locate(session, user, change_id, "read")
        next_id, pending = _next_pending(session, role, change.id, flt, user)
        view = _view(ctx, session, change)
        _note_page(ctx, session, user, role, change, view)
        return ChangePage(role, change, view, next_id=next_id, pending=pending,
                          approved_by_you=approved_by(view, user), own_change=_own(session, change, user))


def _note_page(ctx: AppContext, session, user: Reviewer, role: TenantRole, change: Change,
               view: dict[str, Any]) -> None:
    """A change page quotes live memory (what the change would touch, its neighbours, the decided
    copy): the reviewer has read it. Recorded in the page's own session, never budgeted (people
    are not keys)."""
    change_reads.for_person(ctx, tenant_id=role.tenant_id, actor=user.actor, operation="review.change",
                            agent_id=change.agent_id, memory_ids=shown_on_page(view),
                            query={"change_id": change.id}, session=session)


def decide_on_page(ctx: AppContext, user: Reviewer, change_id: str, request: DecisionRequest,
                   also_live: str | None = None, flt: QueueFilter | None = None) -> ChangePage:
    """A reviewer's decision from the change page, in one session: find the change, decide it, and
    read what the page shows next (its new state, what the decision did, the next pending change,
    whether `also_live` - the similar memory shown - is still live). A refused decision (409, 422
    when a high-risk approval lacks `confirm_risk`, 403 `own_change` from its author) comes back as
    `conflict` with the page's fresh state; other errors raise."""
    with ctx.db.sessions() as session:
        role, change = _locate(session, user, change_id, "decide")
        try:
            result = _decide_in(ctx, session, role.tenant_id, change.id, user.actor, role.sees_agent, request,
                                operation=change.operation)
        except (Conflict, ConfirmationRequired, OwnChange) as error:
            session.rollback()
            change = load_change(session, role.tenant_id, change_id, role.sees_agent)
            view = _view(ctx, session, change)
            _note_page(ctx, session, user, role, change, view)
            page = ChangePage(role, change, view, conflict=error, approved_by_you=approved_by(view, user),
                              own_change=isinstance(error, OwnChange))
            session.commit()
            return page
        # Read back as decided (a plain approval wrote it in SQL, past the session's copy): the page
        # shows the diff as decided, or the live diff while more approvals are needed.
        session.expire_all()
        view = _view(ctx, session, load_change(session, role.tenant_id, change_id, role.sees_agent))
        next_id, pending = _next_pending(session, role, change.id, flt, user)
        page = ChangePage(role, change, view, next_id=next_id, pending=pending, result=result,
                          also_live=_still_live(session, role, also_live or "", result),
                          approved_by_you=approved_by(view, user))
        _note_page(ctx, session, user, role, change, view)
        session.commit()
        return page


def _require_no_outcome_choice(change, request: DecisionRequest) -> None:
    """An approval that is not the last one only records its reviewer: what the change does (edits,
    merge_into, supersedes, a choice of memories) is chosen with the last approval. Sent earlier, it
    is refused rather than dropped, so no reviewer believes a choice applied that did not."""
    chosen = [name for name, value in (("edits", request.edits), ("merge_into", request.merge_into),
                                       ("supersedes", request.supersedes), ("memory_ids", request.memory_ids),
                                       ("keep_both", request.keep_both))
              if value]
    if chosen:
        raise ValidationFailed.at(f"/{chosen[0]}", f"{', '.join(chosen)} can only be given with the last approval: "
                                  f"this change needs {change.approvals_required} and this one only records yours")


def _require_pending(change) -> None:
    if change.status != "pending":
        raise Conflict(f"change already {change.status}", details={"reason": "already_decided",
                                                                   "status": change.status})


def _has_approved(approvals: list[dict[str, Any]], who: str) -> bool:
    return any(a["by"] == who for a in approvals)


def _require_new_reviewer(approvals: list[dict[str, Any]], who: str) -> None:
    if _has_approved(approvals, who):
        raise Conflict("the same reviewer cannot give both approvals", details={"reason": "same_reviewer"})


def _with_approval(approvals: list[dict[str, Any]], who: str, approver: dict[str, Any], now) -> list[dict[str, Any]]:
    """`approvals` and this one: who it counts as (`by`, `name`) and, when given with an API key, the
    key (`via_key`) and its owner's id (`owner`: None for a key of no one)."""
    entry = {"by": who, "name": approver.get("name"), "at": format_ts(now)}
    if approver.get("via_key"):
        entry.update(via_key=approver["via_key"], owner=approver.get("owner"))
    return [*approvals, entry]


def _approver(session, tenant_id: str, actor: dict[str, Any]) -> dict[str, Any]:
    """Whom a decision by `actor` counts as: a person signed in is themselves; a decision made with
    an API key that belongs to someone is that person's (`user:<id>`, their username), so they
    cannot give a second approval with a sign-in or another key of theirs; one made with a key of
    no one is the key's (`api_key:<id>`, no name: pages show it as "key <id> (no owner)"). A key
    whose owner no longer holds a role in the tenant, is disabled, or holds a role that does not
    decide (a viewer, an auditor) decides nothing (403): a key never decides more than its owner could."""
    if actor.get("kind") != "api_key":
        return actor
    key_id, owner = actor.get("id"), actor.get("owner_user_id")
    if owner is None:
        return {"kind": "api_key", "id": key_id, "name": None, "via_key": key_id, "owner": None}
    found = users_repo.member(session, tenant_id=tenant_id, user_id=owner)
    if found is None or found[0].disabled_at is not None:
        raise Forbidden("this key's owner no longer holds an active role in this tenant, so its decisions "
                        "cannot be counted as theirs; create a key for someone who does")
    if "decide" not in ROLE_POWERS[found[1].role]:  # a key never decides more than its owner could
        raise Forbidden(f"this key's owner holds the role '{found[1].role}' in this tenant, which does not "
                        "decide changes, so the key may not either")
    return {"kind": "user", "id": owner, "name": found[0].username, "via_key": key_id, "owner": owner}


def _require_owned_key(session, tenant_id: str, approver: dict[str, Any], approvals_required: int) -> None:
    """Refuse (403) an approval with a key of no one of a change needing two or more approvals when
    the tenant asks for owned keys there; such an approval cannot be tied to a person."""
    if approver.get("kind") != "api_key" or approvals_required < 2:
        return
    if tenant_config.two_person_owned_keys(tenant_repo.settings_of(session, tenant_id=tenant_id)):
        raise Forbidden(f"this change needs {approvals_required} approvals from different people and this key "
                        "belongs to no one; approve with a key that has an owner, or sign in")


def _record_approval(ctx: AppContext, session, change, actor: dict[str, Any], request: DecisionRequest) -> None:
    """The final approval's audit entry and `change.approved` event (`change` already holds its decision)."""
    ctx.audit.append(session, tenant_id=change.tenant_id, event_type="change.approved", actor=actor,
                     subject={"type": "change", "id": change.id},
                     data={"operation": change.operation, "memory_ids": list(change.memory_ids),
                           "edited": bool(request.edits), "merge_into": request.merge_into,
                           "supersedes": request.supersedes, "reason_given": bool(request.reason),
                           "retired": [r["id"] for r in (change.result or {}).get("retired") or []],
                           "kept_by_choice": list((change.result or {}).get("kept_by_choice") or []),
                           "approvers": [a["by"] for a in change.approvals]})
    events.change_event(session, change, "approved")


def _lock_change_row(session, tenant_id: str, change_id: str, may_see: AgentCheck):
    """The pending change as a plain row, locked until commit; 404 / 409 as `load_change` and `_decide`."""
    row = changes_repo.lock_row(session, tenant_id=tenant_id, change_id=change_id)
    if row is None or not may_see(row.agent_id):
        raise NotFound("change not found")
    _require_pending(row)
    return row


def _approve_staged_memory(ctx: AppContext, session, row, actor: dict[str, Any], approver: dict[str, Any],
                           request: DecisionRequest) -> dict[str, Any]:
    """Approve a locked, pending `remember` change that needs no further approval, without edits:
    the same writes, audit entries and events as the general path (`_apply`, `_committed`).
    `approver` is whom the approval counts as (`_approver`); audit entries name `actor`."""
    who, now = _actor_label(approver), utcnow()
    _require_owned_key(session, row.tenant_id, approver, row.approvals_required)
    _require_new_reviewer(row.approvals, who)
    memory_id = row.memory_ids[0]
    reviewer = _reviewer(approver)
    staged = _staged_memory(session, row)
    planned = _replaced(ctx, session, row, staged, _candidates(session, row, staged))
    result = {"memory_id": memory_id, **supersession.outcome(planned, keep_both=request.keep_both,
                                                             supersedes=request.supersedes)}
    retiring = supersession.lock(session, tenant_id=row.tenant_id, agent_id=row.agent_id, result=result)
    decided = SimpleNamespace(**{
        **row._mapping, "status": "approved", "approvals": _with_approval(row.approvals, who, approver, now),
        "result": result, "decided_at": now, "decided_by": who, "reason": request.reason,
        "decided_view": {"reviewer": reviewer}})
    memory = changes_repo.approve_staged_remember(
        session, tenant_id=row.tenant_id, change_id=row.id, memory_id=memory_id, now=now,
        approvals=decided.approvals, result=decided.result, decided_by=who, reason=request.reason,
        reviewer=reviewer)
    ctx.audit.append(session, tenant_id=row.tenant_id, event_type="memory.committed", actor=actor,
                     subject={"type": "memory", "id": memory.id},
                     data=mem.memory_event(ctx, memory, change_id=row.id, edited=False))
    events.memory_written(session, memory)
    supersession.retire(ctx, session, tenant_id=row.tenant_id, change_id=row.id, actor=actor, new_id=memory.id,
                        rows=retiring)
    _record_approval(ctx, session, decided, actor, request)
    return {**change_json(decided), "result": decided.result}


def withdraw(ctx: AppContext, *, tenant_id: str, change_id: str, actor: dict[str, Any], may_see: AgentCheck) -> dict:
    """The submitting agent takes its change back before a decision."""
    with ctx.db.sessions.begin() as session:
        change = load_change(session, tenant_id, change_id, may_see, lock=True)
        if change.status != "pending":
            raise Conflict(f"change already {change.status}", details={"reason": "already_decided",
                                                                       "status": change.status})
        if change.operation in recover.RECOVER_OPERATIONS:
            raise Forbidden("a recover's changes are decided by a reviewer; the agent cannot withdraw them")
        change.status, change.decided_at, change.decided_by = "withdrawn", utcnow(), _actor_label(actor)
        if change.operation == "remember":
            memory = _staged_memory(session, change, lock=True)
            memory.status, memory.updated_at = "withdrawn", utcnow()
            _staged_memory_ended(ctx, session, memory, "memory.withdrawn", change, actor)
        ctx.audit.append(session, tenant_id=tenant_id, event_type="change.withdrawn", actor=actor,
                         subject={"type": "change", "id": change.id}, data={"operation": change.operation})
        events.change_event(session, change, "withdrawn")
        return change_json(change)


def _staged_memory_ended(ctx: AppContext, session, memory: Memory, event_type: str, change, actor: dict) -> None:
    """Record a staged memory's end (rejected, withdrawn): its state is bound to the log like any other."""
    ctx.audit.append(session, tenant_id=change.tenant_id, event_type=event_type, actor=actor,
                     subject={"type": "memory", "id": memory.id},
                     data=mem.memory_event(ctx, memory, change_id=change.id))


def _actor_label(actor: dict[str, Any]) -> str:
    return f"{actor.get('kind')}:{actor.get('id')}"


def _reject(ctx: AppContext, session, change: Change, actor: dict, reason: str | None) -> None:
    change.status = "rejected"
    if change.operation == "remember":
        memory = _staged_memory(session, change, lock=True)
        memory.status, memory.updated_at = "rejected", utcnow()
        _staged_memory_ended(ctx, session, memory, "memory.rejected", change, actor)
    elif change.operation in recover.RECOVER_OPERATIONS:
        recover.reject(ctx, session, change, actor, reason)
    ctx.audit.append(session, tenant_id=change.tenant_id, event_type="change.rejected", actor=actor,
                     subject={"type": "change", "id": change.id},
                     data={"operation": change.operation, "memory_ids": list(change.memory_ids),
                           "reason_digest": hashlib.sha256((reason or "").encode()).hexdigest()})
    events.change_event(session, change, "rejected")


@dataclass
class _Prepared:
    """Work done before the decision's transaction: validation, redaction and embedding of edits."""

    clean: mem.CleanWrite | None = None
    memory_type: str | None = None
    embedding: list[float] | None = None
    merge_plan: mem.MergePlan | None = None
    merge_rows: list[Memory] | None = None


def _prepare(ctx: AppContext, session, tenant_id: str, change_id: str, may_see: AgentCheck,
             request: DecisionRequest) -> _Prepared:
    """Validate, redact and embed what the decision needs, reading in `session` with no lock held.
    The rows a merge plan was made from leave the session, so the decision's locked reads load
    them afresh and can tell whether they changed meanwhile."""
    prepared = _plan(ctx, session, tenant_id, change_id, may_see, request)
    for row in prepared.merge_rows or []:
        session.expunge(row)
    return prepared


def _plan(ctx: AppContext, session, tenant_id: str, change_id: str, may_see: AgentCheck,
          request: DecisionRequest) -> _Prepared:
    prepared = _Prepared()
    change = load_change(session, tenant_id, change_id, may_see)
    if request.memory_ids is not None and change.operation not in ("forget", "expire"):
        raise ValidationFailed.at("/memory_ids", "choosing memories applies to forget and expire changes only")
    if change.operation == "remember" and not (request.edits or request.merge_into):
        return prepared  # a plain approval: nothing to validate or embed
    if change.operation == "remember":
        memory = _staged_memory(session, change)
        edits = request.edits or {}
        if edits:
            memory_type = edits.get("type", memory.type)
            prepared.clean = mem.clean_payload(
                ctx, session, tenant_id, content=edits.get("content", memory.content),
                tags=edits.get("tags", list(memory.tags)), metadata=edits.get("metadata", memory.metadata_),
                memory_type=memory_type)
            prepared.memory_type = memory_type
        content = prepared.clean.content if prepared.clean else memory.content
        if request.merge_into:
            target = repo.get_visible(session, scope=Scope(tenant_id, change.agent_id), memory_id=request.merge_into)
            if target is None:
                raise NotFound("memory to merge into not found")
            staged = Memory(id=memory.id, content=content, tags=(prepared.clean.tags if prepared.clean else memory.tags),
                            metadata_=(prepared.clean.metadata if prepared.clean else memory.metadata_),
                            confidence=memory.confidence, created_at=memory.created_at)
            prepared.merge_rows = [target]
            prepared.merge_plan = mem.plan_merge([target, staged], target.id, "merge_content")
            prepared.embedding = ctx.embedder.embed([prepared.merge_plan.content])[0].tolist()
        elif prepared.clean and prepared.clean.content != memory.content:
            prepared.embedding = ctx.embedder.embed([content])[0].tolist()
        if request.supersedes and request.supersedes == request.merge_into:
            raise ValidationFailed.at("/supersedes", "cannot both merge into and supersede the same memory")
    elif request.edits or request.merge_into or request.supersedes or request.keep_both:
        raise ValidationFailed.at("/edits", "edits, merge_into, supersedes and keep_both apply to remember changes only")
    elif change.operation == "merge":
        rows = repo.matching(session, scope=Scope(tenant_id, change.agent_id),
                             ids=[change.request["canonical"], *change.request["duplicates"]])
        plan = mem.plan_merge(rows, change.request["canonical"], change.request.get("strategy", "keep_canonical")) \
            if len(rows) == 1 + len(change.request["duplicates"]) else None
        prepared.merge_rows, prepared.merge_plan = rows, plan
        if plan is not None and plan.reembed:
            prepared.embedding = ctx.embedder.embed([plan.content])[0].tolist()
    return prepared


def _apply(ctx: AppContext, session, change: Change, actor: dict, request: DecisionRequest,
           prepared: _Prepared) -> dict[str, Any]:
    """Carry out an approved change against live state, in the decision's transaction."""
    tenant_id, now = change.tenant_id, utcnow()
    if change.operation == "remember" and not request.merge_into:
        # What it replaces is read before it goes live (as the text it will hold), so it is not its own neighbour.
        staged = _staged_memory(session, change)
        content = prepared.clean.content if prepared.clean is not None else staged.content
        planned = _replaced(ctx, session, change, staged, _candidates(session, change, staged, prepared.embedding),
                            content, prepared.embedding)
        # The common case in one round trip: the staged row goes live (with any edits) and comes back.
        values: dict[str, Any] = {"status": "live", "live_from": now, "updated_at": now}
        if prepared.clean is not None:
            values.update(content=prepared.clean.content, tags=prepared.clean.tags,
                          metadata_=prepared.clean.metadata, type=prepared.memory_type)
        if prepared.embedding is not None:
            values["embedding"] = prepared.embedding
        memory = repo.update_returning(session, tenant_id=tenant_id, memory_id=change.memory_ids[0], **values)
        return _committed(ctx, session, change, actor, request, memory, planned, edited=prepared.clean is not None)
    if change.operation == "remember":  # merged into a live memory instead of going live itself
        memory = _staged_memory(session, change, lock=True)
        if prepared.clean is not None:
            memory.content, memory.tags, memory.metadata_ = (prepared.clean.content, prepared.clean.tags,
                                                             prepared.clean.metadata)
            memory.type = prepared.memory_type
        target = repo.lock_live(session, scope=Scope(tenant_id, change.agent_id), ids=[request.merge_into])
        if not target or target[0].updated_at != prepared.merge_rows[0].updated_at:
            raise Conflict("the memory to merge into changed; review again", details={"reason": "stale_review"})
        target = target[0]
        plan = prepared.merge_plan
        target.content, target.tags, target.metadata_ = plan.content, plan.tags, plan.metadata
        target.confidence, target.embedding, target.updated_at = plan.confidence, prepared.embedding, now
        memory.status, memory.merged_into, memory.ended_at, memory.updated_at = "merged", target.id, now, now
        derivations.record(session, tenant_id=tenant_id, derived_id=target.id, source_ids=[memory.id], kind="merge",
                           via=change.id, at=now)
        session.flush()
        ctx.audit.append(session, tenant_id=tenant_id, event_type="memory.merged", actor=actor,
                         subject={"type": "memory", "id": target.id},
                         data=mem.memory_event(ctx, target, strategy="merge_content", duplicates=[memory.id],
                                               change_id=change.id))
        # The staged row's own end, as a merge records each duplicate's (its state is bound to the log).
        ctx.audit.append(session, tenant_id=tenant_id, event_type="memory.merged_into", actor=actor,
                         subject={"type": "memory", "id": memory.id},
                         data={"canonical": target.id, "strategy": "merge_content", "change_id": change.id,
                               "content_digest": mem.content_digest(memory),
                               "state": mem.state_record(ctx, memory)})
        events.memory_written(session, target)
        return {"memory_id": target.id, "merged_into": target.id}

    if change.operation in ("forget", "expire"):
        rows = _resolve_targets(session, change, lock=True)
        kept: list[str] = []
        if request.memory_ids is not None:
            unknown = sorted(set(request.memory_ids) - {m.id for m in rows})
            if unknown:
                raise ValidationFailed.at("/memory_ids", "not among the memories this change would touch: "
                                          + ", ".join(unknown[:10]))
            kept = [m.id for m in rows if m.id not in request.memory_ids]
            rows = [m for m in rows if m.id in request.memory_ids]
        if change.operation == "forget":
            mem.apply_forget(ctx, session, tenant_id, actor, rows, hard=bool(change.request.get("hard_delete")),
                             reason=change.request.get("reason"), change_id=change.id)
        else:
            mem.apply_expire(ctx, session, tenant_id, actor, rows, change.request.get("action", "forget"),
                             change_id=change.id)
        return {"affected": [m.id for m in rows], **({"kept": kept} if kept else {})}
    if change.operation in ("workspace_write", "workspace_delete"):
        return workspace.apply_change(ctx, session, change, actor)
    if change.operation in recover.RECOVER_OPERATIONS:
        return recover.approve(ctx, session, change, actor)
    if change.operation == "merge" and change.request.get("compaction_run"):  # a staged compaction group
        return compaction.apply_staged(ctx, session, change, actor, prepared.merge_rows)
    if change.operation == "merge":
        if prepared.merge_plan is None:
            raise Conflict("memories to merge are gone; reject this change", details={"reason": "stale_review"})
        request_body = change.request
        canonical = mem.apply_merge(ctx, session, tenant_id, actor, Scope(tenant_id, change.agent_id),
                                    request_body["canonical"], request_body["duplicates"],
                                    request_body.get("strategy", "keep_canonical"), prepared.merge_plan,
                                    prepared.embedding, expected=prepared.merge_rows, change_id=change.id)
        return {"memory_id": canonical.id, "merged": request_body["duplicates"]}
    raise Forbidden(f"cannot apply {change.operation!r} changes here")


def _committed(ctx: AppContext, session, change: Change, actor: dict, request: DecisionRequest, memory: Memory,
               planned: list[dict[str, Any]], *, edited: bool) -> dict[str, Any]:
    """Audit and announce an approved remember that is now live; retire the `planned` memories it
    replaces (`app.services.memory.supersession`), unless the reviewer keeps both."""
    tenant_id = change.tenant_id
    ctx.audit.append(session, tenant_id=tenant_id, event_type="memory.committed", actor=actor,
                     subject={"type": "memory", "id": memory.id},
                     data=mem.memory_event(ctx, memory, change_id=change.id, edited=edited))
    events.memory_written(session, memory)
    result: dict[str, Any] = {"memory_id": memory.id, **supersession.outcome(
        planned, keep_both=request.keep_both, supersedes=request.supersedes)}
    rows = supersession.lock(session, tenant_id=tenant_id, agent_id=change.agent_id, result=result)
    supersession.retire(ctx, session, tenant_id=tenant_id, change_id=change.id, actor=actor, new_id=memory.id,
                        rows=rows)
    return result
