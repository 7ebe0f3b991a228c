"""The append's commit path: the audit INSERT sent in one pipeline with the COMMIT, and the
lock function that returns the head rows the head check verifies (migration 0014).

Each test runs on its own engine with ONE connection (StaticPool), so what a failed commit
leaves behind on the connection is what the next transaction gets.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from psycopg import pq
from sqlalchemy import create_engine, event, func, select, text
from sqlalchemy.engine import Engine
from sqlalchemy.exc import DBAPIError, IntegrityError
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.pool import StaticPool

from app.core import auditchain as chain
from app.core.timefmt import format_ts, utcnow
from app.db import prepared
from app.db.models import AuditEntry, Tenant
from app.services.audit.audit import actor_label, chain_for
from app.services.tenancy.tenants import create_tenant
from tests.harness import unique

ACTOR = {"kind": "test", "id": "commit-path"}


@pytest.fixture
def one_connection(settings) -> Iterator[Engine]:
    engine = create_engine(settings.database_url, poolclass=StaticPool)
    yield engine
    engine.dispose()


@pytest.fixture
def tenant_id(committed_ctx) -> str:
    return create_tenant(committed_ctx, name=unique("commit-path"), actor=ACTOR).id


def _append(ctx, session: Session, tenant_id: str, subject: str) -> None:
    ctx.audit.append(session, tenant_id=tenant_id, event_type="test.commit_path", actor=ACTOR,
                     subject={"type": "test", "id": subject}, data={})


def _subjects(ctx, tenant_id: str) -> list[str]:
    with ctx.db.sessions() as session:
        return list(session.scalars(select(AuditEntry.subject_id).where(
            AuditEntry.chain_id == chain_for(tenant_id), AuditEntry.event_type == "test.commit_path")
            .order_by(AuditEntry.seq)))


def _assert_intact(ctx, tenant_id: str) -> None:
    chain_id = chain_for(tenant_id)
    with ctx.db.sessions() as session:
        n, top = session.execute(select(func.count(), func.max(AuditEntry.seq))
                                 .where(AuditEntry.chain_id == chain_id)).one()
    report = ctx.audit.verify_database(ctx.db.sessions, chain_id)
    assert report.ok and n == top, report


def test_the_audit_insert_goes_with_the_commit_and_is_durable_on_return(committed_ctx, one_connection, tenant_id):
    statements: list[str] = []
    event.listen(one_connection, "before_cursor_execute", lambda c, cur, stmt, *a: statements.append(stmt))
    sessions = sessionmaker(one_connection, expire_on_commit=False)
    observe = lambda stmt, conn, params: statements.append(stmt)  # noqa: E731 — pre-built statements (the lock)
    prepared.observers.append(observe)
    try:
        with sessions.begin() as session:
            _append(committed_ctx, session, tenant_id, "first")
    finally:
        prepared.observers.remove(observe)
    # Only the lock call ran on its own: the INSERT went out with the COMMIT.
    assert [s.split("(")[0] for s in statements if "audit_entries" in s or "memwarden_lock_chain" in s] == [
        "SELECT * FROM memwarden_lock_chain"]
    assert _subjects(committed_ctx, tenant_id) == ["first"]  # committed: another connection sees it
    driver = one_connection.raw_connection().driver_connection
    assert driver.pgconn.pipeline_status == pq.PipelineStatus.OFF
    assert driver.info.transaction_status == pq.TransactionStatus.IDLE
    _assert_intact(committed_ctx, tenant_id)


def test_a_row_taken_before_the_commit_fails_the_whole_transaction_and_the_connection_recovers(
        committed_ctx, one_connection, tenant_id):
    """A row INSERTed at the entry's seq between the head read and the COMMIT (by a writer that
    skipped the lock) makes the pipelined INSERT fail: the COMMIT is not run, the transaction's
    other write is gone, and the same connection appends normally afterwards."""
    chain_id = chain_for(tenant_id)

    def race(session: Session) -> None:  # runs after the audit hook has hashed and deferred the entry
        with committed_ctx.db.engine.begin() as conn:
            head = conn.execute(select(AuditEntry.seq, AuditEntry.chain_hash).where(
                AuditEntry.chain_id == chain_id).order_by(AuditEntry.seq.desc()).limit(1)).one()
            now = utcnow()
            entry = chain.build_entry(origin=committed_ctx.audit.checkpoint_origin(chain_id), chain_id=chain_id,
                                      seq=head.seq + 1, ts=format_ts(now), event_type="test.commit_path",
                                      actor=ACTOR, subject={"type": "test", "id": "racer"}, data={})
            leaf = chain.leaf_hash(entry)
            conn.execute(AuditEntry.__table__.insert().values(
                chain_id=chain_id, seq=head.seq + 1, entry=entry, leaf_hash=leaf,
                chain_hash=chain.chain_hash(bytes(head.chain_hash), leaf), tenant_id=tenant_id,
                event_type="test.commit_path", ts=now, actor=actor_label(ACTOR), subject_type="test",
                subject_id="racer"))

    sessions = sessionmaker(one_connection, expire_on_commit=False)
    other_tenant = unique("same-transaction")
    event.listen(Session, "before_commit", race)
    try:
        with pytest.raises(IntegrityError):
            with sessions.begin() as session:
                session.add(Tenant(id=f"ten_{other_tenant}", name=other_tenant))
                _append(committed_ctx, session, tenant_id, "lost")
    finally:
        event.remove(Session, "before_commit", race)
    with committed_ctx.db.sessions() as session:
        assert session.scalar(select(func.count()).where(Tenant.name == other_tenant)) == 0
    assert _subjects(committed_ctx, tenant_id) == ["racer"]

    with sessions.begin() as session:
        _append(committed_ctx, session, tenant_id, "after")
    assert _subjects(committed_ctx, tenant_id) == ["racer", "after"]
    _assert_intact(committed_ctx, tenant_id)


def test_a_transaction_failing_after_its_entry_was_hashed_leaves_nothing_for_the_next(
        committed_ctx, one_connection, tenant_id):
    """The entry is hashed before the session's last flush; when that flush fails the deferred
    INSERT is dropped with the transaction, never sent with the next transaction's COMMIT."""
    taken = create_tenant(committed_ctx, name=unique("taken"), actor=ACTOR).name
    sessions = sessionmaker(one_connection, expire_on_commit=False)
    with pytest.raises(IntegrityError):
        with sessions.begin() as session:
            _append(committed_ctx, session, tenant_id, "rolled-back")
            session.add(Tenant(id=f"ten_{unique()}", name=taken))  # flushed after the audit hook: duplicate
    with sessions.begin() as session:
        _append(committed_ctx, session, tenant_id, "next")
    assert _subjects(committed_ctx, tenant_id) == ["next"]
    _assert_intact(committed_ctx, tenant_id)


def test_the_lock_function_returns_the_head_rows_of_the_tenants_own_chain(committed_ctx, one_connection, tenant_id):
    other = create_tenant(committed_ctx, name=unique("other"), actor=ACTOR).id
    sessions = sessionmaker(one_connection, expire_on_commit=False)
    for subject in ("a", "b"):
        with sessions.begin() as session:
            _append(committed_ctx, session, tenant_id, subject)
    with one_connection.connect() as conn:
        head = conn.execute(text("SELECT * FROM memwarden_lock_chain(:c, :t, false)"),
                            {"c": chain_for(tenant_id), "t": tenant_id}).one()
        stored = conn.execute(select(AuditEntry.seq, AuditEntry.chain_hash, AuditEntry.entry, AuditEntry.leaf_hash)
                              .where(AuditEntry.chain_id == chain_for(tenant_id))
                              .order_by(AuditEntry.seq.desc()).limit(2)).all()
        assert (head.audit_seq, bytes(head.audit_hash), bytes(head.head_entry), bytes(head.head_leaf)) == (
            stored[0].seq, stored[0].chain_hash, stored[0].entry, stored[0].leaf_hash)
        assert (head.prev_seq, bytes(head.prev_hash)) == (stored[1].seq, stored[1].chain_hash)
        conn.rollback()
        # A chain other than the tenant's own is refused: no pairing of one tenant's audit head
        # with another's event log.
        for chain_id, tenant in ((chain_for(other), tenant_id), ("system", tenant_id), (chain_for(tenant_id), None)):
            with pytest.raises(DBAPIError) as refused:
                conn.execute(text("SELECT * FROM memwarden_lock_chain(:c, :t, false)"), {"c": chain_id, "t": tenant})
            assert refused.value.orig.sqlstate == "22023"
            conn.rollback()
