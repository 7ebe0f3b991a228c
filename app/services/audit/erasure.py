"""Erasure proven in every store: a delete delivered by the router is read back, and a store that
no longer returns the item earns a signed erasure receipt; one that still does is an alert.

Every path that ends a memory (forget, hard delete, expire, merge, supersede, a recover's
quarantine) changes its row, and the `memories` trigger owes a delivery to every backend that takes
its agent; a backend paused meanwhile is owed the deletions on resume (`repos.backends.owe_existing`).
The delivery job (`app.services.router.backends`) deletes the store's item and then asks the store
whether it still holds it (`Store.holds`: by the store's id, or by `memwarden_id`):

* gone: in the transaction that drops the backend record, a receipt is signed with the audit log's
  Ed25519 key (`app.core.auditchain.receipts`) naming the memory, the store, the confirmation time
  and the audit sequence of the event that ended the memory, and stored (`erasure_receipts`);
* still there: `StillHeld`, a delivery failure like any other (retried with backoff, given up after
  MEMWARDEN_BACKEND_MAX_ATTEMPTS, the record kept), and on every such read-back an audit entry
  `backend.erasure_unconfirmed` and a `backend.erasure_unconfirmed` event (so webhooks). Never a
  receipt, never a silent success.

Receipts are listed per memory (`GET /v1/memories/{id}/erasure-receipts`, scope `audit:read`),
exported beside the chain (`memwarden audit export --receipts FILE`) and verified offline with it
(`memwarden audit verify EXPORT --receipts FILE`).
"""

from __future__ import annotations

import json
import logging
from datetime import datetime
from typing import Any, Iterator

from sqlalchemy.orm import Session

from app.core.access import Principal
from app.core.auditchain import receipts as receipt_format
from app.core.timefmt import format_ts
from app.errors import NotFound
from app.repos.audit import erasure_receipts as repo
from app.repos.memory import memories as memory_repo
from app.services.events import events
from app.services.audit.audit import chain_for
from app.services.router.backend_stores import Store, StoreError
from app.services.runtime.context import AppContext

log = logging.getLogger(__name__)
STILL_HELD = "still_held"
ALERT = "backend.erasure_unconfirmed"


class StillHeld(StoreError):
    """The store answered its delete but still returns the item."""

    def __init__(self, ref: str, agent_id: str):
        super().__init__(f"the store still returns item {ref} after deleting it", STILL_HELD)
        self.ref = ref
        self.agent_id = agent_id


def confirm_gone(store: Store, ref: str, memory_id: str, agent_id: str, user_id: str | None) -> None:
    """Read the item back after its delete; StillHeld when the store still returns it."""
    if store.holds(ref, memory_id, agent_id, user_id):
        raise StillHeld(ref, agent_id)


def record_receipt(ctx: AppContext, session: Session, *, tenant_id: str, backend, memory_id: str,
                   confirmed_at: datetime) -> bool:
    """Sign and store the receipt of a confirmed delete, in the delivery's transaction. False (and
    logged) when the chain holds no event that ended the memory: nothing to cite, so no receipt."""
    chain_id = chain_for(tenant_id)
    ending = repo.ending_event(session, tenant_id=tenant_id, chain_id=chain_id, memory_id=memory_id,
                               event_types=sorted(receipt_format.ERASING_EVENTS))
    if ending is None:
        log.warning("erasure of %s confirmed by backend %s, but no audit event ended it: no receipt",
                    memory_id, backend.name)
        return False
    seq, event_type = ending
    note = receipt_format.sign_receipt(
        ctx.audit.signer, origin=ctx.audit.checkpoint_origin(chain_id), memory_id=memory_id, store=backend.name,
        backend_id=backend.id, confirmed_at=format_ts(confirmed_at), audit_seq=seq, event=event_type)
    repo.insert(session, tenant_id=tenant_id, memory_id=memory_id, backend_id=backend.id, store=backend.name,
                audit_seq=seq, confirmed_at=confirmed_at, note=note)
    return True


def raise_alert(ctx: AppContext, session: Session, *, tenant_id: str, backend, memory_id: str, exc: StillHeld,
                attempt: int, gave_up: bool, actor: dict[str, Any]) -> None:
    """The audit entry and event of a store that still returns an item after its delete."""
    log.warning("backend %s still holds %s (its item %s) after deleting it (attempt %d%s)", backend.name,
                memory_id, exc.ref, attempt, ", giving up" if gave_up else ", retrying")
    ctx.audit.append(session, tenant_id=tenant_id, event_type=ALERT, actor=actor,
                     subject={"type": "memory_delivery", "id": memory_id},
                     data={"backend_id": backend.id, "backend_ref": exc.ref, "attempt": attempt, "gave_up": gave_up})
    events.emit(session, tenant_id, ALERT, {"memoryId": memory_id, "agentId": exc.agent_id, "backendId": backend.id,
                                            "backend": backend.name, "attempt": attempt, "gaveUp": gave_up})


# --- reading receipts -------------------------------------------------------------------------------

def receipt_json(row) -> dict[str, Any]:
    return {"memory_id": row.memory_id, "store": row.store, "backend_id": row.backend_id,
            "confirmed_at": format_ts(row.confirmed_at), "audit_seq": row.audit_seq, "receipt": row.note}


def receipts_of(ctx: AppContext, principal: Principal, memory_id: str) -> dict[str, Any]:
    """A memory's receipts, one per store that confirmed its erasure (any status: a hard-deleted
    memory keeps its row). 404 for a memory the principal may not see."""
    with ctx.db.sessions() as session:
        memory = memory_repo.get_in_tenant(session, tenant_id=principal.tenant_id, memory_id=memory_id)
        if memory is None or not principal.may_act_for(memory.agent_id):
            raise NotFound("memory not found")
        rows = repo.for_memory(session, tenant_id=principal.tenant_id, memory_id=memory_id)
        return {"memory_id": memory_id, "verifier_key": ctx.audit.vkey, "receipts": [receipt_json(r) for r in rows]}


def receipts_listed(ctx: AppContext, *, tenant_id: str, memory_id: str | None = None) -> list[dict[str, Any]]:
    """A memory's receipts (its page checked the memory is the viewer's), or all of a tenant's
    (the operator's `memwarden audit receipts`), oldest first."""
    with ctx.db.sessions() as session:
        if memory_id is not None:
            return [receipt_json(r) for r in repo.for_memory(session, tenant_id=tenant_id, memory_id=memory_id)]
        rows, after = [], 0
        while True:
            page = repo.for_tenant(session, tenant_id=tenant_id, after_id=after)
            rows += [receipt_json(r) for r in page]
            if len(page) < repo.PAGE:
                return rows
            after = page[-1].id


def export_lines(ctx: AppContext, *, tenant_id: str, from_seq: int = 1, to_seq: int | None = None) -> Iterator[str]:
    """The tenant's receipts citing seqs from_seq..to_seq as JSONL (`{"kind": "erasure_receipt",
    "note": ...}` each), oldest first, a page at a time. Written before the chain's export, so
    the export covers every seq they cite."""
    after = 0
    while True:
        with ctx.db.sessions() as session:
            rows = repo.for_tenant(session, tenant_id=tenant_id, after_id=after)
            page = [(r.id, r.audit_seq, r.note) for r in rows]
        for row_id, seq, note in page:
            after = row_id
            if seq >= from_seq and (to_seq is None or seq <= to_seq):
                yield json.dumps({"kind": "erasure_receipt", "note": note}, separators=(",", ":"))
        if len(page) < repo.PAGE:
            return


def counts_since(ctx: AppContext, *, tenant_id: str, since: datetime) -> tuple[int, int]:
    """(receipts signed, unconfirmed-erasure alerts raised) for the tenant since `since`."""
    with ctx.db.sessions() as session:
        return (repo.count_for_tenant(session, tenant_id=tenant_id, since=since),
                repo.count_alerts(session, tenant_id=tenant_id, chain_id=chain_for(tenant_id), event_type=ALERT,
                                  since=since))
