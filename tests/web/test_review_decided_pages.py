"""Decided changes, reopened: the page shows what its reviewer saw, whichever path decided it."""

import pytest

from app.services.tenancy.users import create_user
from tests.harness import bearer, web_sign_in

PASSWORD = "correct horse battery"


@pytest.fixture
def signed_in(client, ctx, tenant):
    user = create_user(ctx, username=f"dec-{tenant.name}", password=PASSWORD, tenant_id=tenant.id,
                       role="reviewer", actor={"kind": "test", "id": "t"})
    web_sign_in(client, user.username, PASSWORD, "/review")
    return user


def _stage(client, headers, content, **extra):
    response = client.post("/v1/memories/remember", json={"agent_id": "helper", "type": "semantic",
                                                           "content": content, "approval_required": True, **extra},
                           headers=headers)
    assert response.status_code == 202, response.text
    return response.json()


def test_a_change_approved_without_a_diff_reopens_with_what_was_proposed(client, make_key, signed_in):
    agent, key = bearer(make_key()), bearer(make_key(scopes="review:decide,memory:read"))
    staged = _stage(client, agent, "Otto's <script>alert(1)</script> bike is red.")
    assert client.post(f"/v1/changes/{staged['change_id']}/approve", json={}, headers=key).status_code == 200
    page = client.get(f"/review/{staged['change_id']}")
    assert page.status_code == 200, page.text
    assert 'data-testid="as-decided"' in page.text and "the approval quoted no diff" in page.text
    assert "Otto&#39;s &lt;script&gt;alert(1)&lt;/script&gt; bike is red." in page.text
    assert "<script>alert(1)" not in page.text
    assert f'href="/memories/{staged["id"]}"' in page.text


def test_a_hard_deleted_memory_leaves_no_copy_on_the_decided_page(client, make_key, signed_in):
    agent, key = bearer(make_key()), bearer(make_key(scopes="review:decide,memory:read"))
    staged = _stage(client, agent, "Otto's locker code is 9911.")
    client.post(f"/v1/changes/{staged['change_id']}/approve", json={}, headers=key)
    erase = client.post("/v1/memories/forget", json={"agent_id": "helper", "ids": [staged["id"]],
                                                     "hard_delete": True, "approval_required": True}, headers=agent)
    decided = client.post(f"/v1/changes/{erase.json()['change_id']}/approve", json={"confirm_risk": True},
                          headers=key)
    assert decided.status_code == 200, decided.text
    page = client.get(f"/review/{staged['change_id']}")
    assert page.status_code == 200 and "locker code" not in page.text  # words: digits also occur in timestamps
    assert 'data-testid="decided-erased"' in page.text


def test_a_write_a_learned_rule_approved_names_the_rule_and_links_its_memory(client, ctx, tenant, make_key, signed_in):
    from app.services.tenancy.tenant_config import set_policy

    provenance = {"kind": "learned", "suggestion_id": "sug_abc123", "accepted_by": "user:usr_1",
                  "accepted_at": "2026-11-25T04:00:00Z", "evidence": {"decisions": 25, "rejected": 0}}
    set_policy(ctx, tenant_id=tenant.id, actor={"kind": "test", "id": "t"}, doc={"rules": [
        {"id": "learned-faq", "match": {"operations": ["remember"], "agents": ["helper"], "tags_any": ["faq"]},
         "action": "allow",
         "provenance": provenance},
        {"id": "review-all", "match": {"operations": ["remember"]}, "action": "require_approval"}]})
    written = client.post("/v1/memories/remember", headers=bearer(make_key()), json={
        "agent_id": "helper", "type": "semantic", "content": "The desk opens at 9.", "tags": ["faq"]})
    assert written.status_code == 201, written.text
    log = client.get("/v1/changes", params={"status": "approved"}, headers=bearer(make_key(scopes="memory:read")))
    change_id = log.json()["items"][0]["id"]
    page = client.get(f"/review/{change_id}")
    assert page.status_code == 200, page.text
    assert f'href="/memories/{written.json()["id"]}"' in page.text and "/memories/None" not in page.text
    decided_by = page.text.split('data-testid="decided-by">', 1)[1].split("</dd>", 1)[0]
    assert "learned rule" in decided_by and "learned-faq" in decided_by and "learned_rule:" not in decided_by
