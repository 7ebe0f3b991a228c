"""The change record: the contract's change shape, one change as read (`GET /v1/changes/{id}`), the
queue (keyset-paginated, filtered to the agents the caller may see), and what a decided change
keeps of the diff its reviewer was shown (`decided_diff`, `snapshot`)."""

from __future__ import annotations

from typing import Any, Callable

from app.core.access import Principal, agent_allowed
from app.core.screening import EXPLANATIONS
from app.core.timefmt import format_ts
from app.db.models import Change, Memory
from app.errors import NotFound
from app.repos.memory import memories as repo
from app.repos.review import changes as changes_repo
from app.repos.review.changes import RISK_RANK, QueueFilter  # noqa: F401 (the queue's filter and sort keys)
from app.services.review import change_reads
from app.services.runtime.context import AppContext

AgentCheck = Callable[[str], bool]


def change_json(change: Change) -> dict[str, Any]:
    """The contract's change shape (§4)."""
    return {
        "id": change.id, "operation": change.operation, "status": change.status, "agent_id": change.agent_id,
        "user_id": change.user_id, "memory_ids": list(change.memory_ids),
        "submitted_at": format_ts(change.submitted_at), "decided_at": format_ts(change.decided_at),
        "decided_by": change.decided_by, "reason": change.reason, "approvals": list(change.approvals),
        "approvals_required": change.approvals_required, "policy_rule": change.policy_rule,
        "redactions": list(change.redactions), "risk_flags": [explained(f) for f in change.risk_flags or []],
        "risk_level": change.risk_level, "agent_reason": agent_reason(change),
        "decided_by_name": _reviewer_name(change),
    }


def explained(flag: Any) -> Any:
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
            body["proposed"] = _proposed_fields(brief(staged_memory(session, change)))
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


def snapshot(diff: dict[str, Any], actor: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """What a decided change keeps of the diff its reviewer was shown, and the ids of the memories
    whose content that copy holds. A hard delete keeps no content of what it deletes."""
    diff = {k: v for k, v in diff.items() if not k.startswith("_")}
    if diff.get("operation") == "forget" and diff.get("hard_delete"):
        diff["affected"] = [{**m, "content": None, "metadata": {}, "tags": []} for m in diff.get("affected") or []]
    refs = [m["id"] for key in ("similar", "affected", "before") for m in diff.get(key) or []
            if m.get("content") is not None]
    refs += [diff[key]["id"] for key in ("proposed", "closest", "after") if isinstance(diff.get(key), dict)]
    return {"diff": diff, "reviewer": decided_reviewer(actor)}, sorted(set(refs))


def decided_reviewer(actor: dict[str, Any]) -> dict[str, Any]:
    """Who decided, as a decided change keeps it (a person's username is their display name; a
    decision made with an API key also keeps the key's id)."""
    kept = {"kind": actor.get("kind"), "id": actor.get("id"), "name": actor.get("name")}
    return {**kept, "via_key": actor["via_key"]} if actor.get("via_key") else kept


def list_changes(ctx: AppContext, tenant_id: str, may_see_patterns: tuple[str, ...], flt: QueueFilter,
                 limit: int = 50, after: tuple | None = None) -> tuple[list[Change], int]:
    """Keyset-paginated changes in `flt.sort` order; also the total matching count.

    `after` is the last row's (submitted_at, id) — or (risk rank, submitted_at, id) for the risk sort."""
    with ctx.db.sessions() as session:
        return list_in(session, tenant_id, may_see_patterns, flt, limit, after)


def list_in(session, tenant_id: str, may_see_patterns: tuple[str, ...], flt: QueueFilter, limit: int,
             after: tuple | None = None) -> tuple[list[Change], int]:
    # Globs are checked in Python; SQL narrows by the literal prefix before the first wildcard.
    prefixes = None if "*" in may_see_patterns else [p.split("*")[0].split("?")[0] for p in may_see_patterns]
    rows, total = changes_repo.page(session, tenant_id=tenant_id, flt=flt, agent_prefixes=prefixes,
                                    limit=limit * 2, after=after)
    return [c for c in rows if agent_allowed(c.agent_id, may_see_patterns)][:limit], total


def brief(memory: Memory, similarity: float | None = None) -> dict[str, Any]:
    item = {"id": memory.id, "content": memory.content, "type": memory.type, "tags": list(memory.tags),
            "source": memory.source,
            "metadata": memory.metadata_, "confidence": float(memory.confidence), "user_id": memory.user_id,
            "created_at": format_ts(memory.created_at), "updated_at": format_ts(memory.updated_at)}
    if similarity is not None:
        item["similarity"] = round(similarity, 4)
    return item


def staged_memory(session, change: Change, *, lock: bool = False) -> Memory:
    """The memory a `remember` change staged (keys are (id, tenant))."""
    return repo.get_by_key(session, tenant_id=change.tenant_id, memory_id=change.memory_ids[0], lock=lock)
