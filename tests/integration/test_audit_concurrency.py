"""Concurrent appends from several OS processes, and writers killed with SIGKILL mid-append.

8 writer processes (spawn; each its own AppContext and connection pool) append 400 events
each, first all to ONE chain, then spread over 8 chains. Every chain must come out gapless
(seq 1..N), verify (links, Merkle roots and the signed checkpoints the writers cut every 50
entries while racing), and hold each writer's events 0..399 exactly once.
(400 rather than 1,000: the same races over 64 checkpoints per phase, at 40 % of the suite time.)
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import queue
import random
import signal
import time
from collections import defaultdict

import pytest
from sqlalchemy import func, select, text

from app.db.models import AuditCheckpoint, AuditEntry
from app.services.audit.audit import chain_for
from app.services.tenancy.tenants import create_tenant
from tests.harness import unique

pytestmark = pytest.mark.slow

WRITERS = 8
EVENTS = 400
# Events per committed transaction cycle through 1..4 (each transaction takes and releases the
# chain lock once); one event per transaction would triple the runtime on 2 cores.
PER_TRANSACTION = (1, 2, 3, 4)
ACTOR = {"kind": "test", "id": "concurrency"}


# --- processes (top-level so `spawn` can import them) ----------------------------------------------

def _append(ctx, session, tenant_id: str, writer: int | str, i: int) -> None:
    ctx.audit.append(session, tenant_id=tenant_id, event_type="test.concurrent",
                     actor={"kind": "test", "id": f"writer-{writer}"}, subject={"type": "writer", "id": str(writer)},
                     data={"writer": writer, "i": i})


def _writer(settings, writer: int, phases: list[list[str]], barrier, results) -> None:
    """For each phase: wait for every writer, then append EVENTS events, each transaction to the
    next of the phase's chains in turn (one chain per transaction, as the app's own transactions
    do; several chains locked in varying orders by one transaction could deadlock)."""
    from app.services.runtime.context import AppContext

    ctx = AppContext.open(settings, migrate=False)
    try:
        for tenant_ids in phases:
            barrier.wait(timeout=120)
            i = tx = 0
            while i < EVENTS:
                tenant_id = tenant_ids[(writer + tx) % len(tenant_ids)]
                with ctx.db.sessions.begin() as session:
                    for _ in range(min(PER_TRANSACTION[tx % len(PER_TRANSACTION)], EVENTS - i)):
                        _append(ctx, session, tenant_id, writer, i)
                        i += 1
                tx += 1
            results.put((writer, i))
    finally:
        ctx.close()


def _looping_writer(settings, tenant_id: str, writer: int, started) -> None:
    """Appends in small transactions until it is killed."""
    from app.services.runtime.context import AppContext

    ctx = AppContext.open(settings, migrate=False)
    i = 0
    while True:
        with ctx.db.sessions.begin() as session:
            for _ in range(1 + i % 3):
                _append(ctx, session, tenant_id, writer, i)
                i += 1
        if i >= 10:
            started.set()


def _lock_holder(settings, tenant_id: str, holding) -> None:
    """Takes the chain's lock and appends in a transaction it never commits: it dies holding the lock."""
    from app.services.audit.audit_commit import lock_chain
    from app.services.runtime.context import AppContext

    ctx = AppContext.open(settings, migrate=False)
    session = ctx.db.sessions()
    session.begin()
    lock_chain(session, chain_for(tenant_id))
    _append(ctx, session, tenant_id, "holder", 0)
    session.flush()
    holding.set()
    time.sleep(600)


# --- checks --------------------------------------------------------------------------------------------

def chain_rows(ctx, tenant_id: str) -> list[tuple[int, dict]]:
    with ctx.db.sessions() as session:
        rows = session.execute(select(AuditEntry.seq, AuditEntry.entry).where(
            AuditEntry.chain_id == chain_for(tenant_id)).order_by(AuditEntry.seq)).all()
    return [(r.seq, json.loads(r.entry)) for r in rows]


def assert_chain_sound(ctx, tenant_id: str) -> list[tuple[int, dict]]:
    """Gapless from seq 1, and the verifier (links, Merkle roots, signed checkpoints) agrees."""
    rows = chain_rows(ctx, tenant_id)
    assert [seq for seq, _ in rows] == list(range(1, len(rows) + 1))
    report = ctx.audit.verify_database(ctx.db.sessions, chain_for(tenant_id))
    assert report.ok, report.detail
    assert report.entries == len(rows)
    return rows


def events_by_writer(rows) -> dict:
    seen = defaultdict(list)
    for _, entry in rows:
        if entry["type"] == "test.concurrent":
            seen[entry["data"]["writer"]].append(entry["data"]["i"])
    return seen


def collect(results, procs, n: int, timeout_s: float) -> list:
    """`n` results, failing fast if a process dies instead of waiting out the timeout."""
    out, deadline = [], time.monotonic() + timeout_s
    while len(out) < n:
        try:
            out.append(results.get(timeout=1))
        except queue.Empty:
            dead = [p.exitcode for p in procs if p.exitcode not in (None, 0)]
            assert not dead, f"writer process(es) failed: exit codes {dead}"
            assert time.monotonic() < deadline, f"only {len(out)} of {n} results after {timeout_s}s"
    return out


def append_now(ctx, tenant_id: str, timeout_s: int = 30) -> int:
    """Append one event (giving up if the chain lock is not free within `timeout_s`); its seq."""
    with ctx.db.sessions.begin() as session:
        session.execute(text(f"SET LOCAL lock_timeout = '{timeout_s}s'"))
        ctx.audit.append(session, tenant_id=tenant_id, event_type="test.after", actor=ACTOR, subject=None, data={})
    with ctx.db.sessions() as session:
        return session.scalar(select(func.max(AuditEntry.seq)).where(AuditEntry.chain_id == chain_for(tenant_id)))


# --- tests -----------------------------------------------------------------------------------------------

def test_8_processes_x_400_events_on_one_chain_then_on_8_chains(settings, committed_ctx):
    one = [create_tenant(committed_ctx, name=unique("conc1"), actor=ACTOR).id]
    eight = [create_tenant(committed_ctx, name=unique("conc8"), actor=ACTOR).id for _ in range(8)]
    spawn = mp.get_context("spawn")
    barrier, results = spawn.Barrier(WRITERS), spawn.Queue()
    procs = [spawn.Process(target=_writer, args=(settings, w, [one, eight], barrier, results))
             for w in range(WRITERS)]
    for proc in procs:
        proc.start()
    try:
        reports = collect(results, procs, 2 * WRITERS, timeout_s=300)
        for proc in procs:
            proc.join(60)
            assert proc.exitcode == 0
    finally:
        for proc in procs:
            if proc.is_alive():
                proc.kill()
    assert sorted(reports) == sorted((w, EVENTS) for w in range(WRITERS) for _ in range(2))

    # One chain: 3,200 events behind its tenant.created, every writer's 0..399 exactly once.
    rows = assert_chain_sound(committed_ctx, one[0])
    assert len(rows) == 1 + WRITERS * EVENTS
    seen = events_by_writer(rows)
    assert {w: sorted(i) for w, i in seen.items()} == {w: list(range(EVENTS)) for w in range(WRITERS)}
    with committed_ctx.db.sessions() as session:  # the count cadence signed while the writers raced ...
        sizes = session.scalars(select(AuditCheckpoint.size).where(
            AuditCheckpoint.chain_id == chain_for(one[0])).order_by(AuditCheckpoint.size)).all()
    assert len(sizes) >= len(rows) // settings.checkpoint_every - 1 and sizes[-1] <= len(rows)
    report = committed_ctx.audit.verify_database(committed_ctx.db.sessions, chain_for(one[0]))
    assert report.checkpoints_verified == len(sizes)  # ... and every one of them matches the rows

    # Eight chains: each gapless and verifying; across them, every writer's events exactly once.
    seen = defaultdict(list)
    total = 0
    for tenant_id in eight:
        rows = assert_chain_sound(committed_ctx, tenant_id)
        total += len(rows) - 1
        for writer, indexes in events_by_writer(rows).items():
            seen[writer].extend(indexes)
    assert total == WRITERS * EVENTS
    assert {w: sorted(i) for w, i in seen.items()} == {w: list(range(EVENTS)) for w in range(WRITERS)}


def test_writers_killed_mid_append_leave_a_chain_that_verifies_and_stays_appendable(settings, committed_ctx):
    tenant_id = create_tenant(committed_ctx, name=unique("killed"), actor=ACTOR).id
    spawn = mp.get_context("spawn")
    started = [spawn.Event() for _ in range(3)]
    procs = [spawn.Process(target=_looping_writer, args=(settings, tenant_id, w, started[w])) for w in range(3)]
    for proc in procs:
        proc.start()
    try:
        for event in started:
            assert event.wait(120), "a writer never got going"
        for proc in random.sample(procs, len(procs)):
            time.sleep(random.uniform(0.02, 0.4))
            os.kill(proc.pid, signal.SIGKILL)
        for proc in procs:
            proc.join(30)
            assert proc.exitcode == -signal.SIGKILL
    finally:
        for proc in procs:
            if proc.is_alive():
                proc.kill()

    seq = append_now(committed_ctx, tenant_id)  # no lock or row left behind blocks the next append
    rows = assert_chain_sound(committed_ctx, tenant_id)
    assert seq == len(rows)
    # Transactions are all-or-nothing: each writer's committed events are exactly 0..k-1.
    seen = events_by_writer(rows)
    assert set(seen) == {0, 1, 2}
    for indexes in seen.values():
        assert sorted(indexes) == list(range(len(indexes)))


def test_a_writer_killed_while_holding_the_chain_lock_releases_it(settings, committed_ctx):
    tenant_id = create_tenant(committed_ctx, name=unique("holder"), actor=ACTOR).id
    spawn = mp.get_context("spawn")
    holding = spawn.Event()
    proc = spawn.Process(target=_lock_holder, args=(settings, tenant_id, holding))
    proc.start()
    try:
        assert holding.wait(120)
        with committed_ctx.db.engine.connect() as conn:  # the chain really is locked by the holder
            assert conn.execute(select(func.pg_try_advisory_xact_lock(
                func.hashtext("memwarden.audit:" + chain_for(tenant_id))))).scalar() is False
            conn.rollback()
        os.kill(proc.pid, signal.SIGKILL)
        proc.join(30)
    finally:
        if proc.is_alive():
            proc.kill()
    assert append_now(committed_ctx, tenant_id) == 2  # the holder's uncommitted seq 2 never happened
    rows = assert_chain_sound(committed_ctx, tenant_id)
    assert [entry["type"] for _, entry in rows] == ["tenant.created", "test.after"]
