"""An open event stream on a real server ends within about a second of its API key's revocation."""

import queue
import threading
import time

import httpx

from app.services.tenancy.apikeys import create_key, revoke_key
from tests.harness import bearer
from tests.sse import iter_events

ACTOR = {"kind": "test", "id": "pytest"}


def test_stream_closes_within_a_second_and_a_half_of_key_revocation(live_server, live_tenant, committed_ctx):
    key = create_key(committed_ctx, tenant_id=live_tenant.id, scopes="memory:read,memory:write,events:read",
                     agents="*", actor=ACTOR)
    headers = bearer(key.token)
    written = httpx.post(f"{live_server}/v1/memories/remember", headers=headers, timeout=30,
                         json={"agent_id": "agent-x", "type": "semantic", "content": "Revocation drill."})
    assert written.status_code == 201, written.text
    sink: queue.Queue = queue.Queue()

    def read():
        try:
            with httpx.stream("GET", f"{live_server}/v1/events", headers=headers,
                              timeout=httpx.Timeout(5, read=30)) as response:
                assert response.status_code == 200
                for event in iter_events(response.iter_lines()):
                    sink.put(event)
        finally:
            sink.put(None)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    first = sink.get(timeout=30)  # the backlog replayed: the stream is open and now waiting
    assert first is not None and first["type"] == "memory.written"
    time.sleep(0.3)

    revoke_key(committed_ctx, tenant_id=live_tenant.id, key_id=key.key.id, actor=ACTOR)
    revoked_at = time.monotonic()
    assert sink.get(timeout=10) is None  # the stream ended, nothing else arrived
    closed_after = time.monotonic() - revoked_at
    reader.join(5)
    assert closed_after < 1.5, f"stream stayed open {closed_after:.2f} s after revocation"
    assert httpx.get(f"{live_server}/v1/events", headers=headers, params={"once": "1"}).status_code == 401
