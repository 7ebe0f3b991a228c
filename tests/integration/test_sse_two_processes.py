"""Event fan-out across real server processes: a write through process A reaches a stream on
process B (LISTEN/NOTIFY), and a reconnect with Last-Event-ID gets exactly what was missed."""

import queue
import threading
import time

import httpx
import pytest
from sqlalchemy import text

from app.services.events.events import CHANNEL

from tests.harness import bearer, start_server, stop_server
from tests.sse import iter_events

pytestmark = pytest.mark.slow


@pytest.fixture
def two_servers(settings):
    a, url_a = start_server(settings)
    try:
        b, url_b = start_server(settings)
    except Exception:
        stop_server(a)
        raise
    yield url_a, url_b
    stop_server(a)
    stop_server(b)


def _subscribe(url, headers, params, sink: queue.Queue) -> threading.Thread:
    """Read the stream in a thread, putting (arrival time, event) on `sink`; None when it ends."""

    def run():
        try:
            with httpx.stream("GET", f"{url}/v1/events", params=params, headers=headers,
                              timeout=httpx.Timeout(5, read=30)) as response:
                assert response.status_code == 200
                for event in iter_events(response.iter_lines()):
                    sink.put((time.monotonic(), event))
        finally:
            sink.put(None)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def _write(url, headers, content):
    response = httpx.post(f"{url}/v1/memories/remember", headers=headers, timeout=30,
                          json={"agent_id": "agent-x", "type": "semantic", "content": content})
    assert response.status_code == 201, response.text
    return response.json()["id"]


def test_write_on_a_reaches_stream_on_b_and_resume_gets_exactly_the_missed(two_servers, live_key,
                                                                           committed_ctx):
    url_a, url_b = two_servers
    headers = bearer(live_key(scopes="memory:read,memory:write,events:read"))
    _write(url_a, headers, "Warm-up so both processes have loaded their models.")
    sink: queue.Queue = queue.Queue()
    reader = _subscribe(url_b, headers, {"after": "1", "limit": "2"}, sink)
    time.sleep(1.0)
    # B's listener is up, so its stream waits on NOTIFY (falling back to a 15 s re-check only).
    with committed_ctx.db.sessions() as session:
        listeners = session.scalar(text("SELECT count(*) FROM pg_stat_activity WHERE query = :q"),
                                   {"q": f"LISTEN {CHANNEL}"})
    assert listeners >= 1

    seen = []
    for i in range(2):
        written_at = time.monotonic()
        memory_id = _write(url_a, headers, f"Live fact {i} written through A.")
        arrived, event = sink.get(timeout=10)
        assert event["type"] == "memory.written" and event["data"]["memoryId"] == memory_id
        assert arrived - written_at < 3, "not woken by NOTIFY"
        seen.append(event)
    assert sink.get(timeout=10) is None  # limit reached: B closed the stream
    reader.join(5)

    missed = [_write(url_a, headers, f"Missed fact {i}.") for i in range(3)]
    resumed: queue.Queue = queue.Queue()
    reader = _subscribe(url_b, {**headers, "Last-Event-ID": str(seen[-1]["id"])}, {"limit": "4"}, resumed)
    replayed = [resumed.get(timeout=10)[1] for _ in missed]
    assert [e["data"]["memoryId"] for e in replayed] == missed
    assert [e["id"] for e in replayed] == [seen[-1]["id"] + 1, seen[-1]["id"] + 2, seen[-1]["id"] + 3]
    live = _write(url_b, headers, "Written through B itself, after the replay.")
    assert resumed.get(timeout=10)[1]["data"]["memoryId"] == live
    assert resumed.get(timeout=10) is None
    reader.join(5)

    # A full replay from either process is the same sequence, ids strictly increasing.
    full = {url: list(iter_events(httpx.get(f"{url}/v1/events", params={"once": "1"}, headers=headers,
                                            timeout=30).text.splitlines())) for url in (url_a, url_b)}
    assert full[url_a] == full[url_b]
    assert [e["id"] for e in full[url_a]] == list(range(1, 8))
