"""Opaque memory refs and runs (OpenWOP RFC 0004; contract §7).

A ref (`mref_` + 32 url-safe chars, random) names one (tenant, agent, user) scope; the same scope
always gets the same ref (a lookup table, minted on first use). A ref of another tenant, or a
malformed or forged one, resolves to nothing — callers answer 404 and leak nothing.

A run records its start instant; reads made "as of the run" see that snapshot.
"""

from __future__ import annotations

import re
import secrets
import threading
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from app.core.access import Principal
from app.core.ids import has_prefix, new_id
from app.core.timefmt import format_ts, utcnow
from app.db.models import Run
from app.db.transaction_work import after_commit, commits_durably, work_of
from app.errors import Forbidden, NotFound
from app.repos.memory import refs as repo
from app.services.runtime.context import AppContext

REF_PATTERN = re.compile(r"^mref_[A-Za-z0-9_-]{32}$")


@dataclass(frozen=True)
class RefScope:
    """What a ref names. `user_id` None is the agent's whole memory (as `/v1/memories` without user_id)."""

    ref: str
    tenant_id: str
    agent_id: str
    user_id: str | None


def _find(session: Session, tenant_id: str, agent_id: str, user_id: str | None) -> str | None:
    return repo.find(session, tenant_id=tenant_id, agent_id=agent_id, user_id=user_id)


# Refs never change once committed (nor are deleted), so a process may remember the ones it has
# seen — up to KNOWN_MAX scopes, so that a caller minting scope after scope cannot grow the process
# without bound; past it the oldest is forgotten and read again from the database when next needed.
KNOWN_MAX = 100_000
_KNOWN: dict[tuple[str, str, str | None], str] = {}


_KNOWN_WRITES = threading.Lock()  # request threads remember concurrently; reads need no lock


def _remember(key: tuple[str, str, str | None], ref: str) -> None:
    with _KNOWN_WRITES:
        if key not in _KNOWN and len(_KNOWN) >= KNOWN_MAX:
            del _KNOWN[next(iter(_KNOWN))]  # dicts keep insertion order: the oldest goes first
        _KNOWN[key] = ref


def ref_for(session: Session, tenant_id: str, agent_id: str, user_id: str | None) -> str:
    """The scope's ref, minted on first use in `session`'s transaction (stable from then on)."""
    key = (tenant_id, agent_id, user_id)
    if key in _KNOWN:
        return _KNOWN[key]
    minted = work_of(session).minted_refs
    found = _find(session, tenant_id, agent_id, user_id)
    if found:
        if key not in minted:  # committed by someone: safe to remember beyond this transaction
            _remember(key, found)
        return found
    # A concurrent minter of the same scope makes this a no-op (unique index); read theirs back.
    repo.insert_unless_present(session, ref="mref_" + secrets.token_urlsafe(24), tenant_id=tenant_id,
                               agent_id=agent_id, user_id=user_id)
    minted.add(key)
    ref = _find(session, tenant_id, agent_id, user_id)
    if commits_durably(session):  # known once committed (a rollback drops the follow-up)
        after_commit(session, lambda: _remember(key, ref))
    return ref


def known_ref(tenant_id: str, agent_id: str, user_id: str | None) -> str | None:
    """The scope's ref if this process has seen it committed, else None (no database read)."""
    return _KNOWN.get((tenant_id, agent_id, user_id))


def get_ref(ctx: AppContext, principal: Principal, agent_id: str, user_id: str | None) -> dict[str, str]:
    """`GET /v1/refs`: the ref of a scope the key may act for."""
    if not principal.may_act_for(agent_id):
        raise Forbidden("this key may not act for that agent",
                        details=[{"path": "/agent_id", "message": "agent not in the key's allow-list"}])
    with ctx.db.sessions.begin() as session:
        return {"memoryRef": ref_for(session, principal.tenant_id, agent_id, user_id)}


def resolve(ctx: AppContext, principal: Principal, ref: str) -> RefScope:
    """The scope a ref names, if it is this tenant's and the key may act for its agent; else 404."""
    if not REF_PATTERN.match(ref):
        raise NotFound("memory ref not found")
    with ctx.db.sessions() as session:
        row = repo.get(session, tenant_id=principal.tenant_id, ref=ref)
    if row is None or not principal.may_act_for(row.agent_id):
        raise NotFound("memory ref not found")
    return RefScope(row.ref, row.tenant_id, row.agent_id, row.user_id)


# --- runs ----------------------------------------------------------------------------------------

def start_run(ctx: AppContext, principal: Principal, agent_id: str | None) -> dict[str, Any]:
    """`POST /v1/runs`: record a run; its start instant is the snapshot its reads see."""
    if agent_id is not None and not principal.may_act_for(agent_id):
        raise Forbidden("this key may not act for that agent",
                        details=[{"path": "/agent_id", "message": "agent not in the key's allow-list"}])
    run = Run(id=new_id("run"), tenant_id=principal.tenant_id, agent_id=agent_id, started_at=utcnow(),
              created_by=principal.key_id)
    with ctx.db.sessions.begin() as session:
        repo.insert_run(session, run)
        ctx.audit.append(session, tenant_id=principal.tenant_id, event_type="run.started", actor=principal.actor,
                         subject={"type": "run", "id": run.id}, data={"agent_id": agent_id})
    return {"runId": run.id, "snapshot": format_ts(run.started_at)}


def run_snapshot(ctx: AppContext, principal: Principal, run_id: str) -> datetime:
    """The start instant of one of this tenant's runs; 404 for any other id."""
    if not has_prefix(run_id, "run"):
        raise NotFound("run not found")
    with ctx.db.sessions() as session:
        run = repo.get_run(session, tenant_id=principal.tenant_id, run_id=run_id)
    if run is None or (run.agent_id is not None and not principal.may_act_for(run.agent_id)):
        raise NotFound("run not found")
    return run.started_at
