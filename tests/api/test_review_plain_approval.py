"""The plain approval (a staged remember approved as it stands) runs on pre-built statements
(`review._approve_staged_memory`): it must write exactly what the general decision path writes,
keep tenant and agent isolation, and let only one of two concurrent decisions win."""

import threading
import time

from sqlalchemy import event, text

from app.errors import Conflict
from app.services.review import review
from tests.harness import bearer, unique
from tests.schema_check import assert_error, assert_schema

META = {"source": "chat", "turn": 7}


def _stage(client, headers, content, agent_id="agent-a"):
    response = client.post("/v1/memories/remember", json={
        "agent_id": agent_id, "user_id": "u1", "type": "semantic", "content": content, "tags": ["travel", "pref"],
        "metadata": META, "approval_required": True}, headers=headers)
    assert response.status_code == 202, response.text
    return response.json()


def _audit(ctx, tenant_id, change_id, memory_id):
    """(event type, subject id, entry data) of the audit entries about this change or its memory."""
    with ctx.db.sessions() as session:
        rows = session.execute(text(
            "SELECT event_type, subject_id, convert_from(entry, 'UTF8')::jsonb -> 'data' AS data FROM audit_entries "
            "WHERE tenant_id = :t AND subject_id IN (:c, :m) ORDER BY seq"),
            {"t": tenant_id, "c": change_id, "m": memory_id}).all()
    return [[r.event_type, r.subject_id, r.data] for r in rows]


def _events(ctx, tenant_id, change_id, memory_id):
    with ctx.db.sessions() as session:
        rows = session.execute(text(
            "SELECT type, payload FROM events WHERE tenant_id = :t AND (payload ->> 'changeId' = :c "
            "OR payload ->> 'memoryId' = :m) ORDER BY id"), {"t": tenant_id, "c": change_id, "m": memory_id}).all()
    return [[r.type, r.payload] for r in rows]


def _rows(ctx, tenant_id, change_id, memory_id):
    with ctx.db.sessions() as session:
        change = session.execute(text("SELECT * FROM changes WHERE tenant_id = :t AND id = :c"),
                                 {"t": tenant_id, "c": change_id}).one()._asdict()
        memory = session.execute(text("SELECT status, live_from, updated_at FROM memories "
                                      "WHERE tenant_id = :t AND id = :m"), {"t": tenant_id, "m": memory_id}).one()
    return change, memory


def _normalised(value, change_id, memory_id):
    """`value` with this change's own ids, digests and times replaced, so two approvals compare."""
    if isinstance(value, dict):
        return {k: ("<varies>" if k in ("content_digest", "digest", "at", "memoryRef") and v is not None else
                    _normalised(v, change_id, memory_id)) for k, v in value.items()}
    if isinstance(value, list):
        return [_normalised(v, change_id, memory_id) for v in value]
    return {change_id: "<change>", memory_id: "<memory>"}.get(value, value) if isinstance(value, str) else value


class _Statements:
    """The statements sent on the engine while counting (their first 60 characters)."""

    def __init__(self, engine):
        self.engine, self.sent = engine, []

    def _record(self, conn, cursor, statement, parameters, context, executemany):
        self.sent.append(" ".join(statement.split())[:60])

    def __enter__(self):
        event.listen(self.engine, "before_cursor_execute", self._record)
        return self

    def __exit__(self, *exc):
        event.remove(self.engine, "before_cursor_execute", self._record)


def test_plain_approval_writes_what_the_general_path_writes(client, ctx, tenant, agent, reviewer):
    plain = _stage(client, agent, "Ines prefers aisle seats on night trains.")
    general = _stage(client, agent, "Olaf prefers table seats on night trains.")  # not Ines's: retires nothing
    with _Statements(ctx.db.engine) as sent:
        fast = client.post(f"/v1/changes/{plain['change_id']}/approve", json={"reason": "checked"}, headers=reviewer)
    assert fast.status_code == 200, fast.text
    # The pre-built path: one locking read of the change, the reads that plan what approving retires
    # (the write's embedding, then the live memories it might replace), one statement for memory and change.
    touching = [s for s in sent.sent if "changes" in s or "memories" in s]
    assert touching[0].startswith("SELECT changes.id") and "went_live" in touching[-1], touching
    assert len(touching) <= 4, touching
    fingerprint = client.get(f"/v1/changes/{general['change_id']}/diff", headers=reviewer).json()["diff"]["fingerprint"]
    slow = client.post(f"/v1/changes/{general['change_id']}/approve",  # quoting the diff takes the general path
                       json={"reason": "checked", "seen_state": fingerprint}, headers=reviewer)
    assert slow.status_code == 200, slow.text

    outcomes = []
    for staged, response in ((plain, fast), (general, slow)):
        change_id, memory_id = staged["change_id"], staged["id"]
        body = assert_schema("change", response.json())
        assert body["status"] == "approved" and body["result"] == {"memory_id": memory_id}
        change, memory = _rows(ctx, tenant.id, change_id, memory_id)
        assert memory.status == "live" and memory.live_from is not None and memory.updated_at >= memory.live_from
        assert change["status"] == "approved" and change["decided_at"] is not None
        stored = {k: change[k] for k in ("status", "decided_by", "reason", "approvals", "result")}
        assert body["approvals"] == change["approvals"] and body["decided_by"] == change["decided_by"]
        outcomes.append(_normalised({
            "body": {k: v for k, v in body.items() if k not in ("submitted_at", "decided_at")},
            "stored": stored, "audit": _audit(ctx, tenant.id, change_id, memory_id),
            "events": _events(ctx, tenant.id, change_id, memory_id)}, change_id, memory_id))
    assert outcomes[0] == outcomes[1]
    assert [a[0] for a in outcomes[0]["audit"]] == [
        "change.proposed", "memory.staged", "memory.committed", "change.approved"]
    committed = outcomes[0]["audit"][2][2]
    assert committed["content_digest"] == "<varies>" and committed["metadata_keys"] == 2
    assert committed["tag_count"] == 2 and committed["edited"] is False
    assert [e[0] for e in outcomes[0]["events"]] == ["change.proposed", "memory.written", "change.approved"]
    again = client.post(f"/v1/changes/{plain['change_id']}/approve", json={}, headers=reviewer)
    assert assert_error(again, 409, "conflict")["details"]["reason"] == "already_decided"


def test_plain_approval_outside_the_keys_agents_or_tenant_is_404_and_writes_nothing(
        client, ctx, tenant, agent, make_key, make_tenant):
    staged = _stage(client, agent, "Jonas keeps his passport in the blue drawer.")
    other_agents = bearer(make_key(scopes="review:decide,memory:read", agents="agent-b*"))
    other_tenant = bearer(make_key(scopes="review:decide,memory:read", tenant_id=make_tenant().id))
    before = _rows(ctx, tenant.id, staged["change_id"], staged["id"])
    audit_before = _audit(ctx, tenant.id, staged["change_id"], staged["id"])
    for headers in (other_agents, other_tenant):
        response = client.post(f"/v1/changes/{staged['change_id']}/approve", json={}, headers=headers)
        assert_error(response, 404, "not_found")
    assert _rows(ctx, tenant.id, staged["change_id"], staged["id"]) == before
    assert before[0]["status"] == "pending" and before[1].status == "pending"
    assert _audit(ctx, tenant.id, staged["change_id"], staged["id"]) == audit_before


def test_two_plain_approvals_waiting_on_one_change_exactly_one_wins(committed_ctx):
    """Both approvals queue on the change's row lock (held by the test), then race for it."""
    from app.core.access import Principal
    from app.services.memory import remembering
    from app.services.tenancy.apikeys import create_key
    from app.services.tenancy.tenants import create_tenant

    ctx = committed_ctx
    tenant = create_tenant(ctx, name=unique("plain-race"), actor={"kind": "test", "id": "t"})
    key = create_key(ctx, tenant_id=tenant.id, scopes="memory:write", actor={"kind": "test", "id": "t"}).key
    staged = remembering.remember(ctx, Principal(tenant.id, key.id, frozenset(key.scopes), tuple(key.agents)), {
        "agent_id": "racer", "type": "semantic", "content": "Kira's locker code changes weekly.",
        "approval_required": True}).body
    change_id, memory_id = staged["change_id"], staged["id"]
    outcomes: dict[str, str] = {}

    def approve(who: str) -> None:
        try:
            review.decide(ctx, tenant_id=tenant.id, change_id=change_id, actor={"kind": "test", "id": who},
                          may_see=lambda agent_id: True, request=review.DecisionRequest(decision="approve"))
            outcomes[who] = "approved"
        except Conflict as error:
            outcomes[who] = f"conflict:{error.details['reason']}"

    with ctx.db.engine.connect() as holder:
        holder.execute(text("SELECT 1 FROM changes WHERE tenant_id = :t AND id = :c FOR UPDATE"),
                       {"t": tenant.id, "c": change_id})
        threads = [threading.Thread(target=approve, args=(who,)) for who in ("first", "second")]
        for thread in threads:
            thread.start()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            waiting = holder.execute(text(
                "SELECT count(*) FROM pg_locks WHERE NOT granted")).scalar()  # this run's own database
            if waiting >= 2:
                break
            time.sleep(0.02)
        assert waiting >= 2, "both approvals should be waiting on the change's row lock"
        holder.rollback()
    for thread in threads:
        thread.join(30)
    assert sorted(outcomes.values()) == ["approved", "conflict:already_decided"], outcomes
    winner = next(who for who, outcome in outcomes.items() if outcome == "approved")
    change, memory = _rows(ctx, tenant.id, change_id, memory_id)
    assert change["status"] == "approved" and change["decided_by"] == f"test:{winner}" and memory.status == "live"
    assert [a[0] for a in _audit(ctx, tenant.id, change_id, memory_id)] == [
        "change.proposed", "memory.staged", "memory.committed", "change.approved"]
    assert [e[0] for e in _events(ctx, tenant.id, change_id, memory_id)] == [
        "change.proposed", "memory.written", "change.approved"]
    assert ctx.audit.verify_database(ctx.db.sessions, f"tenant:{tenant.id}").ok
