"""The audit witness against real PostgreSQL: what is witnessed, when, and where it goes.

A checkpoint reaches the witness file and the witness URL once its transaction has committed,
never when it rolls back; one signed inside a request's unit of work (an `Idempotency-Key`
request) once that unit commits. Each record carries the consistency proof from the previously
witnessed checkpoint.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Iterator

import httpx
import pytest

from app.core import auditchain as chain
from app.services.audit import audit_witness
from app.services.tenancy.apikeys import create_key
from app.services.audit.audit import chain_for, list_checkpoints
from app.services.runtime.context import AppContext
from app.services.runtime.outbound import OutboundRule
from app.services.tenancy.tenants import create_tenant
from tests.harness import bearer, start_server, stop_server, unique

ACTOR = {"kind": "test", "id": "audit-witness"}


class Receiver:
    """A local HTTP endpoint that keeps every POSTed body (answers 503 to the first `fail` posts)."""

    def __init__(self, fail: int = 0):
        self.bodies: list[str] = []
        self.fail = fail
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 (http.server's name)
                body = self.rfile.read(int(self.headers["Content-Length"])).decode("utf-8")
                if receiver.fail > 0:
                    receiver.fail -= 1
                    self.send_response(503)
                else:
                    assert self.headers["Content-Type"] == "application/json"
                    receiver.bodies.append(body)
                    self.send_response(204)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/witness"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def wait_for(self, count: int, timeout: float = 20) -> list[str]:
        deadline = time.monotonic() + timeout
        while len(self.bodies) < count and time.monotonic() < deadline:
            time.sleep(0.05)
        return list(self.bodies)


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver(fail=1)
    yield r
    r.server.shutdown()


@pytest.fixture
def witness_file(tmp_path) -> Path:
    return tmp_path / "witness" / "checkpoints.jsonl"


@pytest.fixture
def wctx(settings, committed_ctx, witness_file, receiver, monkeypatch) -> AppContext:
    monkeypatch.setattr(audit_witness, "POST_BACKOFF_SECONDS", 0.05)
    return AppContext(settings.with_changes(audit_witness_file=witness_file, audit_witness_url=receiver.url),
                      committed_ctx.db)


def grow(ctx: AppContext, tenant_id: str, events: int) -> None:
    for n in range(events):
        with ctx.db.sessions.begin() as session:
            ctx.audit.append(session, tenant_id=tenant_id, event_type="test.event", actor=ACTOR,
                             subject={"type": "memory", "id": f"mem_{n}"}, data={"n": n})


def checkpoint(ctx: AppContext, chain_id: str):
    with ctx.db.sessions.begin() as session:
        return ctx.audit.checkpoint(session, chain_id)


def witnessed_sizes(path: Path, origin: str) -> list[int]:
    if not path.exists():
        return []
    return [json.loads(line)["size"] for line in path.read_text(encoding="utf-8").splitlines()
            if json.loads(line)["origin"] == origin]


def test_each_checkpoint_reaches_the_file_and_the_url_with_its_consistency_proof(wctx, witness_file, receiver):
    tenant = create_tenant(wctx, name=unique("witness"), actor=ACTOR)
    chain_id = chain_for(tenant.id)
    origin = wctx.audit.checkpoint_origin(chain_id)
    sizes = []
    for events in (3, 5, 1):
        grow(wctx, tenant.id, events)
        sizes.append(checkpoint(wctx, chain_id).size)
    assert witnessed_sizes(witness_file, origin) == sizes
    lines = witness_file.read_text(encoding="utf-8").splitlines()
    record = chain.read_witness(lines, origin, [wctx.audit.vkey])  # signatures and every proof check out
    assert record.checkpoint.size == sizes[-1] and record.from_size == sizes[-2]
    posted = receiver.wait_for(len(sizes))  # the first POST got a 503 and was retried
    assert [json.loads(body)["size"] for body in posted] == sizes
    assert chain.read_witness(posted, origin, [wctx.audit.vkey]).checkpoint.size == sizes[-1]


def test_a_checkpoint_that_rolls_back_is_not_witnessed(wctx, witness_file):
    tenant = create_tenant(wctx, name=unique("rollback"), actor=ACTOR)
    chain_id = chain_for(tenant.id)
    grow(wctx, tenant.id, 2)
    with pytest.raises(RuntimeError):
        with wctx.db.sessions.begin() as session:
            assert wctx.audit.checkpoint(session, chain_id).size == 3
            raise RuntimeError("the caller fails after signing")
    assert witnessed_sizes(witness_file, wctx.audit.checkpoint_origin(chain_id)) == []
    assert checkpoint(wctx, chain_id).size == 3  # signed again, for real this time
    assert witnessed_sizes(witness_file, wctx.audit.checkpoint_origin(chain_id)) == [3]


def test_a_checkpoint_signed_in_a_unit_of_work_is_witnessed_when_the_unit_commits(wctx, witness_file):
    tenant = create_tenant(wctx, name=unique("joined"), actor=ACTOR)
    chain_id = chain_for(tenant.id)
    origin = wctx.audit.checkpoint_origin(chain_id)
    grow(wctx, tenant.id, 4)
    work = wctx.db.unit_of_work()
    joined = wctx.with_database(work.database)
    with joined.db.sessions.begin() as session:  # "commits" a savepoint: the database has not committed
        assert joined.audit.checkpoint(session, chain_id).size == 5
    assert witnessed_sizes(witness_file, origin) == []
    work.commit()
    assert witnessed_sizes(witness_file, origin) == [5]
    assert checkpoint(wctx, chain_id).size == 5
    assert witnessed_sizes(witness_file, origin) == [5]  # once


def test_a_checkpoint_signed_in_a_unit_of_work_that_rolls_back_is_not_witnessed(wctx, witness_file):
    tenant = create_tenant(wctx, name=unique("joined-rollback"), actor=ACTOR)
    chain_id = chain_for(tenant.id)
    origin = wctx.audit.checkpoint_origin(chain_id)
    grow(wctx, tenant.id, 4)
    work = wctx.db.unit_of_work()
    joined = wctx.with_database(work.database)
    with joined.db.sessions.begin() as session:
        assert joined.audit.checkpoint(session, chain_id).size == 5
    grow(joined, tenant.id, 1)
    with pytest.raises(RuntimeError):
        with joined.db.sessions.begin() as session:
            assert joined.audit.checkpoint(session, chain_id).size == 6
            raise RuntimeError("this service call fails")
    work.rollback()
    assert witnessed_sizes(witness_file, origin) == []
    assert checkpoint(wctx, chain_id).size == 5  # signed again, for real
    assert witnessed_sizes(witness_file, origin) == [5]


def test_a_savepoint_that_rolls_back_drops_only_its_own_witness_record(wctx, witness_file):
    tenant = create_tenant(wctx, name=unique("joined-partial"), actor=ACTOR)
    chain_id = chain_for(tenant.id)
    origin = wctx.audit.checkpoint_origin(chain_id)
    grow(wctx, tenant.id, 4)
    work = wctx.db.unit_of_work()
    joined = wctx.with_database(work.database)
    with joined.db.sessions.begin() as session:
        assert joined.audit.checkpoint(session, chain_id).size == 5
    grow(joined, tenant.id, 1)
    with pytest.raises(RuntimeError):
        with joined.db.sessions.begin() as session:  # a later savepoint that rolls back drops its own only
            assert joined.audit.checkpoint(session, chain_id).size == 6
            raise RuntimeError("this service call fails")
    work.commit()
    assert witnessed_sizes(witness_file, origin) == [5]
    assert checkpoint(wctx, chain_id).size == 6
    assert witnessed_sizes(witness_file, origin) == [5, 6]


def test_a_unit_of_work_inside_a_transaction_it_does_not_own_witnesses_nothing(settings, ctx, witness_file):
    """The test harness's case: the unit is a savepoint of an outer transaction that will roll
    back, so its commit makes nothing durable and nothing may be witnessed."""
    harness = AppContext(settings.with_changes(audit_witness_file=witness_file), ctx.db)
    tenant = create_tenant(harness, name=unique("harness-unit"), actor=ACTOR)
    chain_id = chain_for(tenant.id)
    work = harness.db.unit_of_work()
    assert not work.durable
    joined = harness.with_database(work.database)
    with joined.db.sessions.begin() as session:
        assert joined.audit.checkpoint(session, chain_id).size == 1
    work.commit()
    assert witnessed_sizes(witness_file, harness.audit.checkpoint_origin(chain_id)) == []


def test_the_witness_url_obeys_the_ssrf_rule(receiver, monkeypatch):
    monkeypatch.setattr(audit_witness, "POST_BACKOFF_SECONDS", 0)
    receiver.fail = 0
    signer = chain.Signer.from_pem(chain.generate_private_key_pem(), "memwarden.test")
    line = chain.witness_line(signer.sign_checkpoint("memwarden.test/system", 1, bytes(32), bytes(32)))
    strict = audit_witness.Witness(url=receiver.url, rule=OutboundRule(False, "MEMWARDEN_WEBHOOK_ALLOW_PRIVATE"))
    with strict.client() as client:
        assert not strict.post(client, line)
    assert receiver.bodies == []
    allowed = audit_witness.Witness(url=receiver.url, rule=OutboundRule(True, "MEMWARDEN_WEBHOOK_ALLOW_PRIVATE"))
    with allowed.client() as client:
        assert allowed.post(client, line)
    assert receiver.bodies == [line]


def test_a_forged_last_record_in_the_witness_file_is_passed_over(wctx, witness_file):
    """A record not signed by this log (appended by whoever can write the file) is not trusted:
    the signer holds the chain to the last record that is."""
    tenant = create_tenant(wctx, name=unique("forged-witness"), actor=ACTOR)
    chain_id = chain_for(tenant.id)
    origin = wctx.audit.checkpoint_origin(chain_id)
    grow(wctx, tenant.id, 2)
    assert checkpoint(wctx, chain_id).size == 3
    forger = chain.Signer.from_pem(chain.generate_private_key_pem(), wctx.settings.audit_origin)
    with witness_file.open("a", encoding="utf-8") as fh:
        fh.write(chain.witness_line(forger.sign_checkpoint(origin, 1000, bytes(32), bytes(32))) + "\n")
        fh.write("not a record\n")
    fresh = AppContext(wctx.settings, wctx.db)  # a new process: it reads the whole file
    assert fresh.audit.witness.latest(origin, fresh.audit.vkey).checkpoint.size == 3
    grow(fresh, tenant.id, 1)
    assert checkpoint(fresh, chain_id).size == 4  # not refused as "truncated below 1000"


@pytest.mark.slow
@pytest.mark.parametrize("idempotent", [True, False], ids=["with-idempotency-key", "without"])
def test_a_live_server_witnesses_each_checkpoint_as_its_request_commits(settings, committed_ctx, witness_file,
                                                                      idempotent):
    """Every checkpoint a `memwarden serve` signs is in the witness file by the time the request
    that signed it is answered, also when the request carries an `Idempotency-Key` (its services'
    transactions are savepoints of the request's unit of work, which commits last)."""
    tenant = create_tenant(committed_ctx, name=unique("live-witness"), actor=ACTOR)
    token = create_key(committed_ctx, tenant_id=tenant.id, scopes="memory:read,memory:write", agents="*",
                       actor=ACTOR).token
    chain_id = chain_for(tenant.id)
    origin = committed_ctx.audit.checkpoint_origin(chain_id)
    proc, base_url = start_server(settings, MEMWARDEN_CHECKPOINT_EVERY="5",
                                  MEMWARDEN_AUDIT_WITNESS_FILE=str(witness_file))
    try:
        with httpx.Client(base_url=base_url, headers=bearer(token), timeout=30) as client:
            for n in range(12):
                headers = {"Idempotency-Key": f"witness-{n}"} if idempotent else {}
                response = client.post("/v1/memories/remember", headers=headers, json={
                    "agent_id": "witnessed", "type": "semantic", "content": f"Fact number {n} about plums."})
                assert response.status_code in (200, 201), response.text
                signed = [c["size"] for c in list_checkpoints(committed_ctx, chain_id)]
                assert witnessed_sizes(witness_file, origin) == signed, f"after remember {n + 1}"
    finally:
        stop_server(proc)
    assert len(signed) >= 2  # the cadence did sign during the run, so the comparison above meant something
    signed = [c["size"] for c in list_checkpoints(committed_ctx, chain_id)]  # and one more at shutdown
    lines = witness_file.read_text(encoding="utf-8").splitlines()
    assert chain.read_witness(lines, origin, [committed_ctx.audit.vkey]).checkpoint.size == signed[-1]
