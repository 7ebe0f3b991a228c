"""What one session transaction accumulates until it commits, as typed objects.

A service fills a `TransactionWork` during its transaction (audit records and events per chain,
chain locks taken, refs minted, a webhook look-up cache, follow-ups for after the commit); the
commit path drains it: `app.services.audit.audit_commit`'s `before_commit` hook writes each chain's records
under the chain's lock, and the follow-ups run once the work is durable.

Durable means: at the session's own COMMIT when the session is bound to the engine; when it is
bound to a `UnitOfWork`'s connection (a request with an `Idempotency-Key`), its "commit" only
releases a savepoint, so the follow-ups are handed to the unit and run after the unit's real
COMMIT. A rollback, of the session or of the unit, drops them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

from sqlalchemy import event
from sqlalchemy.engine import Connection, Row
from sqlalchemy.orm import Session, SessionTransaction

from app.db.database import run_after_commit, unit_of_work_on

_KEY = "memwarden.transaction_work"  # Session.info: the TransactionWork of the current transaction


class AuditWriter(Protocol):
    """Hashes and inserts a chain's pending audit records at commit (`app.services.audit.audit.AuditLog`)."""

    def write_at_commit(self, session: Session, chain_id: str, records: list[tuple], head: Row) -> None: ...


@dataclass(slots=True, eq=False)
class ChainWork:
    """What the transaction writes to one chain (a tenant's audit chain and event log) at commit,
    under the chain's lock.

    `audit`: records for `writer`; `events`: (type, payload or payload-maker) for the event log;
    `after_lock`: writes run with the lock held, after the audit records (the event log's rows).
    `event_id` and `has_webhooks` are read with the lock (the event log's head; whether the tenant
    has webhooks) and are set only when `events` is not empty. `despite_alarm`: write even though
    the chain has an open alarm (only the alarm's own `audit.chain_broken` event does)."""

    tenant_id: str | None
    writer: AuditWriter | None = None
    audit: list[tuple] = field(default_factory=list)
    events: list[tuple[str, Any]] = field(default_factory=list)
    after_lock: list[Callable[[Session, ChainWork], None]] = field(default_factory=list)
    event_id: int = 0
    has_webhooks: bool = False
    despite_alarm: bool = False


@dataclass(slots=True, eq=False)
class TransactionWork:
    """Everything one session transaction (`tx`, kept referenced so identity is exact) holds.

    `chains`: chain id -> its pending writes; `locks`: chains whose advisory lock is held;
    `minted_refs`: (tenant, agent, user) scopes whose ref this transaction inserted;
    `webhooks`: tenant -> its active webhooks, read once per transaction;
    `after_commit`: follow-ups once the transaction is durable (see the module docstring)."""

    tx: SessionTransaction | None
    chains: dict[str, ChainWork] = field(default_factory=dict)
    locks: set[str] = field(default_factory=set)
    minted_refs: set[tuple[str, str, str | None]] = field(default_factory=set)
    webhooks: dict[str, list[Row]] = field(default_factory=dict)
    after_commit: list[Callable[[], None]] = field(default_factory=list)

    def chain(self, chain_id: str, tenant_id: str | None) -> ChainWork:
        """The pending writes to `chain_id` (the chain of `tenant_id`), created on first use."""
        work = self.chains.get(chain_id)
        if work is None:
            work = self.chains[chain_id] = ChainWork(tenant_id)
        return work


def work_of(session: Session) -> TransactionWork:
    """The session's current transaction's work; a new transaction starts with an empty one."""
    tx = session.get_transaction()
    work = session.info.get(_KEY)
    if work is None or work.tx is not tx:
        work = session.info[_KEY] = TransactionWork(tx)
    return work


def pending_work(session: Session) -> TransactionWork | None:
    """The work of the session's current transaction if it has any, without creating it."""
    work = session.info.get(_KEY)
    return work if work is not None and work.tx is session.get_transaction() else None


def commits_at_own_commit(session: Session) -> bool:
    """Whether the session's commit is the database's: false when it joins a transaction opened
    on a connection elsewhere (a request's unit of work, the test harness), whose commit there
    only releases a savepoint and may still be rolled back."""
    return not isinstance(session.bind, Connection)


def commits_durably(session: Session) -> bool:
    """Whether what the session commits becomes durable: at its own commit, or at the commit of
    the durable unit of work it joined (`UnitOfWork.durable`; not the test harness's)."""
    if commits_at_own_commit(session):
        return True
    unit = unit_of_work_on(session.bind)
    return unit is not None and unit.durable


def after_commit(session: Session, action: Callable[[], None]) -> None:
    """Run `action` once the session's current transaction is durable (never if it rolls back).
    Only for sessions that `commits_durably`: elsewhere it would be dropped."""
    work_of(session).after_commit.append(action)


@event.listens_for(Session, "after_commit")
def _run_after_commit(session: Session) -> None:
    if session.in_nested_transaction():
        return  # a savepoint of the session's own: its work commits with the session's transaction
    work = pending_work(session)
    if work is None or not work.after_commit:
        return
    actions, work.after_commit = work.after_commit, []
    if commits_at_own_commit(session):
        run_after_commit(actions)
        return
    unit = unit_of_work_on(session.bind)  # joined: the database has not committed yet
    if unit is not None:
        for action in actions:
            unit.after_commit(action)


@event.listens_for(Session, "after_rollback")
def _drop_after_commit(session: Session) -> None:
    work = pending_work(session)
    if work is not None:
        work.after_commit.clear()
