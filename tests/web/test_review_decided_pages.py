"""Decided changes, reopened: the page shows what its reviewer saw, whichever path decided it."""

import pytest

from app.services.users import create_user
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
    decided = client.post(f"/v1/changes/{erase.json()['change_id']}/approve", json={}, headers=key)
    assert decided.status_code == 200, decided.text
    page = client.get(f"/review/{staged['change_id']}")
    assert page.status_code == 200 and "9911" not in page.text
    assert 'data-testid="decided-erased"' in page.text
