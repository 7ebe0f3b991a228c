"""Reading a backend back: `drift` (the whole store against Memwarden's ledger) and `show` (one
memory, as Memwarden holds it and as the store itself answers for it), for `memwarden backend
drift` and `memwarden backend show`.

Both read the store the server delivers to, through the same factory and options, never a store of
their own: a store whose data lives only inside the process that opened it (mem0 on an embedded
Qdrant, FAISS) would be another, empty store here, so reading it is refused, with the reason,
instead of reporting every item missing. Such a store is wrong for a server anyway: the leading
process delivers and every worker recalls, each with its own copy (`app.stores.mem0_local` is a
shared, offline one). A factory that cannot be imported or built is an error naming it, not a
traceback.
"""

from __future__ import annotations

import logging
from typing import Any

from app.errors import NotFound, Unavailable
from app.repos.router import backends as repo
from app.repos.memory import memories as memory_repo
from app.services.router.backend_stores import Snapshot, StoreError
from app.services.router.backends import _forget_store, _store
from app.services.runtime.context import AppContext

log = logging.getLogger(__name__)


def _readable_store(ctx: AppContext, backend):
    """The backend's adapter, as the server builds it; Unavailable (503) when it cannot be built or
    keeps its data inside one process."""
    try:
        store, lock = _store(ctx, backend)
    except StoreError as exc:
        raise Unavailable(f"backend {backend.name}: cannot build its store: {exc}") from None
    local = getattr(store, "process_local", lambda: None)()
    if local:
        _forget_store(backend.id)  # closed now, not at interpreter exit
        raise Unavailable(f"backend {backend.name}: {local}, so this process cannot read what the server "
                          "delivered to it; give it a store every process reaches (for mem0: "
                          "app.stores.mem0_local:memory)")
    return store, lock


def drift(ctx: AppContext, *, tenant_id: str, name: str, resync: bool = False) -> dict[str, Any]:
    """Compare a backend with Memwarden's ledger: live memories it should hold but does not (nor is
    owed), items it holds for memories no longer live, items whose delivered digest is not the live
    memory's, and (where the store can fetch by id) items missing or changed in the store itself.
    `resync` owes a delivery for each memory named, which puts the store right. A store that fails
    a read ends the store check, and `store_failed` says why in a fixed word."""
    with ctx.db.sessions() as session:
        backend = repo.by_name(session, tenant_id=tenant_id, name=name)
        if backend is None:
            raise NotFound(f"no backend named {name}")
        live = repo.live_ids_for_agents(session, tenant_id=tenant_id, agents_like=backend.agents_like)
        records = repo.records_of_backend(session, tenant_id=tenant_id, backend_id=backend.id)
        owed = repo.pending_memory_ids(session, tenant_id=tenant_id, backend_id=backend.id)
        snaps = {i: Snapshot.of(m) for i, m in live.items()}
    problems = []
    for memory_id in sorted(set(live) - set(records) - owed):
        problems.append({"memory_id": memory_id, "reason": "missing_in_backend"})
    for memory_id, record in sorted(records.items()):
        if memory_id in owed:
            continue
        if memory_id not in live:
            problems.append({"memory_id": memory_id, "reason": "not_live_in_memwarden", "backend_ref": record.backend_ref})
        elif record.content_digest != snaps[memory_id].digest:
            problems.append({"memory_id": memory_id, "reason": "digest_differs", "backend_ref": record.backend_ref})
    checked, store_failed = 0, None
    store, lock = _readable_store(ctx, backend)
    fetch = getattr(store, "content_of", None)
    if fetch is not None:
        flagged = {p["memory_id"] for p in problems}
        for memory_id, record in sorted(records.items()):
            if memory_id in flagged or memory_id in owed or memory_id not in snaps:
                continue
            try:
                with lock:
                    content = fetch(record.backend_ref)
            except StoreError as exc:  # the report says why in a word; the store's answer is logged
                log.warning("drift check of backend %s: reading %s failed: %s", name, record.backend_ref, exc)
                store_failed = exc.reason
                break
            checked += 1
            if content is None:
                problems.append({"memory_id": memory_id, "reason": "missing_in_store", "backend_ref": record.backend_ref})
            elif content != snaps[memory_id].content:
                problems.append({"memory_id": memory_id, "reason": "content_changed_in_store",
                                 "backend_ref": record.backend_ref})
    if resync and problems:
        with ctx.db.sessions.begin() as session:
            for problem in problems:
                if problem["reason"] in ("missing_in_store", "content_changed_in_store"):
                    repo.drop_record(session, tenant_id=tenant_id, backend_id=backend.id, memory_id=problem["memory_id"])
            repo.owe(session, backend_id=backend.id, tenant_id=tenant_id,
                     memory_ids=sorted({p["memory_id"] for p in problems}))
    return {"backend": name, "live_in_memwarden": len(live), "records": len(records), "owed": len(owed),
            "store_checked": checked if fetch is not None else None, "store_failed": store_failed,
            "problems": problems, "resynced": resync}


def show(ctx: AppContext, *, tenant_id: str, name: str, memory_id: str) -> dict[str, Any]:
    """One memory as Memwarden holds it, its latest delivery to the backend, and what the store
    itself answers: for the id it gave (where it can fetch by id: mem0, another Memwarden) and, for
    mem0, every item it holds tagged with the memory's id, so a forgotten memory is seen gone."""
    with ctx.db.sessions() as session:
        backend = repo.by_name(session, tenant_id=tenant_id, name=name)
        if backend is None:
            raise NotFound(f"no backend named {name}")
        memory = memory_repo.get_in_tenant(session, tenant_id=tenant_id, memory_id=memory_id)
        if memory is None:
            raise NotFound(f"no memory {memory_id} in this tenant")
        record = repo.record_of(session, tenant_id=tenant_id, backend_id=backend.id, memory_id=memory_id)
        delivery = next((r for r in repo.deliveries_of(session, tenant_id=tenant_id, memory_id=memory_id)
                         if r.name == name), None)
        snap = Snapshot.of(memory)
    out: dict[str, Any] = {
        "backend": name, "memory_id": memory_id,
        "memwarden": {"status": memory.status, "content": memory.content if memory.status == "live" else None},
        "delivery": None if delivery is None else {"status": delivery.status, "action": delivery.action,
                                                   "attempts": delivery.attempt},
        "backend_ref": record.backend_ref if record else None,
        "delivered_digest_current": (record.content_digest == snap.digest) if record else None,
        "store": None,
    }
    store, lock = _readable_store(ctx, backend)
    fetch, tagged = getattr(store, "content_of", None), getattr(store, "items_for", None)
    if fetch is None and tagged is None:
        out["store"] = {"readable": False, "reason": f"a {backend.kind} store cannot be read by id"}
        return out
    out["store"] = {"readable": True}
    try:
        with lock:
            if fetch is not None and record is not None:
                content = fetch(record.backend_ref)
                out["store"]["by_ref"] = {"present": content is not None, "content": content,
                                          "matches_memwarden": content is not None and memory.status == "live"
                                          and content == memory.content}
            if tagged is not None:  # whatever the store holds under this memory's id, ledger or not
                out["store"]["items"] = [{"ref": ref, "content": content}
                                         for ref, content in tagged(memory_id, memory.agent_id, memory.user_id)]
    except StoreError as exc:
        log.warning("backend show %s: reading %s failed: %s", name, memory_id, exc)
        raise Unavailable(f"backend {name}: reading {memory_id} failed ({exc.reason})") from None
    return out
