"""What a staged change shows of memory content, so that showing it is a read like any other.

A change's diff quotes live memories: every memory a forget or expire would touch, the rows a
merge would fold together (and the merged text, which is made of them), the nearest live memories
beside a staged remember, the memory a recover would bring back, and the current text of a
workspace file a staged write would replace. A change decided keeps a copy of what its reviewer
saw (`decided_view`), which quotes the same memories as they were. For an API key each of those is
taken from its read budget (429 `read_budget_exceeded`, nothing answered, when spent) and recorded
in the read audit; for a signed-in person it is recorded (people have no budget).

What is not a read: the proposed content of a pending write (the agent's own request, not a live
memory), and ids, counts and digests.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable, Mapping

from app.services.audit import read_audit, read_budgets

if TYPE_CHECKING:
    from app.core.access import Principal
    from app.services.runtime.context import AppContext

LISTED = ("similar", "replaces", "affected", "before", "evidence")
"""Diff keys holding a list of memory briefs (remember's neighbours, what it replaces and a promotion's evidence, forget/expire, merge)."""
SINGLE = ("closest", "after", "memory")
"""Diff keys holding one memory brief (remember's closest, merge's result, a recover's memory)."""
WORKSPACE_CURRENT = ("remove", "context")
"""Line kinds of a workspace diff that quote the file as it is now (not the proposed text)."""


def shown_in_diff(diff: Mapping[str, Any] | None, *, proposed_is_memory: bool = False) -> list[str]:
    """Ids of the memories whose content `diff` quotes, in order, once each. `proposed_is_memory`:
    the `proposed` brief is a memory of record too (a decided change's copy of an approved write),
    not a pending request's own text."""
    if not isinstance(diff, Mapping):
        return []
    ids: list[str] = []
    for key in LISTED:
        ids += [m["id"] for m in diff.get(key) or [] if isinstance(m, Mapping) and _quotes(m)]
    for key in SINGLE + (("proposed",) if proposed_is_memory else ()):
        brief = diff.get(key)
        if isinstance(brief, Mapping) and brief.get("id") and _quotes(brief):
            ids.append(brief["id"])
    path = diff.get("path")
    if isinstance(path, str) and any(isinstance(line, Mapping) and line.get("kind") in WORKSPACE_CURRENT
                                     for line in diff.get("lines") or []):
        ids.append(workspace_read_id(path))
    return list(dict.fromkeys(i for i in ids if isinstance(i, str)))


def _quotes(brief: Mapping[str, Any]) -> bool:
    # A hard delete's copy keeps no content: showing its id and dates is no read of it.
    return brief.get("content") is not None


def workspace_read_id(path: str) -> str:
    """How a workspace file's body is named in the read audit and the read budget."""
    return f"workspace:{path}"


def shown_in_change(body: Mapping[str, Any]) -> list[str]:
    """Ids whose content a `GET /v1/changes/{id}` body quotes: its decided diff (the proposed
    memory only once approved; until then it is the agent's own request)."""
    approved = (body.get("status") == "approved")
    return shown_in_diff(body.get("diff"), proposed_is_memory=approved)


def for_key(ctx: AppContext, principal: Principal, *, operation: str, agent_id: str | None,
            memory_ids: Iterable[str], change_id: str) -> None:
    """Take what a key is about to be shown from its read budget and record it (before answering)."""
    ids = list(memory_ids)
    if ids:
        read_budgets.account(ctx, principal, operation=operation, agent_id=agent_id, memory_ids=ids,
                             query={"change_id": change_id})


def for_person(ctx: AppContext, *, tenant_id: str, actor: dict[str, str], operation: str,
               agent_id: str | None, memory_ids: Iterable[str], query: dict[str, Any] | None = None,
               session=None) -> None:
    """Record what a signed-in person was shown (no budget: people are not keys). `session`: as
    for `read_audit.note_read`."""
    ids = list(memory_ids)
    if ids:
        read_audit.note_read(ctx, tenant_id=tenant_id, actor=actor, key_id=None, agent_id=agent_id,
                             operation=operation, memory_ids=ids, query=query, session=session)
