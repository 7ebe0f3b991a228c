"""What an audit append does at commit: the `before_commit` hook that locks each chain the
transaction touched and writes what it deferred to it, and the pipelining of deferred INSERTs with
the COMMIT.

Chains are locked in a fixed order (no deadlocks between chains), each in one round trip that
also reads the heads and, for a chain whose alarm is open, refuses the write (`chain_closed`). INSERTs
nothing in the transaction reads back (audit entries, and those `insert_with_commit` queues) go
out in one psycopg pipeline with the COMMIT: one round trip fewer while the chain's lock is held.
"""

from __future__ import annotations

from typing import Any

import psycopg
from sqlalchemy import event
from sqlalchemy.engine import Connection, Engine, Row
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session

from app.db.transaction_work import ChainWork, TransactionWork, commits_at_own_commit, pending_work, work_of
from app.errors import AuditChainBroken
from app.observability import tracing
from app.repos.audit import audit_log as audit_log_repo

# The statements of the append path, built once and run on the session's connection: building and
# running a fresh ORM statement per append cost more client CPU than the hashing (bench audit).
_AT_COMMIT = "memwarden.rows_at_commit"  # Connection.info key: (transaction, [(sql, rows), ...])


@event.listens_for(Session, "before_commit")
def _write_pending(session: Session) -> None:
    """At commit, lock each touched chain (in a fixed order: no deadlocks between chains) and
    write what the transaction deferred to it. One round trip takes the lock and reads the audit
    head (with the rows its check needs) and, for a transaction that writes events, the event-log
    head and whether the tenant has webhooks, and sends the wake-up NOTIFY."""
    work = pending_work(session)
    if work is None or not work.chains:
        return
    chains, work.chains = work.chains, {}
    for chain_id in sorted(chains):
        pending = chains[chain_id]
        # The span covers the wait for the chain's lock too: under contention that is the cost.
        with tracing.span("memwarden.audit.append", **{"memwarden.audit.chain": "system" if pending.tenant_id is None
                                                       else "tenant", "memwarden.audit.entries": len(pending.audit)}):
            _write_chain(session, work, chain_id, pending)


def _write_chain(session: Session, work: TransactionWork, chain_id: str, pending: ChainWork) -> None:
    """Lock one chain, check it is open, and write its pending audit entries (and event-log work)."""
    has_events = bool(pending.events)
    heads = audit_log_repo.lock_and_read_heads(session, chain_id=chain_id, tenant_id=pending.tenant_id,
                                               notify=has_events)
    work.locks.add(chain_id)
    if heads.alarm_id is not None and not pending.despite_alarm:
        raise chain_closed(chain_id, heads)
    if pending.audit:
        pending.writer.write_at_commit(session, chain_id, pending.audit, head=heads)
    if has_events:  # the event-log head is only read for them (migration 0016)
        pending.event_id, pending.has_webhooks = heads.event_id, heads.has_webhooks
    for write in pending.after_lock:
        write(session, pending)


def chain_closed(chain_id: str, heads: Row) -> AuditChainBroken:
    """The refusal of a write to a chain whose alarm is open (nothing of the write is kept)."""
    return AuditChainBroken(
        f"audit chain {chain_id} is closed to writes: it did not verify (first bad seq {heads.alarm_seq}: "
        f"{heads.alarm_reason}); an operator must repair it and clear the alarm",
        details={"chain_id": chain_id, "first_bad_seq": heads.alarm_seq, "reason": heads.alarm_reason,
                 "detail": "the chain's alarm is open: writes are refused until it is cleared"})


def _insert_at_commit(conn: Connection, sql: str, rows: list[dict[str, Any]]) -> None:
    """Have `_insert_with_commit` send this INSERT (psycopg text) of `rows` with the transaction's COMMIT."""
    tx = conn.get_transaction()
    deferred = conn.info.get(_AT_COMMIT)
    if deferred is None or deferred[0] is not tx:
        deferred = conn.info[_AT_COMMIT] = (tx, [])
    deferred[1].append((sql, rows))


def sends_with_commit(session: Session) -> bool:
    """Whether INSERTs nothing else in the transaction reads back may wait for its COMMIT and go
    out in one pipeline with it (`insert_with_commit`): only when the session's commit is the
    database's, outside a savepoint."""
    return commits_at_own_commit(session) and not session.in_nested_transaction()


def insert_with_commit(session: Session, sql: str, rows: list[dict[str, Any]]) -> None:
    """Send an INSERT (psycopg text, `rows` as the driver takes them) in one pipeline with the
    transaction's COMMIT instead of a round trip of its own; only where `sends_with_commit`. An
    error it meets surfaces at commit, as the COMMIT's own would (the transaction rolls back)."""
    _insert_at_commit(session.connection(), sql, rows)


@event.listens_for(Engine, "commit")
def _insert_with_commit(conn: Connection) -> None:
    """Send the transaction's deferred INSERTs (audit entries, and those `insert_with_commit`
    queued) and its COMMIT in one psycopg pipeline.

    Runs as SQLAlchemy is about to commit the connection, after the last flush: the INSERTs are
    still the transaction's own statements, and the COMMIT's reply (after its WAL flush, as
    `synchronous_commit` requires) comes in the same round trip, so the chain's lock is held for
    one round trip fewer. If an INSERT fails the COMMIT is skipped, the transaction stays failed
    and the error is raised as SQLAlchemy's own would be. The COMMIT SQLAlchemy sends next finds
    the transaction ended and sends nothing."""
    deferred = conn.info.pop(_AT_COMMIT, None)
    if deferred is None or deferred[0] is not conn.get_transaction():
        return
    try:
        commit_pipelined(conn.connection.driver_connection, deferred[1])
    except psycopg.Error as exc:
        raise DBAPIError.instance(None, None, exc, psycopg.Error, hide_parameters=True,
                                  dialect=conn.dialect) from exc


def commit_pipelined(driver: psycopg.Connection, statements: list[tuple[str, list[dict[str, Any]]]]) -> None:
    """Send INSERTs (psycopg text, each with its parameter rows) and the COMMIT in one pipeline:
    one round trip, its reply after the WAL flush. An INSERT that fails skips the COMMIT (the
    transaction stays failed) and raises psycopg's error."""
    with driver.cursor() as cursor, driver.pipeline():
        for sql, rows in statements:
            cursor.executemany(sql, rows)
        cursor.execute("COMMIT", prepare=False)


@event.listens_for(Engine, "rollback")
def _drop_insert_with_commit(conn: Connection) -> None:
    # A connection the database dropped (invalidated) has no info left to clear, and asking for it
    # would raise over the error that caused the rollback.
    if conn.invalidated or conn.closed:
        return
    conn.info.pop(_AT_COMMIT, None)


def lock_chain(session: Session, chain_id: str) -> None:
    """Take the chain's transaction-scoped advisory lock (once per transaction)."""
    locks = work_of(session).locks
    if chain_id not in locks:
        audit_log_repo.lock_chain(session, chain_id)
        locks.add(chain_id)
