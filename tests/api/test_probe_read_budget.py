"""An attacker with one `memory:read,memory:write` key and a spent read budget tries to read the
agent's memories anyway, through the review surface: a staged expire, forget or merge (whose diff
quotes every memory it would touch) and a staged remember (whose diff quotes its nearest live
neighbours). Each try must answer 429 `read_budget_exceeded` with none of the content, and the
access log must name only what the key was really given."""

import time

from sqlalchemy import text

from app.services.tenancy.tenant_config import set_read_budget
from tests.harness import bearer
from tests.schema_check import assert_error

ACTOR = {"kind": "test", "id": "pytest"}
AGENT = "reader-1"
MARKER = "harbour-ledger"
COUNT = 40


def _seed(client, headers) -> list[str]:
    ids = []
    for i in range(COUNT):
        response = client.post("/v1/memories/remember", headers=headers, json={
            "agent_id": AGENT, "type": "semantic", "metadata": {"batch": "probe"},
            "content": f"The {MARKER} entry {i}: berth {i} pays {100 + i} crowns a month."})
        assert response.status_code == 201, response.text
        ids.append(response.json()["id"])
    return ids


def _attacker(client, ctx, tenant, make_key):
    """A key with a budget of 5 that has spent it: the direct read of a sixth memory is refused."""
    set_read_budget(ctx, tenant_id=tenant.id, actor=ACTOR, per_key=5)
    token = make_key(scopes="memory:read,memory:write")
    key = bearer(token)
    ids = _seed(client, key)
    first = client.get("/v1/memories", params={"agent_id": AGENT, "limit": 5}, headers=key)
    assert first.status_code == 200 and len(first.json()["items"]) == 5
    assert_error(client.get("/v1/memories", params={"agent_id": AGENT, "limit": 6}, headers=key), 429,
                 "read_budget_exceeded")
    return key, "_".join(token.split("_")[1:3]), ids


def _read_ids(ctx, tenant_id: str, key_id: str) -> set[str]:
    with ctx.db.sessions() as session:
        got = session.execute(text("SELECT array_agg(DISTINCT m) FROM read_records r, unnest(r.memory_ids) m "
                                   "WHERE r.tenant_id = :t AND r.key_id = :k"), {"t": tenant_id, "k": key_id}).scalar()
    return set(got or [])


def _diff_refused(client, key, change_id: str) -> None:
    response = client.get(f"/v1/changes/{change_id}/diff", headers=key)
    assert_error(response, 429, "read_budget_exceeded")
    assert MARKER not in response.text
    assert response.headers.get("retry-after")


def _withdraw(client, key, change_id: str) -> None:
    assert client.post(f"/v1/changes/{change_id}/withdraw", headers=key).status_code == 200


def test_a_staged_expire_diff_reads_nothing_past_the_budget(client, ctx, tenant, make_key):
    key, key_id, _ = _attacker(client, ctx, tenant, make_key)
    time.sleep(1)  # older_than_days 0.00001 is under a second: every seeded memory matches
    staged = client.post("/v1/memories/expire", headers=key, json={
        "agent_id": AGENT, "approval_required": True, "policy": {"older_than_days": 0.00001}})
    assert staged.status_code == 202, staged.text
    assert staged.json()["matched"] == COUNT
    change_id = staged.json()["change_id"]
    _diff_refused(client, key, change_id)
    # The change itself names ids only; it is no way around the budget either.
    change = client.get(f"/v1/changes/{change_id}", headers=key)
    assert change.status_code == 200 and MARKER not in change.text
    _withdraw(client, key, change_id)
    assert len(_read_ids(ctx, tenant.id, key_id)) == 5


def test_a_staged_forget_diff_reads_nothing_past_the_budget(client, ctx, tenant, make_key):
    key, key_id, _ = _attacker(client, ctx, tenant, make_key)
    staged = client.post("/v1/memories/forget", headers=key, json={
        "agent_id": AGENT, "approval_required": True, "filter": {"batch": "probe"}})
    assert staged.status_code == 202, staged.text
    _diff_refused(client, key, staged.json()["change_id"])
    _withdraw(client, key, staged.json()["change_id"])
    assert len(_read_ids(ctx, tenant.id, key_id)) == 5


def test_a_staged_merge_diff_reads_nothing_past_the_budget(client, ctx, tenant, make_key):
    key, key_id, ids = _attacker(client, ctx, tenant, make_key)
    unread = [i for i in ids if i not in _read_ids(ctx, tenant.id, key_id)]
    staged = client.post("/v1/memories/merge", headers=key, json={
        "agent_id": AGENT, "approval_required": True, "canonical": unread[0], "duplicates": unread[1:4],
        "strategy": "merge_content"})
    assert staged.status_code == 202, staged.text
    _diff_refused(client, key, staged.json()["change_id"])
    _withdraw(client, key, staged.json()["change_id"])
    assert len(_read_ids(ctx, tenant.id, key_id)) == 5


def test_a_staged_remember_shows_its_own_content_but_no_neighbour_past_the_budget(client, ctx, tenant, make_key):
    key, key_id, _ = _attacker(client, ctx, tenant, make_key)
    staged = client.post("/v1/memories/remember", headers=key, json={
        "agent_id": AGENT, "type": "semantic", "approval_required": True,
        "content": f"The {MARKER} entry: which berth pays how many crowns a month?"})
    assert staged.status_code == 202, staged.text
    change_id = staged.json()["change_id"]
    _diff_refused(client, key, change_id)
    # What the key itself proposed is no read of anyone's memory: it stays visible.
    mine = client.get(f"/v1/changes/{change_id}", headers=key)
    assert mine.status_code == 200 and "which berth pays" in mine.json()["proposed"]["content"]
    _withdraw(client, key, change_id)
    assert len(_read_ids(ctx, tenant.id, key_id)) == 5


def test_within_the_budget_a_diff_is_answered_and_recorded(client, ctx, tenant, make_key):
    set_read_budget(ctx, tenant_id=tenant.id, actor=ACTOR, per_key=50)
    token = make_key(scopes="memory:read,memory:write")
    key, key_id = bearer(token), "_".join(token.split("_")[1:3])
    ids = _seed(client, key)[:3]
    staged = client.post("/v1/memories/forget", headers=key, json={
        "agent_id": AGENT, "approval_required": True, "ids": ids})
    diff = client.get(f"/v1/changes/{staged.json()['change_id']}/diff", headers=key)
    assert diff.status_code == 200 and MARKER in diff.text
    assert _read_ids(ctx, tenant.id, key_id) == set(ids)
