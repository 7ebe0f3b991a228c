"""API keys at the boundary: 401 vs 403, revocation, tenant from the key (contract §2)."""

from app.core.access import parse_token
from app.services.tenancy.apikeys import revoke_key
from tests.harness import bearer
from tests.schema_check import assert_error


def test_missing_credentials_is_401_with_challenge(client):
    response = client.get("/v1/whoami")
    assert_error(response, 401, "unauthorized")
    assert response.headers["www-authenticate"].startswith("Bearer")


def test_malformed_and_unknown_tokens_are_401(client, make_key):
    token = make_key()
    for bad in ["nonsense", token[:-1] + ("A" if token[-1] != "A" else "B"), "Basic " + token]:
        headers = {"Authorization": bad if bad.startswith("Basic") else f"Bearer {bad}"}
        assert_error(client.get("/v1/whoami", headers=headers), 401, "unauthorized")


def test_whoami_reports_the_keys_tenant_scopes_and_agents(client, make_key, tenant):
    token = make_key(scopes="memory:read", agents="support-*,billing")
    body = client.get("/v1/whoami", headers=bearer(token)).json()
    assert body == {"tenant_id": tenant.id, "key_id": body["key_id"], "scopes": ["memory:read"],
                    "agents": ["support-*", "billing"]}
    assert body["key_id"].startswith("key_") and body["key_id"] in token


def test_scope_not_granted_is_403(client, make_key):
    token = make_key(scopes="memory:read")
    assert_error(client.get("/v1/audit/export", headers=bearer(token)), 403, "forbidden")


def test_revoked_key_is_refused_at_once(client, ctx, make_key, tenant):
    token = make_key(scopes="memory:read")
    assert client.get("/v1/whoami", headers=bearer(token)).status_code == 200
    key_id = parse_token(token)
    revoke_key(ctx, tenant_id=tenant.id, key_id=key_id, actor={"kind": "test", "id": "t"})
    assert_error(client.get("/v1/whoami", headers=bearer(token)), 401, "unauthorized")


def test_a_key_cannot_be_revoked_through_another_tenant(ctx, make_key, make_tenant):
    import pytest

    from app.errors import NotFound

    other = make_tenant()
    token = make_key()
    key_id = parse_token(token)
    with pytest.raises(NotFound):
        revoke_key(ctx, tenant_id=other.id, key_id=key_id, actor={"kind": "test", "id": "t"})


def test_rate_limit_returns_429_with_retry_after(ctx, make_key):
    from starlette.testclient import TestClient

    from app.main import create_app

    token = make_key()
    app = create_app(ctx.settings.with_changes(rate_limit_per_minute=3), ctx=ctx)
    with TestClient(app) as limited:
        codes = [limited.get("/v1/whoami", headers=bearer(token)).status_code for _ in range(4)]
        assert codes == [200, 200, 200, 429]
        response = limited.get("/v1/whoami", headers=bearer(token))
        assert_error(response, 429, "rate_limited")
        assert int(response.headers["retry-after"]) >= 1


# Remember and recall verify the key in the same thread-pool hop as their service (one trip, not
# two): the refusals must come in the order the middleware gives them everywhere else.

BAD_BODY = {"agent_id": 7}  # fails the request schema


def test_one_hop_routes_refuse_a_bad_key_before_reading_a_bad_body(client, make_key):
    token = make_key()
    forged = token[:-1] + ("A" if token[-1] != "A" else "B")
    for path in ("/v1/memories/remember", "/v1/memories/recall"):
        response = client.post(path, json=BAD_BODY, headers=bearer(forged))
        assert_error(response, 401, "unauthorized")
        assert response.headers["www-authenticate"].startswith("Bearer")
        unsupported = client.post(path, content=b"<x/>", headers={**bearer(forged), "content-type": "text/xml"})
        assert_error(unsupported, 401, "unauthorized")


def test_one_hop_routes_check_the_scope_before_the_body(client, make_key):
    read_only, write_only = make_key(scopes="memory:read"), make_key(scopes="memory:write")
    assert_error(client.post("/v1/memories/remember", json=BAD_BODY, headers=bearer(read_only)), 403, "forbidden")
    assert_error(client.post("/v1/memories/recall", json=BAD_BODY, headers=bearer(write_only)), 403, "forbidden")
    assert client.post("/v1/memories/recall", json=BAD_BODY, headers=bearer(read_only)).status_code == 422
    assert client.post("/v1/memories/recall", json={"agent_id": "a", "query": "q"},
                       headers=bearer(read_only)).status_code == 200


def test_one_hop_routes_rate_limit_with_retry_after(ctx, make_key):
    from starlette.testclient import TestClient

    from app.main import create_app

    token = make_key()
    app = create_app(ctx.settings.with_changes(rate_limit_per_minute=2), ctx=ctx)
    body = {"agent_id": "a", "query": "where?"}
    with TestClient(app) as limited:
        codes = [limited.post("/v1/memories/recall", json=body, headers=bearer(token)).status_code for _ in range(3)]
        assert codes == [200, 200, 429]
        response = limited.post("/v1/memories/recall", json=body, headers=bearer(token))
        assert_error(response, 429, "rate_limited")
        assert int(response.headers["retry-after"]) >= 1
