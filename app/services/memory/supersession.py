"""What approving a remember does to the live facts it replaces: one rule, for every path.

A staged remember that is approved goes live; the live memories it replaces stop being live
(status ``superseded``, pointing at it) in the same transaction, unless the reviewer chose to keep
both (``keep_both``). It replaces a live memory of the same agent and user that

* carries the same key tag (``KEY_TAG_PREFIXES``: the LangGraph store's one tag per namespace and
  key): a new value for the key, so the old value is no longer the key's (``same_key``); or
* states the same subject and attribute with another value (``contradiction``: "Heidi moved to
  Brooklyn" over "Heidi lives in Oslo", read by ``app.core.screening.contradiction.replaces``, with
  the contradiction model where the rules cannot tie a reported change to its live fact), so
  a contradiction screening flagged retires every memory it contradicts, not only the closest.

A memory the reviewer names (``supersedes``) is retired too (``chosen``). The page, the keyboard,
bulk approval, ``POST /v1/changes/{id}/approve``, the client and the LangGraph store all decide
through ``app.services.review.review``, which plans with ``plan`` (``app.services.review.diffs.replaced``)
and applies with ``retire``; the decision's result says which memories were retired (``retired``,
``superseded`` the first), or which were kept live by choice (``kept_by_choice``).
"""

from __future__ import annotations

from typing import Any, Sequence

from sqlalchemy import inspect as sa_inspect

from app.core import attributes
from app.core.screening import contradiction
from app.core.timefmt import utcnow
from app.db.models import Memory
from app.errors import NotFound, ValidationFailed
from app.repos.memory import memories as repo
from app.repos.memory.memories import Scope
from app.services.memory import derivations
from app.services.memory import memories as mem
from app.services.runtime.context import AppContext

KEY_TAG_PREFIXES = ("lgitem:",)
"""Tags naming an item's key: at most one live memory per agent holds each (the LangGraph store's
`item_tag`)."""
MAX_SAME_KEY = 100
"""Live memories of one key retired at most by one approval (a key normally has one)."""


def key_tags(tags: Sequence[str]) -> list[str]:
    """The key tags among `tags`."""
    return [t for t in tags or () if isinstance(t, str) and t.startswith(KEY_TAG_PREFIXES)]


def plan(session, *, tenant_id: str, agent_id: str, memory: Any, content: str,
         candidates: Sequence[tuple[Memory, float]], encoder: attributes.Encoder | None = None,
         model: str | None = None, vector: Any = None,
         contradiction_model: contradiction.Model | None = None) -> list[dict[str, Any]]:
    """The live memories approving `memory` (with `content`, its text as it would go live) replaces,
    each `{"memory": Memory, "reason", "similarity"?, "frame"?, "old_value"?, "new_value"?}`, the
    same key's first. `candidates` are its nearest live memories with their cosine similarity;
    `encoder`, `model` and `vector` (the embedding function, its model's name and `content`'s
    vector) let the contradiction reader read changes of state by meaning, confirmed by
    `contradiction_model` (``app.nli``) for the nearest ``contradiction.MODEL_NEIGHBOURS``."""
    found: dict[str, dict[str, Any]] = {}
    for tag in key_tags(memory.tags):
        rows = repo.matching(session, scope=Scope(tenant_id, agent_id), tags=[tag])[:MAX_SAME_KEY]
        for row in rows:
            if row.id != memory.id and row.user_id == memory.user_id:
                found.setdefault(row.id, {"memory": row, "reason": "same_key"})
    compared = [(row, similarity) for row, similarity in candidates
                if row.id != memory.id and row.id not in found and row.user_id == memory.user_id
                and row.type != "procedural"]
    meaning = None
    if compared and encoder is not None and vector is not None:
        unloaded = [row.id for row, _ in compared if "embedding" in sa_inspect(row).unloaded]
        vectors = repo.embeddings_of(session, tenant_id=tenant_id, ids=unloaded) if unloaded else {}
        meaning = attributes.meaning(encoder, model, vector, [vectors.get(row.id) if row.id in unloaded
                                                              else row.embedding for row, _ in compared])
    for index, (row, similarity) in enumerate(compared):
        hit = contradiction.replaces(content or "", row.content or "", similarity=similarity,
                                     meaning=meaning.pair(index) if meaning is not None else None,
                                     model=contradiction_model if index < contradiction.MODEL_NEIGHBOURS else None,
                                     unnamed=memory.type == row.type == "semantic")
        if hit is not None:
            found[row.id] = {"memory": row, "reason": "contradiction", "similarity": round(similarity, 4),
                             "frame": hit.frame, "old_value": hit.old_value, "new_value": hit.new_value,
                             "kind": hit.kind}
    return list(found.values())


def check_choice(*, keep_both: bool, supersedes: str | None) -> None:
    """Keeping both and naming a memory to supersede contradict each other: refused, never guessed."""
    if keep_both and supersedes:
        raise ValidationFailed.at("/keep_both", "keep_both keeps every live memory; do not also name one to supersede")


def outcome(planned: Sequence[dict[str, Any]], *, keep_both: bool, supersedes: str | None) -> dict[str, Any]:
    """What the decision's result says of the planned retirements (before they are applied)."""
    if keep_both:
        return {"kept_by_choice": [p["memory"].id for p in planned]} if planned else {}
    ids = ([supersedes] if supersedes else []) + [p["memory"].id for p in planned if p["memory"].id != supersedes]
    if not ids:
        return {}
    why = {p["memory"].id: p["reason"] for p in planned}
    return {"superseded": ids[0], "retired": [{"id": i, "reason": why.get(i, "chosen")} for i in ids]}


def lock(session, *, tenant_id: str, agent_id: str, result: dict[str, Any]) -> dict[str, Memory]:
    """Lock the memories `result` (from `outcome`) retires, and drop from it any that stopped being
    live meanwhile (they need no retiring); one the reviewer named must still be live (404)."""
    retired = result.get("retired") or []
    if not retired:
        return {}
    rows = {m.id: m for m in repo.lock_live(session, scope=Scope(tenant_id, agent_id), ids=[r["id"] for r in retired])}
    if any(r["reason"] == "chosen" and r["id"] not in rows for r in retired):
        raise NotFound("memory to supersede not found")
    kept = [r for r in retired if r["id"] in rows]
    result.pop("superseded", None)
    result.pop("retired", None)
    if kept:
        result.update(superseded=kept[0]["id"], retired=kept)
    return rows


def retire(ctx: AppContext, session, *, tenant_id: str, change_id: str, actor: dict[str, Any], new_id: str,
           rows: dict[str, Memory]) -> None:
    """End the locked `rows` (from `lock`), superseded by `new_id`, each audited."""
    if not rows:
        return
    ended = utcnow()
    ids = sorted(rows)
    repo.end(session, tenant_id=tenant_id, ids=ids, status="superseded", at=ended, superseded_by=new_id)
    derivations.record(session, tenant_id=tenant_id, derived_id=new_id, source_ids=ids, kind="supersede",
                       via=change_id, at=ended)
    for memory_id in ids:
        ctx.audit.append(session, tenant_id=tenant_id, event_type="memory.superseded", actor=actor,
                         subject={"type": "memory", "id": memory_id},
                         data={"superseded_by": new_id, "change_id": change_id,
                               "state": mem.state_record(ctx, rows[memory_id], mem.ended_columns(
                                   "superseded", ended, superseded_by=new_id))})
