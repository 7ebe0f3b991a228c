"""The router: a tenant's governed memories delivered to the stores it already runs, and recall
fused across them.

Writes are governed first, delivered after. Nothing reaches a backend until it is live in
Memwarden (redacted, screened, policy-checked and, when staged, approved). A trigger on `memories`
(migration 0027) owes a delivery to each backend that takes the agent, in the very transaction
that changed the row, on every path; `deliver_due` (a background job of the leading process)
works those rows off: it reads the memory as it stands, puts it into the store (or deletes it when
it is no longer live) and records the store's id for it in `backend_records`. A store that fails
is retried with exponential backoff (`MEMWARDEN_BACKEND_RETRY_BASE_SECONDS`, 4× per attempt,
capped by `MEMWARDEN_BACKEND_RETRY_MAX_SECONDS`) until `MEMWARDEN_BACKEND_MAX_ATTEMPTS`, then the delivery is `failed` and shown
to admins (`memwarden backend status`; `memwarden backend retry` owes them again). Every outcome is
an audit event (`backend.delivered`, `backend.retry`, `backend.gave_up`) naming the memory, the
backend and a digest, never content. A delete is read back from the store before it counts: gone,
and a signed erasure receipt is stored; still there, and it is an alert and a retry
(`app.services.audit.erasure`). Their subject type is `memory_delivery` (with the memory's id,
so they show in its history): they change no memory row, and the state check holds each row to the
latest entry whose subject is the memory itself.

Exactly once, under crashes: a delivery row is leased before the store is called and only marked
delivered after the store answered and its id was recorded. A process killed in between leaves the
lease to expire and the row to be delivered again; the second attempt finds the first one's write
(`Store.find` by `memwarden_id`, or the remote server's Idempotency-Key) and records it instead of
writing twice.

Recall (`fused_recall`): the built-in store and every backend are searched in parallel, each
backend within its `timeout_ms`; a store that errors or times out is named in `stores_failed`
(with a fixed word for why: `timeout`, `http_502`, `refused_address`, ...; what the store answered
goes to the server's log only) and the others' results stand. A backend hit counts only when
`backend_records` says Memwarden put that very item there, with the content the live memory has
now: anything else a store returns (an item someone wrote straight into it, or one that drifted)
is dropped and counted in `dropped_ungoverned` — a store cannot inject content past review. Hits
are fused by `rrf` (k = 60, default), `max` or `weighted` (per-backend weights) and deduplicated by
Memwarden id; the content returned is always Memwarden's row.

Another Memwarden as a backend obeys the outbound rule (`app.services.runtime.outbound`): its URL is
checked when it is added, from the admin page or the CLI alike, and each connection resolves,
checks and pins the address, unless the operator set MEMWARDEN_BACKEND_ALLOW_PRIVATE. Delivery
failures are recorded as the same fixed words, for admins and the API alike.
"""

from __future__ import annotations

import concurrent.futures
import json
import logging
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy.orm import Session

from app.core import routing_rules
from app.core.access import Principal
from app.core.ids import new_id
from app.core.timefmt import format_ts, utcnow
from app.db.models import MemoryBackend
from app.errors import Conflict, NotFound, ValidationFailed
from app.repos.router import backends as repo
from app.repos.memory import memories as memory_repo
from app.repos.memory.memories import Scope
from app.repos.tenancy import tenants as tenant_repo
from app.services.router.backend_stores import (STORE_ERROR, Mem0Store, MemorywireStore, MemwardenStore, Snapshot, Store,
                                         StoreError)
from app.services.audit import erasure
from app.services.runtime.context import AppContext
from app.services.memory.memories import entry_json
from app.services.runtime.outbound import TIMEOUT, OutboundRule, shown_reason, url_refusal
from app.services.tenancy.sealed import seal, unseal
from app.services.tenancy.tenant_config import rules_for

log = logging.getLogger(__name__)
KINDS = ("mem0", "memwarden", "memorywire")
BUILT_IN = "memwarden"
BATCH = 100
_SEALED = b"memwarden/backend-secrets"
SYSTEM_ACTOR = {"kind": "system", "id": "backend-delivery"}  # `kind`, as every actor: the query column is read from it


# --- configuration ---------------------------------------------------------------------------------

def add_backend(ctx: AppContext, *, tenant_name: str, name: str, kind: str, agents: str = "*",
                options: dict[str, Any] | None = None, secret: str | None = None, weight: float = 1.0,
                timeout_ms: int = 2000, actor: dict[str, Any], from_web: bool = False) -> MemoryBackend:
    """Configure a backend for a tenant (the secret is sealed; the audit entry names kind and agents only).
    Memories already live for those agents are owed to it at once, so it starts complete.

    `from_web` (a tenant admin on the admin page, not the operator at the CLI): only another
    Memwarden: a factory import path runs code in the server, which is the operator's call.
    Another Memwarden's URL obeys the outbound rule whoever adds it (no loopback, private or other
    non-public address unless MEMWARDEN_BACKEND_ALLOW_PRIVATE)."""
    if kind not in KINDS:
        raise ValidationFailed.at("/kind", f"kind must be one of {', '.join(KINDS)}")
    if from_web and kind != "memwarden":
        raise ValidationFailed.at("/kind", "mem0 and memorywire backends run code in the server: the operator adds "
                                           "them with `memwarden backend add`")
    if not name or len(name) > 64 or name == BUILT_IN:
        raise ValidationFailed.at("/name", f"a name of 1-64 characters other than {BUILT_IN!r}")
    try:
        like = routing_rules.agents_like(agents)
    except ValueError as exc:
        raise ValidationFailed.at("/agents", str(exc)) from None
    options = dict(options or {})
    _check_options(kind, options, secret, OutboundRule.for_backends(ctx.settings))
    if not (0 < weight <= 100) or not (50 <= timeout_ms <= 60_000):
        raise ValidationFailed.at("/weight", "weight in (0, 100] and timeout_ms in [50, 60000]")
    with ctx.db.sessions.begin() as session:
        tenant = _tenant(session, tenant_name)
        if repo.by_name(session, tenant_id=tenant.id, name=name) is not None:
            raise Conflict(f"tenant {tenant_name} already has a backend named {name}")
        backend_id = new_id("mbk")
        backend = MemoryBackend(id=backend_id, tenant_id=tenant.id, name=name, kind=kind, agents=agents,
                                agents_like=like, options=options, weight=weight, timeout_ms=timeout_ms,
                                secret_enc=seal(ctx, _SEALED, backend_id, secret) if secret else None)
        repo.insert(session, backend)
        tenant_repo.touch(session, tenant_id=tenant.id)  # recall's cached routing sees it at once
        owed = repo.owe_existing(session, backend_id=backend_id, tenant_id=tenant.id, agents_like=like)
        ctx.audit.append(session, tenant_id=tenant.id, event_type="backend.added", actor=actor,
                         subject={"type": "backend", "id": backend_id},
                         data={"name": name, "kind": kind, "agents": agents, "weight": weight,
                               "timeout_ms": timeout_ms, "owed_existing": owed})
    return backend


def _check_options(kind: str, options: dict[str, Any], secret: str | None, rule: OutboundRule) -> None:
    if kind == "memwarden":
        url = options.get("url")
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise ValidationFailed.at("/options/url", "the other Memwarden's base URL (http:// or https://)")
        _, refusal = url_refusal(url, rule)
        if refusal:
            raise ValidationFailed.at("/options/url", refusal)
        if not secret:
            raise ValidationFailed.at("/api_key", "an API key of the other Memwarden (remember, recall, forget)")
    elif kind == "memorywire" and not isinstance(options.get("factory"), str):
        raise ValidationFailed.at("/options/factory", "module:callable returning a memorywire MemoryStore")
    elif kind == "mem0" and not (isinstance(options.get("factory"), str) or isinstance(options.get("config"), str)):
        raise ValidationFailed.at("/options", "factory (module:callable returning mem0.Memory) or config (JSON file)")
    if kind != "memwarden" and isinstance(options.get("factory"), str):
        _check_factory(options["factory"])
    if kind == "mem0" and isinstance(options.get("config"), str) and not options.get("factory"):
        _check_config(options["config"])


def _check_factory(path: str) -> None:
    """Refuse a factory `memwarden serve` could not import, now rather than at the first delivery.
    The import runs in a fresh interpreter of this environment started in an empty directory, as
    a server started elsewhere would see it: a module that only the current directory provides
    (`ops.stores` beside the shell) is refused. Only imported, never called."""
    module, _, attr = path.partition(":")
    if not module or not attr or not all(part.isidentifier() for part in [*module.split("."), attr]):
        raise ValidationFailed.at("/options/factory", f"a factory is module:callable (app.stores.mem0_local:memory), "
                                                      f"got {path!r}")
    probe = ("import importlib, sys\n"
             "try:\n"
             f"    target = getattr(importlib.import_module({module!r}), {attr!r})\n"
             "except Exception as exc:\n"
             "    sys.exit(f'{type(exc).__name__}: {exc}')\n"
             "sys.exit(0 if callable(target) else 'not callable')\n")
    with tempfile.TemporaryDirectory(prefix="memwarden-factory-") as empty:
        try:
            done = subprocess.run([sys.executable, "-c", probe], cwd=empty, capture_output=True, text=True,
                                  timeout=120)
        except subprocess.TimeoutExpired:
            raise ValidationFailed.at("/options/factory", f"importing {module} took over 120 s") from None
    if done.returncode != 0:
        reason = (done.stderr.strip().splitlines() or ["it failed"])[-1][:300]
        raise ValidationFailed.at("/options/factory", (
            f"memwarden serve cannot import the factory {path} ({reason}); install the module or put its "
            f"directory on PYTHONPATH for serve and this command alike (the current directory does not count)"))


def _check_config(path: str) -> None:
    try:
        with open(path, encoding="utf-8") as handle:
            json.load(handle)
    except (OSError, ValueError) as exc:
        raise ValidationFailed.at("/options/config", f"cannot read the mem0 config {path}: {exc}") from None


def _tenant(session: Session, tenant_name: str):
    tenant = tenant_repo.find(session, ref=tenant_name)
    if tenant is None:
        raise NotFound(f"no tenant named {tenant_name}")
    return tenant


def _named(session: Session, tenant_name: str, name: str):
    """(tenant, its backend called `name`); NotFound for either."""
    tenant = _tenant(session, tenant_name)
    backend = repo.by_name(session, tenant_id=tenant.id, name=name)
    if backend is None:
        raise NotFound(f"tenant {tenant_name} has no backend named {name}")
    return tenant, backend


def remove_backend(ctx: AppContext, *, tenant_name: str, name: str, actor: dict[str, Any]) -> None:
    """Stop routing to a backend (its outbox and records go; what it stores stays there)."""
    with ctx.db.sessions.begin() as session:
        tenant, backend = _named(session, tenant_name, name)
        repo.remove(session, backend)
        tenant_repo.touch(session, tenant_id=tenant.id)
        ctx.audit.append(session, tenant_id=tenant.id, event_type="backend.removed", actor=actor,
                         subject={"type": "backend", "id": backend.id}, data={"name": name, "kind": backend.kind})
    _forget_store(backend.id)


def set_enabled(ctx: AppContext, *, tenant_name: str, name: str, enabled: bool, actor: dict[str, Any]) -> None:
    """Pause (or resume) a backend: while disabled it is owed nothing and recall leaves it out.
    Memories that changed meanwhile are owed to it on resume, so it catches up."""
    with ctx.db.sessions.begin() as session:
        tenant, backend = _named(session, tenant_name, name)
        if backend.enabled == enabled:
            return
        backend.enabled = enabled
        owed = repo.owe_existing(session, backend_id=backend.id, tenant_id=tenant.id,
                                 agents_like=backend.agents_like) if enabled else 0
        tenant_repo.touch(session, tenant_id=tenant.id)
        ctx.audit.append(session, tenant_id=tenant.id, event_type="backend.enabled" if enabled else "backend.disabled",
                         actor=actor, subject={"type": "backend", "id": backend.id},
                         data={"name": name, "owed_existing": owed})


def retry_failed(ctx: AppContext, *, tenant_name: str, name: str, actor: dict[str, Any]) -> int:
    """Owe again every delivery to the backend that gave up; returns how many."""
    with ctx.db.sessions.begin() as session:
        tenant, backend = _named(session, tenant_name, name)
        count = repo.reset_failed(session, tenant_id=tenant.id, backend_id=backend.id, at=utcnow())
        ctx.audit.append(session, tenant_id=tenant.id, event_type="backend.retry_requested", actor=actor,
                         subject={"type": "backend", "id": backend.id}, data={"name": name, "deliveries": count})
    return count


def backend_json(backend: MemoryBackend) -> dict[str, Any]:
    """A backend as admins see it: never its secret."""
    return {"id": backend.id, "name": backend.name, "kind": backend.kind, "agents": backend.agents,
            "options": backend.options, "has_secret": backend.secret_enc is not None, "weight": backend.weight,
            "timeout_ms": backend.timeout_ms, "enabled": backend.enabled, "created_at": format_ts(backend.created_at)}


def admin_view(ctx: AppContext, *, tenant_id: str) -> list[dict[str, Any]]:
    """Each backend as the admin page shows it: configuration (no secret) and its delivery backlog."""
    backlog = {row["backend"]: row for row in status(ctx, tenant_id=tenant_id)}
    return [{**b, **{k: v for k, v in backlog.get(b["name"], {}).items() if k != "backend"}}
            for b in list_backends(ctx, tenant_id=tenant_id)]


def list_backends(ctx: AppContext, *, tenant_id: str) -> list[dict[str, Any]]:
    with ctx.db.sessions() as session:
        return [backend_json(b) for b in repo.for_tenant(session, tenant_id=tenant_id)]


def status(ctx: AppContext, *, tenant_id: str) -> list[dict[str, Any]]:
    """Per backend: pending and failed deliveries and the oldest pending one's age in seconds."""
    now = utcnow()
    with ctx.db.sessions() as session:
        return [{"backend": name, "pending": pending, "failed": failed,
                 "oldest_pending_seconds": round((now - oldest).total_seconds(), 1) if oldest else None}
                for name, pending, failed, oldest in repo.backlog(session, tenant_id=tenant_id)]


def delivery_lags(ctx: AppContext, *, tenant_id: str, since: datetime) -> list[float]:
    """Seconds from owed to delivered of each delivered row of the tenant owed since `since`."""
    with ctx.db.sessions() as session:
        return repo.delivery_lags(session, tenant_id=tenant_id, since=since)


def deliveries_of(ctx: AppContext, principal: Principal, memory_id: str) -> dict[str, Any]:
    """Where a memory has been delivered: the newest delivery to each backend and the store's id."""
    with ctx.db.sessions() as session:
        memory = memory_repo.get_in_tenant(session, tenant_id=principal.tenant_id, memory_id=memory_id)
        if memory is None or not principal.may_act_for(memory.agent_id):
            raise NotFound("memory not found")
        rows = repo.deliveries_of(session, tenant_id=principal.tenant_id, memory_id=memory_id)
    return {"memory_id": memory_id, "deliveries": [
        {"backend": r.name, "status": r.status, "attempts": r.attempt, "action": r.action,
         "error": shown_reason(r.error),
         "owed_at": format_ts(r.created_at), "delivered_at": format_ts(r.delivered_at), "backend_ref": r.backend_ref}
        for r in rows]}


# --- stores ---------------------------------------------------------------------------------------

_stores: dict[str, tuple[Store, threading.Lock]] = {}
_stores_lock = threading.Lock()


def _store(ctx: AppContext, backend: MemoryBackend) -> tuple[Store, threading.Lock]:
    """The process's adapter for a backend (built once; calls to one adapter are serialised by its lock,
    since the libraries behind them are not all thread-safe)."""
    with _stores_lock:
        cached = _stores.get(backend.id)
        if cached is None:
            cached = (_build(ctx, backend), threading.Lock())
            _stores[backend.id] = cached
        return cached


def _build(ctx: AppContext, backend: MemoryBackend) -> Store:
    """The adapter for a backend; StoreError (naming the factory or config) when it cannot be built."""
    try:
        return _build_store(ctx, backend)
    except StoreError:
        raise
    except Exception as exc:  # an operator's factory or config: whatever it raises is the backend's failure
        options = backend.options or {}
        source = options.get("factory") or options.get("config") or backend.kind
        raise StoreError(f"building {source} failed: {type(exc).__name__}: {exc}") from exc


def _build_store(ctx: AppContext, backend: MemoryBackend) -> Store:
    options = backend.options or {}
    if backend.kind == "memwarden":
        key = unseal(ctx, _SEALED, backend.id, backend.secret_enc) if backend.secret_enc else ""
        return MemwardenStore(options["url"], key, timeout=backend.timeout_ms / 1000,
                              rule=OutboundRule.for_backends(ctx.settings))
    if backend.kind == "mem0":
        return Mem0Store.from_options(options)
    from app.services.router.backend_stores import load_factory

    return MemorywireStore(load_factory(options["factory"])(**options.get("factory_args", {})))


def _forget_store(backend_id: str) -> None:
    with _stores_lock:
        cached = _stores.pop(backend_id, None)
    if cached is not None:
        cached[0].close()


# --- delivery -------------------------------------------------------------------------------------

def deliver_due(ctx: AppContext, max_batches: int = 20) -> int:
    """Deliver what is owed and due (a background job round), a batch at a time until nothing is
    due or `max_batches` ran; returns how many deliveries were worked."""
    worked = 0
    for _ in range(max_batches):
        now = utcnow()
        with ctx.db.sessions.begin() as session:
            claimed = repo.claim_due(session, now=now, lease_until=now + timedelta(seconds=ctx.settings.backend_lease_seconds),
                                     limit=BATCH)
            backends = repo.by_ids(session, backend_ids={row.backend_id for row in claimed}) if claimed else {}
        _deliver_batch(ctx, backends, claimed)
        worked += len(claimed)
        if len(claimed) < BATCH:
            break
    return worked


def _deliver_batch(ctx: AppContext, backends: dict[str, MemoryBackend], claimed: list) -> None:
    """Each backend's rows in order, the backends side by side (one slow store does not hold up
    the others; one store's calls are serialised anyway by its adapter's lock)."""
    by_backend: dict[str, list] = {}
    for row in claimed:
        if row.backend_id in backends:
            by_backend.setdefault(row.backend_id, []).append(row)
    if len(by_backend) <= 1:
        for backend_id, rows in by_backend.items():
            for row in rows:
                _deliver_one(ctx, backends[backend_id], row)
        return
    with concurrent.futures.ThreadPoolExecutor(max_workers=len(by_backend), thread_name_prefix="deliver") as pool:
        futures = [pool.submit(lambda b, rows: [_deliver_one(ctx, b, r) for r in rows], backends[backend_id], rows)
                   for backend_id, rows in by_backend.items()]
        for future in futures:
            future.result()


def _deliver_one(ctx: AppContext, backend: MemoryBackend, row) -> None:
    with ctx.db.sessions() as session:
        memory = repo.memory_state(session, tenant_id=row.tenant_id, memory_id=row.memory_id)
        record = repo.record_of(session, tenant_id=row.tenant_id, backend_id=backend.id, memory_id=row.memory_id)
        record = (record.backend_ref, record.content_digest) if record else None
        live = memory is not None and memory.status == "live" and memory.content is not None
        snap = Snapshot.of(memory) if live else None
        agent, user = (memory.agent_id, memory.user_id) if memory is not None else ("", None)
    try:
        store, lock = _store(ctx, backend)
        with lock:
            if snap is not None and record is not None and record[1] == snap.digest:
                action, ref = "unchanged", record[0]
            elif snap is not None:
                # Only a delivery leased before (its holder may have died after writing) looks for
                # an earlier write; a first claim goes straight to the write.
                action, ref = "put", store.put(snap, record[0] if record else None, maybe_written=row.claims > 1,
                                               write_key=f"{backend.id}-{row.id}")
            elif record is not None:
                store.delete(record[0], agent, user)
                erasure.confirm_gone(store, record[0], row.memory_id, agent, user)  # read back: proven gone
                action, ref = "delete", None
            else:
                action, ref = "absent", None
    except Exception as exc:  # a store's failure is the delivery's, never the job's
        _failed(ctx, backend, row, exc)
        return
    with ctx.db.sessions.begin() as session:
        if ref is not None and snap is not None:
            repo.save_record(session, backend_id=backend.id, memory_id=row.memory_id, tenant_id=row.tenant_id,
                             backend_ref=ref, content_digest=snap.digest, at=utcnow())
        elif action == "delete":
            repo.drop_record(session, tenant_id=row.tenant_id, backend_id=backend.id, memory_id=row.memory_id)
            erasure.record_receipt(ctx, session, tenant_id=row.tenant_id, backend=backend, memory_id=row.memory_id,
                                   confirmed_at=utcnow())
        repo.record_attempt(session, tenant_id=row.tenant_id, delivery_id=row.id, values={
            "status": "delivered", "attempt": row.attempt + 1, "action": action, "error": None,
            "delivered_at": utcnow()})
        ctx.audit.append(session, tenant_id=row.tenant_id, event_type="backend.delivered", actor=SYSTEM_ACTOR,
                         subject={"type": "memory_delivery", "id": row.memory_id},
                         data={"backend_id": backend.id, "action": action, "attempt": row.attempt + 1,
                               "store_digest": snap.digest if snap is not None else None})


def _failed(ctx: AppContext, backend: MemoryBackend, row, exc: Exception) -> None:
    attempt = row.attempt + 1
    # Admins and the API see the fixed word; what the store said (an internal service's error
    # page, for all Memwarden knows) stays in the server's log.
    error = _reason(exc)
    give_up = attempt >= ctx.settings.backend_max_attempts
    delay = min(ctx.settings.backend_retry_max_seconds, ctx.settings.backend_retry_base_seconds * 4 ** (attempt - 1))
    log.log(logging.WARNING if give_up else logging.INFO, "delivery of %s to backend %s failed (attempt %d%s): %s: %s",
            row.memory_id, backend.name, attempt, ", giving up" if give_up else "", type(exc).__name__,
            str(exc)[:500])
    with ctx.db.sessions.begin() as session:
        repo.record_attempt(session, tenant_id=row.tenant_id, delivery_id=row.id, values={
            "status": "failed" if give_up else "pending", "attempt": attempt, "error": error,
            "next_attempt_at": utcnow() + timedelta(seconds=delay)})
        ctx.audit.append(session, tenant_id=row.tenant_id,
                         event_type="backend.gave_up" if give_up else "backend.retry", actor=SYSTEM_ACTOR,
                         subject={"type": "memory_delivery", "id": row.memory_id},
                         data={"backend_id": backend.id, "attempt": attempt,
                               "error_kind": type(exc).__name__})
        if isinstance(exc, erasure.StillHeld):  # a delete the store did not do: an alert, never a receipt
            erasure.raise_alert(ctx, session, tenant_id=row.tenant_id, backend=backend, memory_id=row.memory_id,
                                exc=exc, attempt=attempt, gave_up=give_up, actor=SYSTEM_ACTOR)


# --- recall ---------------------------------------------------------------------------------------

def routed_backends(ctx: AppContext, principal: Principal, agent_id: str) -> list[MemoryBackend]:
    """The tenant's enabled backends that take this agent (none: recall is the built-in store's
    alone). From the cached tenant rules: adding or removing a backend touches the tenant row."""
    return [b for b in rules_for(ctx, principal).backends if routing_rules.agent_matches(agent_id, b.agents)]


def fused_recall(ctx: AppContext, principal: Principal, body: dict[str, Any], local: dict[str, Any],
                 backends: list[MemoryBackend]) -> dict[str, Any]:
    """`local` (the built-in store's recall answer) fused with every backend's governed hits."""
    started = time.perf_counter()
    k = body.get("k", 5)
    method = body.get("fusion", "rrf")
    agent_id, user_id = body["agent_id"], body.get("user_id")
    # A backend hit passes the recall's own filters, as the built-in store's hits did.
    filters = {"types": body.get("types"), "tags": body.get("tags"), "metadata": body.get("filter"),
               "fresher_than_days": body.get("fresher_than_days")}
    results, failed = _search_all(ctx, backends, agent_id, user_id, body["query"], max(2 * k, 20))
    local_hits = {h["id"]: h for h in local["hits"]}
    rankings = []
    with ctx.db.sessions() as session:
        for backend, hits in results:
            records = repo.governed_refs(session, tenant_id=principal.tenant_id, backend_id=backend.id,
                                          refs=[h.ref for h in hits])
            memories = repo.visible_by_ids(session, scope=Scope(principal.tenant_id, agent_id, user_id),
                                           filters=filters, ids=[r.memory_id for r in records.values()])
            governed = {}
            for hit in hits:
                record = records.get(hit.ref)
                memory = memories.get(record.memory_id) if record else None
                # Delivered by Memwarden, for a memory live now, with the content it has now.
                if memory is not None and Snapshot.of(memory).digest == record.content_digest:
                    governed[hit.ref] = memory.id
                    local_hits.setdefault(memory.id, {**entry_json(memory), "similarity": round(hit.similarity, 6)})
            rankings.append(routing_rules.StoreRanking(backend.name, [(h.ref, h.similarity) for h in hits], governed,
                                                       float(backend.weight)))
    local_ranking = [(h["id"], h.get("similarity", h["score"])) for h in local["hits"]]
    fused = routing_rules.fuse_governed(method, BUILT_IN, local_ranking, rankings, k)
    hits = [{**local_hits[i], "score": round(fused.scores[i], 6), "stores": fused.found_in[i]} for i in fused.ids]
    stores = [BUILT_IN] + [b.name for b in backends]
    return {"hits": hits, "fusion": method, "latency_ms": round(local["latency_ms"] + (time.perf_counter() - started)
                                                                 * 1000, 3),
            "stores_queried": stores, "stores_failed": failed, "dropped_ungoverned": fused.dropped}


def _search_all(ctx: AppContext, backends: list[MemoryBackend], agent_id: str, user_id: str | None, query: str,
                k: int) -> tuple[list, list[dict[str, str]]]:
    """Each backend's hits, searched in parallel, each within its own timeout."""
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=len(backends), thread_name_prefix="recall-backend")
    futures = [(b, pool.submit(_search_one, ctx, b, agent_id, user_id, query, k)) for b in backends]
    deadline = time.monotonic()
    results, failed = [], []
    for backend, future in futures:
        try:
            remaining = max(0.0, deadline + backend.timeout_ms / 1000 - time.monotonic())
            results.append((backend, future.result(timeout=remaining)))
        except concurrent.futures.TimeoutError:
            failed.append({"store": backend.name, "error": TIMEOUT})
        except Exception as exc:
            log.info("recall from backend %s failed: %s: %s", backend.name, type(exc).__name__, str(exc)[:500])
            failed.append({"store": backend.name, "error": _reason(exc)})
    pool.shutdown(wait=False, cancel_futures=True)  # a slow store finishes in the background, unread
    return results, failed


def _reason(exc: Exception) -> str:
    """The fixed word a tenant is shown for a store's failure."""
    return exc.reason if isinstance(exc, StoreError) else STORE_ERROR


def _search_one(ctx: AppContext, backend: MemoryBackend, agent_id: str, user_id: str | None, query: str, k: int):
    store, lock = _store(ctx, backend)
    with lock:
        return store.search(agent_id, user_id, query, k)
