"""`GET /review/stream` on a real server: signed-in reviewers only, their tenant and agents only,
ids and names but never memory content, and the change page's banner when another reviewer decides."""

import contextlib
import queue
import threading
import time
import uuid

import httpx

from app.services.tenancy.apikeys import create_key
from app.services.tenancy.tenants import create_tenant
from app.services.tenancy.users import create_user
from tests.harness import bearer, csrf_token_in, web_sign_in

ACTOR = {"kind": "test", "id": "pytest"}
PASSWORD = "stream-password-long-enough"
SECRET = "the vault code is 7319"


def _reviewer(ctx, tenant, agents="*") -> str:
    username = f"rev-{uuid.uuid4().hex[:10]}"
    create_user(ctx, username=username, password=PASSWORD, tenant_id=tenant.id, role="reviewer", agents=agents,
                actor=ACTOR)
    return username


def _browser(base_url: str, username: str) -> httpx.Client:
    client = httpx.Client(base_url=base_url, timeout=30)
    assert web_sign_in(client, username, PASSWORD).status_code == 303
    return client


def _listen(client: httpx.Client, params: dict) -> tuple[queue.Queue, threading.Event]:
    """Read the stream in a thread: `(event, data)` pairs into the queue; the event is set once open."""
    sink: queue.Queue = queue.Queue()
    opened = threading.Event()

    def read():
        with contextlib.suppress(httpx.HTTPError):  # the test closed the client: the stream ends
            _read()

    def _read():
        with client.stream("GET", "/review/stream", params=params, timeout=httpx.Timeout(5, read=60)) as response:
            assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream")
            fields: dict[str, str] = {}
            for line in response.iter_lines():
                opened.set()
                if line == "":
                    if "event" in fields:
                        sink.put((fields["event"], fields.get("data", "")))
                    fields = {}
                elif not line.startswith(":"):
                    name, _, value = line.partition(":")
                    fields[name] = value[1:] if value.startswith(" ") else value

    threading.Thread(target=read, daemon=True).start()
    assert opened.wait(15), "the stream did not open"
    return sink, opened


def _drain(sink: queue.Queue, want: int, seconds: float = 15) -> list[tuple[str, str]]:
    got, deadline = [], time.monotonic() + seconds
    while len(got) < want and time.monotonic() < deadline:
        try:
            got.append(sink.get(timeout=0.2))
        except queue.Empty:
            pass
    return got


def _propose(http: httpx.Client, agent: str) -> str:
    response = http.post("/v1/memories/remember", json={"agent_id": agent, "type": "semantic",
                                                        "content": SECRET, "approval_required": True})
    assert response.status_code == 202, response.text
    return response.json()["change_id"]


def test_stream_needs_a_signed_in_reviewer_of_the_tenant(live_server, live_tenant, committed_ctx):
    anonymous = httpx.get(f"{live_server}/review/stream", params={"tenant": live_tenant.name},
                          follow_redirects=False, timeout=30)
    assert anonymous.status_code == 303 and anonymous.headers["location"].startswith("/login")
    other = create_tenant(committed_ctx, name=f"other-{uuid.uuid4().hex[:8]}", actor=ACTOR)
    with contextlib.closing(_browser(live_server, _reviewer(committed_ctx, live_tenant))) as client:
        assert client.get("/review/stream", params={"tenant": other.name}).status_code == 403
        bad = client.get("/review/stream", params={"tenant": live_tenant.name, "change": "../x"})
        assert bad.status_code == 422


def test_stream_sends_ids_not_content_only_for_visible_agents_and_the_banner(live_server, live_tenant,
                                                                              committed_ctx):
    token = create_key(committed_ctx, tenant_id=live_tenant.id, scopes="memory:read,memory:write",
                       actor=ACTOR).token
    http = httpx.Client(base_url=live_server, headers=bearer(token), timeout=30)
    watched = _propose(http, "assistant")
    alice = _reviewer(committed_ctx, live_tenant)
    bob, narrow = _reviewer(committed_ctx, live_tenant), _reviewer(committed_ctx, live_tenant, agents="helper")
    other = create_tenant(committed_ctx, name=f"other-{uuid.uuid4().hex[:8]}", actor=ACTOR)
    outsider = create_user(committed_ctx, username=f"out-{uuid.uuid4().hex[:8]}", password=PASSWORD,
                           tenant_id=other.id, role="reviewer", actor=ACTOR).username
    bob_client, narrow_client = _browser(live_server, bob), _browser(live_server, narrow)
    outsider_client, alice_client = _browser(live_server, outsider), _browser(live_server, alice)
    with (contextlib.closing(bob_client), contextlib.closing(narrow_client), contextlib.closing(outsider_client),
          contextlib.closing(alice_client)):
        bob_sink, _ = _listen(bob_client, {"tenant": live_tenant.name, "change": watched})
        narrow_sink, _ = _listen(narrow_client, {"tenant": live_tenant.name})
        outsider_sink, _ = _listen(outsider_client, {"tenant": other.name})
        helper_change = _propose(http, "helper")

        page = alice_client.get(f"/review/{watched}", params={"tenant": live_tenant.name})
        rejected = alice_client.post(f"/review/{watched}/reject", params={"tenant": live_tenant.name},
                                     data={"csrf_token": csrf_token_in(page.text), "reason": "not a fact"},
                                     headers={"HX-Request": "true"})
        assert rejected.status_code == 200, rejected.text

        bob_events = _drain(bob_sink, 3)
        assert [name for name, _ in bob_events] == ["change", "change", "decided"], bob_events
        assert f'"changeId":"{helper_change}"' in bob_events[0][1] and '"status":"pending"' in bob_events[0][1]
        assert f'"changeId":"{watched}"' in bob_events[1][1] and '"status":"rejected"' in bob_events[1][1]
        banner = bob_events[2][1]
        assert f"Rejected by {alice}" in banner and "s ago" in banner and 'data-testid="live-decided"' in banner
        assert all(SECRET not in data and "not a fact" not in data for _, data in bob_events)

        # The reviewer limited to agent "helper" hears only of its change; the other tenant of nothing.
        narrow_events = _drain(narrow_sink, 2, seconds=3)
        assert len(narrow_events) == 1 and helper_change in narrow_events[0][1], narrow_events
        assert _drain(outsider_sink, 1, seconds=1) == []

        # The same banner for browsers without EventSource, which poll it.
        live = f"/review/{watched}/live"
        assert f"Rejected by {alice}" in bob_client.get(live, params={"tenant": live_tenant.name}).text
        assert alice_client.get(live, params={"tenant": live_tenant.name}).status_code == 204  # her own decision
        assert narrow_client.get(live, params={"tenant": live_tenant.name}).status_code == 204  # not her agent
        pending = bob_client.get(f"/review/{helper_change}/live", params={"tenant": live_tenant.name})
        assert pending.status_code == 204
        assert bob_client.get("/review/chg_NOPE/live", params={"tenant": live_tenant.name}).status_code == 404
    http.close()


def test_stream_ends_soon_after_the_reviewer_signs_out(live_server, live_tenant, committed_ctx):
    client = _browser(live_server, _reviewer(committed_ctx, live_tenant))
    with contextlib.closing(client):
        ended = threading.Event()

        def read():
            with contextlib.suppress(httpx.HTTPError):
                with client.stream("GET", "/review/stream", params={"tenant": live_tenant.name},
                                   timeout=httpx.Timeout(5, read=60)) as response:
                    assert response.status_code == 200
                    for _ in response.iter_lines():
                        pass
                ended.set()

        threading.Thread(target=read, daemon=True).start()
        assert not ended.wait(2)  # open, waiting for events
        page = client.get("/review", params={"tenant": live_tenant.name})
        signed_out = client.post("/logout", data={"csrf_token": csrf_token_in(page.text)}, follow_redirects=False)
        assert signed_out.status_code in (200, 303)
        assert ended.wait(15), "the stream outlived its session"
        assert client.get("/review/stream", params={"tenant": live_tenant.name},
                          follow_redirects=False).status_code == 303
