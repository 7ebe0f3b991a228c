"""Group commit of concurrent remembers of one tenant (`app.services.memory.group_commit`), against a
database that really commits: writes that queue while a commit is in flight go together in the
next transaction, each keeps its own audit entry, outcome and durability, and a group that fails
is retried write by write so only the failing write fails."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time

import pytest
from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.core.ids import new_id
from app.core.timefmt import utcnow
from app.db.models import AuditCheckpoint, AuditEntry, Event, Memory
from app.repos.audit import audit_log as audit_log_repo
from app.services.memory import group_commit, memories, remembering
from app.services.tenancy.apikeys import authenticate, create_key
from app.services.audit.audit import chain_for
from app.services.tenancy.tenant_config import rules_for
from app.services.tenancy.tenants import create_tenant
from tests.harness import PROJECT_ROOT, server_env, unique

ACTOR = {"kind": "test", "id": "group-commit"}


@pytest.fixture
def principals(committed_ctx):
    tenant = create_tenant(committed_ctx, name=unique("group"), actor=ACTOR)
    return [authenticate(committed_ctx, create_key(committed_ctx, tenant_id=tenant.id, scopes="memory:write",
                                                   actor=ACTOR).token) for _ in range(3)]


def _body(i: int) -> dict:
    return {"agent_id": "grouped", "type": "semantic", "content": f"Grouped fact number {i}: the {i}th shelf."}


def _run_threads(targets) -> list:
    results: list = [None] * len(targets)

    def run(i, target):
        try:
            results[i] = target()
        except BaseException as exc:  # noqa: BLE001 — the test inspects it
            results[i] = exc

    threads = [threading.Thread(target=run, args=(i, t)) for i, t in enumerate(targets)]
    for thread in threads:
        thread.start()
    return threads, results


def _wait_until(predicate, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_writes_queued_behind_a_commit_go_in_one_transaction_each_with_its_own_entry(committed_ctx, principals):
    ctx, tenant_id = committed_ctx, principals[0].tenant_id
    committer = group_commit.committer(ctx)
    # Hold the tenant's chain lock from another transaction: the first write's commit waits for it
    # (holding the tenant's turn), and the others queue in the process behind it.
    with ctx.db.sessions.begin() as blocker:
        audit_log_repo.lock_chain(blocker, chain_for(tenant_id))
        threads, results = _run_threads(
            [lambda i=i: remembering.remember(ctx, principals[i % 3], _body(i)) for i in range(6)])
        _wait_until(lambda: committer.waiting(tenant_id) == 5)
        with ctx.db.sessions() as session:  # nothing is visible before its commit
            assert session.scalar(select(func.count()).select_from(Memory).where(Memory.tenant_id == tenant_id)) == 0
    for thread in threads:
        thread.join(60)
    assert all(isinstance(r, memories.Outcome) and r.status == 201 for r in results), results

    with ctx.db.sessions() as session:  # durable and visible once each call returned
        stored = set(session.scalars(select(Memory.id).where(Memory.tenant_id == tenant_id, Memory.status == "live")))
        entries = session.execute(select(AuditEntry.subject_id, AuditEntry.actor, AuditEntry.ts).where(
            AuditEntry.chain_id == chain_for(tenant_id), AuditEntry.event_type == "memory.remembered")).all()
    assert stored == {r.body["id"] for r in results}
    by_subject = {e.subject_id: e for e in entries}
    assert set(by_subject) == stored  # one entry each, naming the key that wrote it
    for i, result in enumerate(results):
        assert by_subject[result.body["id"]].actor == f"api_key:{principals[i % 3].key_id}"
    # The first to reach its commit went alone; the five queued behind it went in one transaction
    # (their entries share its timestamp).
    assert len({by_subject[r.body["id"]].ts for r in results[1:]} - {by_subject[results[0].body["id"]].ts}) <= 1
    assert len({e.ts for e in entries}) == 2
    assert ctx.audit.verify_database(ctx.db.sessions, chain_for(tenant_id)).ok


def test_a_failing_group_is_retried_write_by_write_and_only_the_failing_write_fails(committed_ctx, principals):
    ctx, tenant_id = committed_ctx, principals[0].tenant_id
    committer = group_commit.committer(ctx)
    decided = _decider(ctx, principals[0])

    taken = new_id("mem")
    with ctx.db.sessions.begin() as blocker:
        audit_log_repo.lock_chain(blocker, chain_for(tenant_id))
        first = _run_threads([lambda: committer.commit(ctx, decided(0, new_id("mem")), remembering.write_decided)])
        _wait_until(lambda: tenant_id in committer._committing)
        # Two writes with one id (a primary-key clash in their shared transaction) and a third.
        rest = _run_threads([lambda: committer.commit(ctx, decided(1, taken), remembering.write_decided),
                             lambda: committer.commit(ctx, decided(2, taken), remembering.write_decided),
                             lambda: committer.commit(ctx, decided(3, new_id("mem")), remembering.write_decided)])
        _wait_until(lambda: committer.waiting(tenant_id) == 3)
    for thread in [*first[0], *rest[0]]:
        thread.join(60)
    outcomes = [*first[1], *rest[1]]
    assert outcomes[0].status == 201 and outcomes[3].status == 201
    clashing = outcomes[1:3]
    assert sum(isinstance(o, IntegrityError) for o in clashing) == 1  # alone, one of the two still clashes
    assert sum(isinstance(o, memories.Outcome) and o.status == 201 for o in clashing) == 1
    with ctx.db.sessions() as session:
        count = session.scalar(select(func.count()).select_from(Memory).where(Memory.tenant_id == tenant_id))
    assert count == 3
    assert ctx.audit.verify_database(ctx.db.sessions, chain_for(tenant_id)).ok


# --- the group's commit on the driver connection, without a Session ------

def _spy_on_driver_commits(monkeypatch) -> dict[str, int]:
    """Count `remembering.commit_on_driver`'s calls by result: committed, declined (None), raised."""
    seen = {"committed": 0, "declined": 0, "raised": 0}
    real = remembering.commit_on_driver

    def spy(ctx, decided):
        try:
            outcomes = real(ctx, decided)
        except Exception:
            seen["raised"] += 1
            raise
        seen["committed" if outcomes is not None else "declined"] += 1
        return outcomes

    monkeypatch.setattr(remembering, "commit_on_driver", spy)
    return seen


def _audit_cli(settings, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "app.cli", "audit", *args], cwd=PROJECT_ROOT,
                          env=server_env(settings), capture_output=True, text=True, timeout=180)


def test_a_chain_written_on_the_driver_is_the_same_kind_of_chain_and_verifies_offline(
        committed_ctx, settings, monkeypatch, tmp_path):
    ctx = committed_ctx
    seen = _spy_on_driver_commits(monkeypatch)
    tenant = create_tenant(ctx, name=unique("driver"), actor=ACTOR)
    principal = authenticate(ctx, create_key(ctx, tenant_id=tenant.id, scopes="memory:write", actor=ACTOR).token)
    body = {**_body(0), "tags": ["shelf"], "metadata": {"room": "attic"}}
    first = remembering.remember(ctx, principal, body)  # the scope's first write mints its ref: through a Session
    assert first.status == 201 and seen == {"committed": 0, "declined": 1, "raised": 0}
    # Sequential writes past seq 50 (the tests' checkpoint_every): one lands on the checkpoint and is
    # declined too (signed through a Session); every other goes on the driver.
    outcomes = [remembering.remember(ctx, principal, {**body, "content": f"Fact {i} on the {i}th shelf."})
                for i in range(1, 51)]
    assert all(o.status == 201 for o in outcomes)
    assert seen["committed"] == 49 and seen["declined"] == 2 and seen["raised"] == 0, seen

    chain_id = chain_for(tenant.id)
    with ctx.db.sessions() as session:
        entries = session.execute(select(AuditEntry.seq, AuditEntry.subject_id, AuditEntry.entry).where(
            AuditEntry.chain_id == chain_id, AuditEntry.event_type == "memory.remembered")
            .order_by(AuditEntry.seq)).all()
        written = session.execute(select(Event.id, Event.payload).where(
            Event.tenant_id == tenant.id, Event.type == "memory.written").order_by(Event.id)).all()
        checkpoints = session.scalars(select(AuditCheckpoint.size).where(AuditCheckpoint.chain_id == chain_id)).all()
    ids = [first.body["id"], *(o.body["id"] for o in outcomes)]
    assert [e.subject_id for e in entries] == ids
    # Every entry has the shape of the Session's (the first): the same fields, the same data keys.
    shape = [json.loads(e.entry) for e in entries]
    assert {tuple(s) for s in shape} == {tuple(shape[0])}
    assert {tuple(sorted(s["data"])) for s in shape} == {tuple(sorted(shape[0]["data"]))}
    assert not any(b"shelf." in e.entry for e in entries)  # digests only, never content
    # One `memory.written` each, numbered without gaps, with the scope's ref and the tags.
    assert [w.payload["memoryId"] for w in written] == ids
    assert [w.id for w in written] == list(range(written[0].id, written[0].id + len(ids)))
    assert {w.payload["memoryRef"] for w in written} == {written[0].payload["memoryRef"]}
    assert all(w.payload["tags"] == ["shelf"] for w in written)
    assert 50 in checkpoints

    verified = _audit_cli(settings, "verify", "--tenant", tenant.name, "--json")
    assert verified.returncode == 0, verified.stdout[-2000:] + verified.stderr[-2000:]
    out = tmp_path / "driver.jsonl"
    exported = _audit_cli(settings, "export", "--tenant", tenant.name, "--out", str(out))
    assert exported.returncode == 0, exported.stderr[-2000:]
    offline = _audit_cli(settings, "verify", str(out), "--public-key", ctx.audit.vkey, "--json")
    assert offline.returncode == 0, offline.stdout[-2000:]
    report = json.loads(offline.stdout.strip().splitlines()[-1])
    assert report["entries"] >= entries[-1].seq and report["key_pinned"], report


def test_a_failing_group_on_the_driver_is_retried_write_by_write(committed_ctx, principals, monkeypatch):
    ctx, tenant_id = committed_ctx, principals[0].tenant_id
    seen = _spy_on_driver_commits(monkeypatch)
    committer = group_commit.committer(ctx)
    decided = _decider(ctx, principals[0])
    assert remembering.remember(ctx, principals[0], _body(9)).status == 201  # the scope's ref, minted and known

    def commit(d):
        return committer.commit(ctx, d, remembering.write_decided, direct=remembering.commit_on_driver)

    taken = new_id("mem")
    with ctx.db.sessions.begin() as blocker:
        audit_log_repo.lock_chain(blocker, chain_for(tenant_id))
        first = _run_threads([lambda: commit(decided(0, new_id("mem")))])
        _wait_until(lambda: tenant_id in committer._committing)
        rest = _run_threads([lambda: commit(decided(1, taken)), lambda: commit(decided(2, taken)),
                             lambda: commit(decided(3, new_id("mem")))])
        _wait_until(lambda: committer.waiting(tenant_id) == 3)
    for thread in [*first[0], *rest[0]]:
        thread.join(60)
    outcomes = [*first[1], *rest[1]]
    assert outcomes[0].status == 201 and outcomes[3].status == 201
    clashing = outcomes[1:3]
    assert sum(isinstance(o, IntegrityError) for o in clashing) == 1
    assert sum(isinstance(o, memories.Outcome) and o.status == 201 for o in clashing) == 1
    # The lone first and the group of three went on the driver; the group's clash raised there, and
    # its writes were committed again alone, through a Session.
    assert seen["committed"] == 1 and seen["raised"] == 1, seen
    with ctx.db.sessions() as session:
        count = session.scalar(select(func.count()).select_from(Memory).where(Memory.tenant_id == tenant_id))
        events = session.scalar(select(func.count()).select_from(Event).where(Event.tenant_id == tenant_id))
    assert count == 4 and events == 4
    assert ctx.audit.verify_database(ctx.db.sessions, chain_for(tenant_id)).ok


def _decider(ctx, principal):
    """`decided(i, memory_id)`: write `i` prepared and screened for `principal` (as a request does before
    its commit), ready for the group committer."""
    rules = rules_for(ctx, principal)

    def decided(i: int, memory_id: str):
        now = utcnow()
        write = remembering.prepare_remember(ctx, principal, _body(i), rules, memory_id=memory_id,
                                          created_at=now, updated_at=now)
        embedding = ctx.embedder.embed([write.memory.content])[0]
        with ctx.db.reader() as conn, Session(bind=conn) as session:
            return remembering.decide(ctx, session, principal, write, embedding)

    return decided
