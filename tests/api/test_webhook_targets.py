"""Webhook URLs: syntax-only checks at creation (no DNS on the request path), resolution and the
SSRF rule at each delivery, and delivery to the address that was checked."""

import socket

import httpx
import pytest
from starlette.testclient import TestClient

from app.main import create_app
from app.services.events import webhooks
from app.services.runtime.context import AppContext
from tests.harness import bearer


@pytest.fixture
def strict(ctx):
    """The app and context as deployed by default: private webhook targets refused."""
    strict_ctx = AppContext(ctx.settings.with_changes(webhook_allow_private=False), ctx.db)
    with TestClient(create_app(strict_ctx.settings, ctx=strict_ctx)) as client:
        yield strict_ctx, client


@pytest.fixture
def key(make_key):
    return bearer(make_key(scopes="memory:read,memory:write,events:read"))


def fake_dns(monkeypatch, answers: dict[str, str]):
    """getaddrinfo answering `answers` (name → address) and recording what was looked up."""
    looked_up = []

    def getaddrinfo(host, *args, **kwargs):
        looked_up.append(host)
        if host not in answers:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        family = socket.AF_INET6 if ":" in answers[host] else socket.AF_INET
        return [(family, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", (answers[host], 0))]

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return looked_up


def no_dns(*args, **kwargs):
    raise AssertionError("webhook creation must not resolve the host")


def test_create_checks_syntax_only_and_never_resolves(strict, key, monkeypatch):
    _, client = strict
    monkeypatch.setattr(socket, "getaddrinfo", no_dns)
    created = client.post("/v1/webhooks", json={"url": "https://hooks.does-not-resolve.invalid/in"}, headers=key)
    assert created.status_code == 201, created.text
    refused = {
        "http://user:secret@hooks.example.com/x": "credentials",
        "http://10.1.2.3/x": "non-public", "http://[fd00::1]:8080/x": "non-public",
        "http://169.254.169.254/latest/meta-data": "non-public", "http://localhost:9/x": "non-public",
        "http://api.localhost/x": "non-public", "ftp://example.com/x": "http", "http://": "http",
        "http://[": "host", "http://exa mple.com/": "host", "http://a:99999/": "port", "http://a:-1/": "port",
        "http://a:0/": "port",
    }
    for url, reason in refused.items():
        response = client.post("/v1/webhooks", json={"url": url}, headers=key)
        assert response.status_code == 422, (url, response.text)
        assert response.json()["error"]["details"][0]["path"] == "/url"
        assert reason in response.text, (url, response.text)
    assert client.post("/v1/webhooks", json={"url": "http://93.184.216.34/x"}, headers=key).status_code == 201


def _deliver_one(ctx, client, key, monkeypatch, answers, url="http://hooks.example.test:8080/in?t=1"):
    monkeypatch.setattr(socket, "getaddrinfo", no_dns)
    hook = client.post("/v1/webhooks", json={"url": url}, headers=key)
    assert hook.status_code == 201, hook.text
    written = client.post("/v1/memories/remember", headers=key,
                          json={"agent_id": "a1", "type": "semantic", "content": "Webhook target drill."})
    assert written.status_code == 201, written.text
    looked_up = fake_dns(monkeypatch, answers)
    sent = []
    transport = httpx.MockTransport(lambda request: sent.append(request) or httpx.Response(204))
    assert webhooks.deliver_due(ctx, transport=transport) == 1
    log = client.get(f"/v1/webhooks/{hook.json()['id']}/deliveries", headers=key).json()["items"]
    return looked_up, sent, log[0]


def test_delivery_to_a_host_resolving_to_a_private_address_is_refused(strict, key, monkeypatch):
    ctx, client = strict
    looked_up, sent, delivery = _deliver_one(ctx, client, key, monkeypatch, {"hooks.example.test": "10.0.0.7"})
    assert looked_up == ["hooks.example.test"] and sent == []  # resolved at delivery, nothing POSTed
    assert delivery["status"] == "pending" and delivery["error"] == "refused_address"


def test_delivery_connects_to_the_checked_address_with_the_original_host_name(strict, key, monkeypatch):
    ctx, client = strict
    looked_up, sent, delivery = _deliver_one(ctx, client, key, monkeypatch, {"hooks.example.test": "93.184.216.34"})
    assert looked_up == ["hooks.example.test"] and delivery["status"] == "delivered"
    [request] = sent  # no second look-up between the check and the connection
    assert str(request.url) == "http://93.184.216.34:8080/in?t=1"
    assert request.headers["host"] == "hooks.example.test:8080"
    assert request.extensions["sni_hostname"] == "hooks.example.test"
    assert request.headers[webhooks.SIGNATURE_HEADER].startswith("sha256=")
