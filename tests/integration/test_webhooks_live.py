"""Webhooks for real: the serving process's background job POSTs a signed event to a local receiver."""

import hashlib
import hmac
import json
import time

import httpx
import pytest

from tests.harness import bearer
from tests.http_receiver import Receiver

pytestmark = pytest.mark.slow


def test_background_job_delivers_signed_events(live_server, live_key):
    receiver = Receiver([502])  # the first attempt fails; the retry (5 s later) succeeds
    try:
        headers = bearer(live_key(scopes="memory:read,memory:write,events:read"))
        hook = httpx.post(f"{live_server}/v1/webhooks", json={"url": receiver.url}, headers=headers, timeout=30).json()
        written = httpx.post(f"{live_server}/v1/memories/remember", headers=headers, timeout=30,
                             json={"agent_id": "hooked", "type": "semantic", "content": "Ada likes plums."}).json()
        deadline = time.monotonic() + 30
        while len(receiver.requests) < 2 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert len(receiver.requests) == 2
        headers_in, body = receiver.requests[-1]
        expected = hmac.new(hook["secret"].encode(), body, hashlib.sha256).hexdigest()
        assert headers_in["x-memwarden-signature"] == f"sha256={expected}"
        assert json.loads(body)["data"]["memoryId"] == written["id"] and b"plums" not in body
        for _ in range(20):  # the delivered status is recorded just after the response
            log = httpx.get(f"{live_server}/v1/webhooks/{hook['id']}/deliveries", headers=headers).json()["items"]
            if log and log[0]["status"] == "delivered":
                break
            time.sleep(0.2)
        assert [(d["status"], d["attempts"], d["statusCode"]) for d in log] == [("delivered", 2, 204)]
    finally:
        receiver.close()
