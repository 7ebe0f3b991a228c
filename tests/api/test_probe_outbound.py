"""An attacker's probe of the outbound rule: a tenant admin (or a tenant's API key) tries to make
the server connect to loopback through a memory backend or a webhook, with every spelling of
127.0.0.1 the C library's resolver accepts, IPv6 forms that carry it, a name that resolves to it,
a name that rebinds to it between look-ups, and a redirect to it. A real listener on 127.0.0.1
stands for the internal service: it must never see a connection. And a failing backend's answer
must never reach the tenant in a recall."""

from __future__ import annotations

import socket
import threading

import httpx
import pytest
from sqlalchemy import update
from starlette.testclient import TestClient

from app.core.timefmt import utcnow
from app.db.models import BackendDelivery
from app.errors import ValidationFailed
from app.services.runtime.outbound import OutboundRule, RefusedAddress, outbound_client, url_refusal
from app.main import create_app
from app.services.router import backends
from app.services.events import webhooks
from app.services.runtime.context import AppContext
from app.services.tenancy.users import create_user
from tests.harness import bearer, csrf_token_in, web_sign_in

PASSWORD = "correct horse battery"
HX = {"HX-Request": "true"}
API_KEY = "mw_key_0123456789abcdefghijklmnop_thisIsTheOtherServersKeyNeverShown0000"
ACTOR = {"kind": "test", "id": "probe"}
LOOPBACK_SPELLINGS = ["127.1", "2130706433", "0x7f000001", "0", "2852039166", "[64:ff9b::7f00:1]",
                      "[::ffff:127.0.0.1]", "0177.0.0.1"]
PUBLIC = "93.184.216.34"  # stands for an address on the internet (unreachable from the test box)
_real_getaddrinfo = socket.getaddrinfo


class Listener:
    """The internal service on 127.0.0.1: records every connection it accepts and answers each
    request with `response`."""

    def __init__(self, response: bytes = b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\n{}",
                 host: str = "127.0.0.1"):
        self.response = response
        self.connections: list[bytes] = []
        self.sock = socket.socket()
        self.sock.bind((host, 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                conn.settimeout(2)
                try:
                    data = conn.recv(65536)
                except OSError:
                    data = b""
                self.connections.append(data)
                try:
                    conn.sendall(self.response)
                except OSError:
                    pass

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def listener():
    server = Listener()
    yield server
    server.close()


def fake_dns(monkeypatch, answers: dict[str, list[str]]) -> list[str]:
    """getaddrinfo answering each name in `answers` with its next address (the last one repeats),
    every other host as the real resolver does (IP literals among them); returns the names looked up."""
    looked_up: list[str] = []

    def getaddrinfo(host, port=None, *args, **kwargs):
        if host not in answers:
            return _real_getaddrinfo(host, port, *args, **kwargs)
        looked_up.append(host)
        queue = answers[host]
        address = queue.pop(0) if len(queue) > 1 else queue[0]
        family = socket.AF_INET6 if ":" in address else socket.AF_INET
        return [(family, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", (address, port or 0))]

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return looked_up


@pytest.fixture
def strict(ctx):
    """The server as deployed by default: no switch allows private targets; retries due at once."""
    settings = ctx.settings.with_changes(webhook_allow_private=False, backend_allow_private=False,
                                         oidc_allow_private=False, backend_retry_base_seconds=0.0)
    strict_ctx = AppContext(settings, ctx.db)
    with TestClient(create_app(settings, ctx=strict_ctx)) as client:
        yield strict_ctx, client


def _admin(ctx, client, tenant) -> str:
    """Sign a tenant admin in on `client`; returns the page's CSRF token."""
    admin = create_user(ctx, username=f"probe-{tenant.name}", password=PASSWORD, tenant_id=tenant.id, role="admin",
                        actor=ACTOR)
    assert web_sign_in(client, admin.username, PASSWORD, "/admin").status_code == 303
    return csrf_token_in(client.get("/admin").text)


def _remember(client, key: str, text: str = "The launch code is in the blue binder.") -> str:
    written = client.post("/v1/memories/remember", headers=bearer(key),
                          json={"agent_id": "bot-1", "type": "semantic", "content": text})
    assert written.status_code == 201, written.text
    return written.json()["id"]


def _deliver_all(ctx) -> None:
    """Two delivery rounds, the retry made due in between (a rebinding name answers anew each time)."""
    backends.deliver_due(ctx)
    with ctx.db.sessions.begin() as session:
        session.execute(update(BackendDelivery).values(next_attempt_at=utcnow()))
    backends.deliver_due(ctx)


@pytest.mark.parametrize("host", LOOPBACK_SPELLINGS)
def test_every_spelling_of_loopback_is_refused_when_a_backend_or_webhook_is_added(strict, tenant, make_key, host):
    ctx, client = strict
    url = f"http://{host}:8080"
    token = _admin(ctx, client, tenant)
    form = client.post("/admin/backends", headers=HX, data={"csrf_token": token, "name": "probe", "url": url,
                                                            "api_key": API_KEY})
    assert form.status_code == 422, (url, form.text)
    assert 'data-testid="backend-list-empty"' in form.text
    with pytest.raises(ValidationFailed):  # the operator's CLI path: the same rule
        backends.add_backend(ctx, tenant_name=tenant.name, name="probe-cli", kind="memwarden",
                             options={"url": url}, secret=API_KEY, actor=ACTOR)
    hook = client.post("/v1/webhooks", json={"url": url + "/hook"},
                       headers=bearer(make_key(scopes="events:read")))
    assert hook.status_code == 422, (url, hook.text)
    assert hook.json()["error"]["details"][0]["path"] == "/url"


def test_a_name_resolving_to_loopback_is_refused_at_each_connection(strict, tenant, make_key, listener, monkeypatch):
    ctx, client = strict
    fake_dns(monkeypatch, {"loopback-alias.test": ["127.0.0.1"]})
    url = f"http://loopback-alias.test:{listener.port}"
    backends.add_backend(ctx, tenant_name=tenant.name, name="alias", kind="memwarden", options={"url": url},
                         secret=API_KEY, timeout_ms=500, actor=ACTOR)
    key = make_key(scopes="memory:read,memory:write,events:read")
    hook = client.post("/v1/webhooks", json={"url": url + "/hook"}, headers=bearer(key))
    assert hook.status_code == 201  # a name is resolved when connecting, never when configuring
    memory_id = _remember(client, key)
    _deliver_all(ctx)
    webhooks.deliver_due(ctx)
    recall = client.post("/v1/memories/recall", headers=bearer(key), json={"agent_id": "bot-1", "query": "launch code"})
    assert listener.connections == []
    assert recall.json()["stores_failed"] == [{"store": "alias", "error": "refused_address"}]
    [delivery] = client.get(f"/v1/memories/{memory_id}/deliveries", headers=bearer(key)).json()["deliveries"]
    assert delivery["error"] == "refused_address" and delivery["status"] == "pending"
    log = client.get(f"/v1/webhooks/{hook.json()['id']}/deliveries", headers=bearer(key)).json()["items"]
    assert {d["error"] for d in log} == {"refused_address"}


def test_a_name_rebinding_to_loopback_never_reaches_it(strict, tenant, make_key, listener, monkeypatch):
    """First answer public (it passes), every later one loopback: each connection resolves once
    and connects to what it checked, so no look-up after the check can move it to 127.0.0.1."""
    ctx, client = strict
    looked_up = fake_dns(monkeypatch, {"rebind.test": [PUBLIC, "127.0.0.1"]})
    backends.add_backend(ctx, tenant_name=tenant.name, name="rebind", kind="memwarden",
                         options={"url": f"http://rebind.test:{listener.port}"}, secret=API_KEY, timeout_ms=300,
                         actor=ACTOR)
    key = make_key()
    memory_id = _remember(client, key)
    _deliver_all(ctx)
    client.post("/v1/memories/recall", headers=bearer(key), json={"agent_id": "bot-1", "query": "launch code"})
    assert len(looked_up) >= 2 and listener.connections == []
    [delivery] = client.get(f"/v1/memories/{memory_id}/deliveries", headers=bearer(key)).json()["deliveries"]
    assert delivery["error"] == "refused_address"


def test_a_redirect_to_loopback_is_not_followed(strict, tenant, make_key, listener, monkeypatch):
    """A backend on the internet (here 127.0.0.2, which the rule is told to take for a public
    address) answers every request with a redirect to the internal service."""
    from app.core import addresses
    from app.services.runtime import outbound

    internet = "127.0.0.2"
    monkeypatch.setattr(outbound, "is_denied", lambda a: str(a) != internet and addresses.is_denied(a))
    redirector = Listener(f"HTTP/1.1 307 Temporary Redirect\r\nConnection: close\r\n"
                          f"Location: http://127.0.0.1:{listener.port}/v1/memories/remember\r\n"
                          "Content-Length: 0\r\n\r\n".encode(), host=internet)
    try:
        fake_dns(monkeypatch, {"redirector.test": [internet]})
        ctx, client = strict
        backends.add_backend(ctx, tenant_name=tenant.name, name="hop", kind="memwarden",
                             options={"url": f"http://redirector.test:{redirector.port}"}, secret=API_KEY,
                             timeout_ms=2000, actor=ACTOR)
        key = make_key()
        memory_id = _remember(client, key)
        backends.deliver_due(ctx)
        assert redirector.connections and listener.connections == []
        [delivery] = client.get(f"/v1/memories/{memory_id}/deliveries", headers=bearer(key)).json()["deliveries"]
        assert delivery["error"] == "http_307"
        # A client that does follow redirects is still refused at the hop: each request is checked.
        with httpx.Client(transport=outbound.OutboundTransport(outbound.OutboundRule.for_backends(ctx.settings)),
                          follow_redirects=True, timeout=2) as http:
            with pytest.raises(outbound.RefusedAddress):
                http.post(f"http://redirector.test:{redirector.port}/v1/memories/remember", content=b"{}")
        assert listener.connections == []
    finally:
        redirector.close()


def test_a_failing_backend_answer_never_reaches_the_recall(ctx, client, tenant, make_key):
    """Even with the operator's switch on (the backend is on their network), what the backend
    answered stays in the server's log: the recall names the store and a fixed word only."""
    body = b'{"error": {"code": "internal", "message": "SECRET-BANNER redis 10.0.0.3:6379 down"}}'
    failing = Listener(b"HTTP/1.1 502 Bad Gateway\r\nConnection: close\r\nContent-Type: application/json\r\n"
                       b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
    try:
        backends.add_backend(ctx, tenant_name=tenant.name, name="down", kind="memwarden",
                             options={"url": f"http://127.0.0.1:{failing.port}"}, secret=API_KEY, timeout_ms=2000,
                             actor=ACTOR)
        key = make_key()
        memory_id = _remember(client, key)
        backends.deliver_due(ctx)
        recall = client.post("/v1/memories/recall", headers=bearer(key),
                             json={"agent_id": "bot-1", "query": "launch code"})
        assert recall.status_code == 200 and failing.connections
        assert recall.json()["stores_failed"] == [{"store": "down", "error": "http_502"}]
        deliveries = client.get(f"/v1/memories/{memory_id}/deliveries", headers=bearer(key))
        assert deliveries.json()["deliveries"][0]["error"] == "http_502"
        for text in (recall.text, deliveries.text):
            assert "SECRET-BANNER" not in text and "10.0.0.3" not in text
    finally:
        failing.close()


def test_the_identity_provider_is_held_to_the_rule_too(settings, listener, monkeypatch, tmp_path):
    """The issuer is the operator's, but the endpoints come from the provider's discovery document:
    every request is checked, the issuer at startup by its syntax as well."""
    from app.errors import Unavailable
    from app.services.tenancy.oidc_client import OidcClient, OidcMisconfigured

    oidc = settings.with_changes(oidc_allow_private=False, oidc_client_id="memwarden",
                                 public_url="https://memwarden.example")
    with pytest.raises(OidcMisconfigured):
        OidcClient(oidc.with_changes(oidc_issuer=f"http://2130706433:{listener.port}"))
    fake_dns(monkeypatch, {"idp-alias.test": ["127.0.0.1"]})
    client = OidcClient(oidc.with_changes(oidc_issuer=f"http://idp-alias.test:{listener.port}"))
    with pytest.raises(Unavailable):
        client.metadata()
    assert listener.connections == []


@pytest.mark.parametrize("address, denied", [
    ("127.1", True), ("2130706433", True), ("0x7f000001", True), ("0", True), ("0177.0.0.1", True),
    ("0x7f.1", True), ("127.0.0.1.", True), ("2852039166", True), ("010.0.0.1", False),
    ("10.1.2.3", True), ("100.64.0.1", True), ("172.16.0.1", True), ("192.168.1.1", True),
    ("169.254.169.254", True), ("224.0.0.1", True), ("240.0.0.1", True), ("255.255.255.255", True),
    ("0.0.0.0", True), ("93.184.216.34", False), ("8.8.8.8", False),
    ("::", True), ("::1", True), ("[::1]", True), ("fe80::1%eth0", True), ("fd00::1", True), ("ff02::1", True),
    ("::ffff:127.0.0.1", True), ("::ffff:7f00:1", True), ("::ffff:10.0.0.1", True), ("::127.0.0.1", True),
    ("::ffff:0:127.0.0.1", True), ("64:ff9b::7f00:1", True), ("64:ff9b::a9fe:a9fe", True),
    ("64:ff9b::5db8:d822", False), ("64:ff9b:1::5db8:d822", True), ("2002:7f00:1::1", True),
    ("2002:5db8:d822::1", False), ("2001:0:4136:e378:8000:63bf:3fff:fdd2", True), ("2001:db8::1", True),
    ("2606:4700:4700::1111", False),
])
def test_the_address_check_reads_every_numeric_form(address, denied):
    from app.core.addresses import host_address, is_denied

    parsed = host_address(address)
    assert parsed is not None and is_denied(parsed) is denied, (address, parsed)


def test_names_are_not_addresses():
    from app.core.addresses import host_address

    for name in ("example.com", "1.2.3.4.5", "0x7g", "127.0.0.1.example.com", "xn--bcher-kva.example"):
        assert host_address(name) is None, name


# --- with private targets allowed, link-local (cloud metadata) stays out of reach -------------------

@pytest.mark.parametrize("host", ["169.254.169.254", "2852039166", "[fe80::1]", "[::ffff:169.254.169.254]",
                                  "0.0.0.0", "[::]", "224.0.0.1"])
def test_metadata_and_unspecified_addresses_stay_refused_with_private_targets_allowed(host):
    allowed = OutboundRule(True, "MEMWARDEN_BACKEND_ALLOW_PRIVATE")
    assert url_refusal(f"http://{host}/v1", allowed)[1] is not None
    assert url_refusal("http://127.0.0.1:9/v1", allowed)[1] is None  # the operator's own network is allowed
    assert url_refusal("http://10.1.2.3/v1", allowed)[1] is None


def test_a_name_resolving_to_link_local_is_refused_with_private_targets_allowed(monkeypatch):
    real = socket.getaddrinfo

    def resolve(host, *args, **kwargs):
        if host == "metadata.probe.test":
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("169.254.169.254", 80))]
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", resolve)
    with outbound_client(OutboundRule(True, "MEMWARDEN_WEBHOOK_ALLOW_PRIVATE"), timeout=2) as client:
        with pytest.raises(RefusedAddress):
            client.get("http://metadata.probe.test/latest/meta-data/")
        with pytest.raises(httpx.ConnectError):  # loopback is the operator's network: tried, nothing listens
            client.get("http://127.0.0.1:9/")
