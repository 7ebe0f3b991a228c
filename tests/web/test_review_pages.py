"""Reviewer pages through the real app: sign-in, queue, diff, decisions, CSRF, tenant walls."""

import re

import pytest
from sqlalchemy import text

from app.services.users import create_user
from tests.harness import bearer, csrf_token_in, web_sign_in

PASSWORD = "correct horse battery"


_csrf = csrf_token_in


def _sign_in(client, username, password=PASSWORD, next_url="/review"):
    return web_sign_in(client, username, password, next_url)


@pytest.fixture
def reviewer(ctx, tenant):
    return create_user(ctx, username=f"rev-{tenant.name}", password=PASSWORD, tenant_id=tenant.id, role="reviewer",
                       actor={"kind": "test", "id": "t"})


@pytest.fixture
def staged(client, make_key):
    headers = bearer(make_key())
    client.post("/v1/memories/remember", json={"agent_id": "helper", "type": "semantic",
                                                "content": "Nora's desk is on floor 3."}, headers=headers)
    response = client.post("/v1/memories/remember", json={"agent_id": "helper", "type": "semantic",
                                                           "content": "Nora's desk is on floor 5.",
                                                           "approval_required": True}, headers=headers)
    return response.json()


def test_pages_redirect_to_login_and_back(client, reviewer):
    response = client.get("/review", follow_redirects=False)
    assert response.status_code == 303 and response.headers["location"].startswith("/login?next=/review")
    signed = _sign_in(client, reviewer.username)
    assert signed.status_code == 303 and signed.headers["location"] == "/review"
    assert "mw_session=" in signed.headers["set-cookie"] and "HttpOnly" in signed.headers["set-cookie"]


def test_wrong_password_fails_and_is_throttled_and_audited(client, ctx, reviewer, tenant):
    for _ in range(5):
        assert _sign_in(client, reviewer.username, "wrong password!!").status_code == 422
    throttled = _sign_in(client, reviewer.username)  # even the right password, for now
    assert throttled.status_code == 429 and "too many" in throttled.text
    with ctx.db.sessions() as session:
        events = session.execute(text("SELECT event_type FROM audit_entries WHERE tenant_id = :t "
                                      "AND event_type LIKE 'auth.%' ORDER BY seq"), {"t": tenant.id}).scalars().all()
    assert events == ["auth.sign_in_failed"] * 5 + ["auth.sign_in_throttled"]


def test_open_redirects_are_refused(client, reviewer):
    assert _sign_in(client, reviewer.username, next_url="//evil.example/x").headers["location"] == "/review"


def test_queue_detail_and_approve_via_form(client, reviewer, staged):
    _sign_in(client, reviewer.username)
    queue = client.get("/review")
    assert f'data-change-id="{staged["change_id"]}"' in queue.text and 'data-testid="change-row"' in queue.text
    detail = client.get(f"/review/{staged['change_id']}")
    assert 'data-testid="diff"' in detail.text and "floor 3" in detail.text and "floor 5" in detail.text
    fingerprint = re.search(r'name="seen_state" value="([0-9a-f]+)"', detail.text).group(1)
    decided = client.post(f"/review/{staged['change_id']}/approve",
                          data={"csrf_token": _csrf(detail.text), "seen_state": fingerprint},
                          headers={"HX-Request": "true"})
    assert decided.status_code == 200 and 'data-status="approved"' in decided.text


def test_decision_without_csrf_token_is_refused(client, reviewer, staged):
    _sign_in(client, reviewer.username)
    response = client.post(f"/review/{staged['change_id']}/approve", data={})
    assert response.status_code == 403
    assert client.get(f"/v1/changes/{staged['change_id']}", headers={}).status_code == 401


def test_viewer_cannot_decide_and_other_tenants_change_is_404(client, ctx, tenant, make_tenant, staged):
    create_user(ctx, username="viewer-1", password=PASSWORD, tenant_id=tenant.id, role="viewer",
                actor={"kind": "test", "id": "t"})
    other = make_tenant()
    create_user(ctx, username="outsider-1", password=PASSWORD, tenant_id=other.id, role="admin",
                actor={"kind": "test", "id": "t"})
    _sign_in(client, "viewer-1")
    detail = client.get(f"/review/{staged['change_id']}")
    assert detail.status_code == 200 and 'data-testid="approve"' not in detail.text
    assert client.post(f"/review/{staged['change_id']}/approve", data={"csrf_token": _csrf(detail.text)}
                       ).status_code == 404
    client.cookies.clear()
    _sign_in(client, "outsider-1")
    assert client.get(f"/review/{staged['change_id']}").status_code == 404
    assert staged["change_id"] not in client.get("/review").text


def test_agent_allow_list_hides_changes_from_a_reviewer(client, ctx, tenant, staged):
    create_user(ctx, username="narrow-1", password=PASSWORD, tenant_id=tenant.id, role="reviewer",
                agents="billing-*", actor={"kind": "test", "id": "t"})
    _sign_in(client, "narrow-1")
    assert staged["change_id"] not in client.get("/review").text
    assert client.get(f"/review/{staged['change_id']}").status_code == 404


def test_sign_out_everywhere_revokes_every_session(client, reviewer):
    from starlette.testclient import TestClient

    _sign_in(client, reviewer.username)
    other = TestClient(client.app)
    _sign_in(other, reviewer.username)
    assert other.get("/review", follow_redirects=False).status_code == 200
    page = client.get("/review")
    client.post("/logout", data={"csrf_token": _csrf(page.text), "everywhere": "1"})
    assert other.get("/review", follow_redirects=False).status_code == 303
