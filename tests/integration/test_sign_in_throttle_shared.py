"""Sign-in throttling state is shared between processes: failures counted by a real `serve`
process hold back the same client in another process, and only that client."""

import time

import httpx
from starlette.testclient import TestClient

from app.main import create_app
from app.services.tenancy.users import create_user
from tests.harness import csrf_token_in, unique

PASSWORD = "correct horse battery"


def _attempt(browser, username, password):
    token = csrf_token_in(browser.get("/login").text)
    return browser.post("/login", data={"username": username, "password": password, "csrf_token": token},
                        follow_redirects=False)


def test_failures_on_the_server_throttle_the_same_client_here(live_server, live_tenant, committed_ctx):
    username = unique("shared")
    create_user(committed_ctx, username=username, password=PASSWORD, tenant_id=live_tenant.id, role="viewer",
                actor={"kind": "test", "id": "pytest"})
    app = create_app(committed_ctx.settings, ctx=committed_ctx)  # this process, same database
    same_client = TestClient(app, base_url="http://testserver", client=("127.0.0.1", 45000))
    other_client = TestClient(app, base_url="http://testserver", client=("192.0.2.77", 45000))
    here_token = csrf_token_in(same_client.get("/login").text)

    with httpx.Client(base_url=live_server, timeout=30) as server_browser:  # from 127.0.0.1
        for _ in range(5):
            assert _attempt(server_browser, username, "wrong-password-1").status_code == 422
        time.sleep(1.1)  # let the 1 s back-off pass; the next failure earns 2 s
        assert _attempt(server_browser, username, "wrong-password-1").status_code == 422

    refused = same_client.post("/login", data={"username": username, "password": PASSWORD,
                                               "csrf_token": here_token})
    assert refused.status_code == 429 and refused.headers["retry-after"] in ("1", "2")
    assert _attempt(other_client, username, PASSWORD).status_code == 303
