"""The read audit and read budgets against a live `memwarden serve`.

- `kill -9` of the server right after reads: every read answered more than one flush interval
  before the kill is in the tenant's chain and its indexes; none that was not made is; the chain
  verifies.
- An exfiltration with the default budgets: a key paging through 2,500 memories by list, and
  another by varied recalls, are each stopped (429 `read_budget_exceeded`, `Retry-After`) at the
  per-key budget, and the access log names exactly the memories each was returned.
- A normal agent's session never meets the budget.
"""

import json
import random
import signal
import time

import httpx
import pytest
from sqlalchemy import text

from app.services.tenancy.apikeys import create_key
from app.services.audit.audit import chain_for
from app.services.transfer.importer import import_bytes
from app.services.tenancy.tenants import create_tenant
from tests.harness import start_server, stop_server, unique

pytestmark = pytest.mark.slow

ACTOR = {"kind": "test", "id": "read-audit-live"}
VICTIM = "victim-agent"
MEMORIES = 2_500
FLUSH_MS = 200
WORDS = ("harbour lantern orchard copper violin glacier meadow falcon ember quarry saffron tundra "
         "compass velvet monsoon granite pepper ribbon cedar lagoon thimble marble walnut cobalt").split()


def _key(ctx, tenant_id, scopes="memory:read"):
    issued = create_key(ctx, tenant_id=tenant_id, scopes=scopes, agents="*", actor=ACTOR)
    return issued.token, issued.key.id


def _auth(token):
    return {"Authorization": f"Bearer {token}"}


def _access_ids(client, auditor, key_id):
    """Every memory id the access log says `key_id` was returned (all pages)."""
    ids, cursor = set(), None
    while True:
        params = {"key_id": key_id, "limit": 1000, **({"cursor": cursor} if cursor else {})}
        page = client.get("/v1/audit/access", params=params, headers=_auth(auditor)).json()
        ids.update(m for item in page["items"] for m in item["memory_ids"])
        cursor = page["next_cursor"]
        if not cursor:
            return ids


def test_kill_9_loses_at_most_the_last_flush_interval(settings, committed_ctx):
    tenant = create_tenant(committed_ctx, name=unique("kill"), actor=ACTOR)
    token, key_id = _key(committed_ctx, tenant.id, "memory:read,memory:write")
    proc, base_url = start_server(settings, MEMWARDEN_READ_AUDIT_FLUSH_MS=str(FLUSH_MS))
    try:
        with httpx.Client(base_url=base_url, headers=_auth(token), timeout=30) as client:
            ids = [client.post("/v1/memories/remember", json={"agent_id": "kill-agent", "type": "semantic",
                                                              "content": f"Kill drill fact {i}."}).json()["id"]
                   for i in range(8)]
            for memory_id in ids[:4]:
                assert client.get(f"/v1/memories/{memory_id}").status_code == 200
            time.sleep(5 * FLUSH_MS / 1000)  # the early reads are past a flush interval, with margin
            for memory_id in ids[4:]:
                assert client.get(f"/v1/memories/{memory_id}").status_code == 200
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    with committed_ctx.db.sessions() as session:
        indexed = session.execute(text("SELECT memory_ids FROM read_records WHERE tenant_id = :t AND key_id = :k"),
                                  {"t": tenant.id, "k": key_id}).scalars().all()
        chained = [json.loads(e)["data"]["memory_ids"] for e in session.execute(text(
            "SELECT entry FROM audit_entries WHERE chain_id = :c AND event_type = 'memory.read' ORDER BY seq"),
            {"c": chain_for(tenant.id)}).scalars()]
    assert sorted(indexed) == sorted(chained)  # index and chain written together or not at all
    recorded = [m for ids_ in chained for m in ids_]
    assert set(ids[:4]) <= set(recorded), "a read older than the flush interval was lost"
    assert set(recorded) <= set(ids) and len(recorded) == len(set(recorded))  # nothing invented or doubled
    report = committed_ctx.audit.verify_database(committed_ctx.db.sessions, chain_for(tenant.id))
    assert report.ok, report


@pytest.fixture(scope="module")
def victim(settings, committed_ctx):
    """A tenant holding 2,500 memories of one agent (imported: every write rule applies) and a
    live server with the default read budgets."""
    tenant = create_tenant(committed_ctx, name=unique("exfil"), actor=ACTOR)
    rng = random.Random(20)
    records = [{"agent_id": VICTIM, "type": "semantic",
                "content": f"Record {i}: the {' '.join(rng.sample(WORDS, 4))} note number {i}."}
               for i in range(MEMORIES)]
    report = import_bytes(committed_ctx, tenant_id=tenant.id, data=json.dumps(records).encode(), fmt="memorywire",
                          actor=ACTOR)
    assert not report.problems, report.problems[:3]
    proc, base_url = start_server(settings)
    yield tenant, base_url
    stop_server(proc)


def test_an_exfiltration_by_list_is_stopped_at_the_budget(committed_ctx, victim):
    tenant, base_url = victim
    budget = committed_ctx.settings.read_budget_per_key
    token, key_id = _key(committed_ctx, tenant.id)
    auditor, _ = _key(committed_ctx, tenant.id, "audit:read")
    got, cursor, refused = set(), None, None
    with httpx.Client(base_url=base_url, headers=_auth(token), timeout=60) as client:
        for _ in range(MEMORIES // 500 + 1):
            params = {"agent_id": VICTIM, "limit": 500, **({"cursor": cursor} if cursor else {})}
            response = client.get("/v1/memories", params=params)
            if response.status_code == 429:
                refused = response
                break
            assert response.status_code == 200, response.text
            got.update(item["id"] for item in response.json()["items"])
            cursor = response.json()["next_cursor"]
    assert refused is not None, f"paged through {len(got)} memories unstopped"
    assert refused.json()["error"]["code"] == "read_budget_exceeded" and int(refused.headers["retry-after"]) >= 1
    assert len(got) == budget  # pages of 500 fill a budget of 2,000 exactly
    time.sleep(1)  # the server's read-audit batches reach the chain
    with httpx.Client(base_url=base_url, timeout=60) as client:
        assert _access_ids(client, auditor, key_id) == got
    _assert_flagged(committed_ctx, tenant.id, key_id)


def test_an_exfiltration_by_varied_recalls_is_stopped_at_the_budget(committed_ctx, victim):
    tenant, base_url = victim
    budget = committed_ctx.settings.read_budget_per_key
    token, key_id = _key(committed_ctx, tenant.id)
    auditor, _ = _key(committed_ctx, tenant.id, "audit:read")
    rng = random.Random(7)
    got, refused = set(), None
    with httpx.Client(base_url=base_url, headers=_auth(token), timeout=60) as client:
        for _ in range(400):
            query = " ".join(rng.sample(WORDS, 2)) + f" note number {rng.randrange(MEMORIES)}"
            response = client.post("/v1/memories/recall", json={"agent_id": VICTIM, "query": query, "k": 50,
                                                                "min_score": -1})
            if response.status_code == 429:
                refused = response
                break
            assert response.status_code == 200, response.text
            got.update(hit["id"] for hit in response.json()["hits"])
    assert refused is not None, f"recalled {len(got)} distinct memories unstopped"
    assert refused.json()["error"]["code"] == "read_budget_exceeded"
    assert budget - 50 < len(got) <= budget
    time.sleep(1)
    with httpx.Client(base_url=base_url, timeout=60) as client:
        assert _access_ids(client, auditor, key_id) == got
    _assert_flagged(committed_ctx, tenant.id, key_id)


def test_a_normal_agent_never_meets_the_budget(committed_ctx, victim):
    """A working session: recalls of k=10 on everyday questions and a get of each top hit, as an
    agent does per turn — a few hundred turns are far below the budget (docs/benchmarks/)."""
    tenant, base_url = victim
    token, key_id = _key(committed_ctx, tenant.id)
    rng = random.Random(3)
    with httpx.Client(base_url=base_url, headers=_auth(token), timeout=60) as client:
        for _ in range(150):
            query = f"what do we know about the {rng.choice(WORDS[:8])} {rng.choice(WORDS[:8])}?"
            response = client.post("/v1/memories/recall", json={"agent_id": VICTIM, "query": query, "k": 10})
            assert response.status_code == 200, response.text
            for hit in response.json()["hits"][:1]:
                assert client.get(f"/v1/memories/{hit['id']}").status_code == 200
    with committed_ctx.db.sessions() as session:
        assert session.execute(text("SELECT read_budget_exceeded_at FROM api_keys WHERE id = :k"),
                               {"k": key_id}).scalar() is None


def _assert_flagged(ctx, tenant_id, key_id):
    """The refusal was announced once: the key flagged, one audit entry and one event."""
    with ctx.db.sessions() as session:
        assert session.execute(text("SELECT read_budget_exceeded_at FROM api_keys WHERE id = :k"),
                               {"k": key_id}).scalar() is not None
        assert session.execute(text("SELECT count(*) FROM events WHERE tenant_id = :t AND type = "
                                    "'read_budget.exceeded' AND payload->>'keyId' = :k"),
                               {"t": tenant_id, "k": key_id}).scalar() == 1


def test_reads_of_a_tenant_whose_chain_is_closed_are_recorded_in_the_system_chain(committed_ctx):
    """An open alarm refuses writes to the tenant's chain; reads still happen (an investigation
    reads), so their records go to the system chain, naming the tenant, and to the indexes."""
    from app.services.audit import read_audit
    from app.services.audit.audit import SYSTEM_CHAIN

    tenant = create_tenant(committed_ctx, name=unique("closed"), actor=ACTOR)
    committed_ctx.audit.raise_alarm(committed_ctx.db.engine, chain_for(tenant.id), first_bad_seq=1, reason="test",
                                    detail="opened by the test", detected_by="test")
    record = read_audit.note_read(committed_ctx, tenant_id=tenant.id, actor={"kind": "api_key", "id": "key_x"},
                                  key_id="key_x", agent_id="a", operation="get", memory_ids=["mem_x"])
    read_audit.flush(committed_ctx)
    with committed_ctx.db.sessions() as session:
        entry = session.execute(text("SELECT entry FROM audit_entries WHERE chain_id = :c AND subject_id = :r"),
                                {"c": SYSTEM_CHAIN, "r": record.id}).scalar()
        indexed = session.execute(text("SELECT memory_ids FROM read_records WHERE tenant_id = :t AND id = :r"),
                                  {"t": tenant.id, "r": record.id}).scalar()
    assert json.loads(entry)["data"]["tenant_id"] == tenant.id and indexed == ["mem_x"]


def test_the_budget_count_is_exact_under_concurrent_takers(committed_ctx):
    """Eight connections take overlapping ids from one key's window at once (as processes and
    workers do): what was allowed is exactly what is counted, and never more than the limit."""
    import threading
    from datetime import datetime, timezone

    from app.repos.audit import reads

    tenant_id, limit = unique("race"), 60
    window = datetime(2030, 1, 1, tzinfo=timezone.utc)
    allowed: list[str] = []
    lock = threading.Lock()

    def taker(seed: int) -> None:
        rng = random.Random(seed)
        with committed_ctx.db.engine.connect() as conn:
            conn = conn.execution_options(isolation_level="AUTOCOMMIT")
            for _ in range(40):
                ids = [f"mem_{rng.randrange(120)}" for _ in range(5)]
                verdict = reads.take_budget(conn, tenant_id=tenant_id, principals=["key:k", "agent:a"],
                                            limits=[limit, limit * 10], window_start=window, ids=ids)
                if verdict.allowed:
                    with lock:
                        allowed.extend(ids)

    threads = [threading.Thread(target=taker, args=(seed,)) for seed in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    with committed_ctx.db.sessions() as session:
        used = session.execute(text("SELECT used FROM read_budget_windows WHERE tenant_id = :t AND principal = 'key:k'"),
                               {"t": tenant_id}).scalar()
        seen = set(session.execute(text("SELECT memory_id FROM read_budget_seen WHERE tenant_id = :t "
                                        "AND principal = 'key:k'"), {"t": tenant_id}).scalars())
        session.execute(text("DELETE FROM read_budget_seen WHERE tenant_id = :t"), {"t": tenant_id})
        session.execute(text("DELETE FROM read_budget_windows WHERE tenant_id = :t"), {"t": tenant_id})
        session.commit()
    assert seen == set(allowed) and used == len(seen)
    assert limit - 5 < used <= limit  # filled to within one request of the limit, never past it
