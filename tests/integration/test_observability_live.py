"""A real `memwarden serve --workers 2` with JSON logs and a scrape token: requests answered by
either worker are all counted whichever worker answers the scrape, and the log is JSON lines
carrying request ids, never the content written or the key used."""

import json
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.harness import fresh_env, fresh_server, memwarden_cli

pytestmark = pytest.mark.slow

TOKEN = "live-scrape-token"
MARKER = "Quokka-lighthouse 9931 recognisable content"
REQUESTS = 16


def _fresh(method: str, url: str, **kwargs) -> httpx.Response:
    """One request on its own connection, so the kernel may hand it to either worker."""
    with httpx.Client(timeout=60) as http:
        return http.request(method, url, **kwargs)


def _count(text: str, route: str) -> float:
    return sum(s.value for family in text_string_to_metric_families(text) for s in family.samples
               if s.name == "memwarden_http_requests_total" and s.labels.get("route") == route)


def test_two_workers_count_every_request_and_log_json_lines_without_content(tmp_path):
    data_dir = tmp_path / ".memwarden"
    env = fresh_env(data_dir, MEMWARDEN_METRICS_TOKEN=TOKEN, MEMWARDEN_LOG_FORMAT="json",
                    MEMWARDEN_LOG_LEVEL="info")
    with open(tmp_path / "serve.log", "w+b") as log:
        with fresh_server(data_dir, env=env, workers=2, log=log) as (server, base_url), \
                ThreadPoolExecutor(4) as pool:
            memwarden_cli(data_dir, "tenant", "create", "ops")
            key = memwarden_cli(data_dir, "apikey", "create", "--tenant", "ops", "--scopes",
                                "memory:read,memory:write").strip().splitlines()[-1]
            auth = {"Authorization": f"Bearer {key}"}
            codes = list(pool.map(lambda _: _fresh("GET", f"{base_url}/v1/whoami", headers=auth).status_code,
                                  range(REQUESTS)))
            assert codes == [200] * REQUESTS
            written = _fresh("POST", f"{base_url}/v1/memories/remember", headers={**auth, "X-Request-ID": "live-1"},
                             json={"agent_id": "ops-bot", "type": "semantic", "content": MARKER})
            assert written.status_code == 201 and written.headers["x-request-id"] == "live-1"
            refused = _fresh("POST", f"{base_url}/v1/memories/remember", headers=auth,
                             json={"agent_id": "ops-bot", "type": "no-such-type", "content": MARKER})
            assert refused.status_code == 422

            # Every worker wrote its own files; whichever answers a scrape sums them all.
            files = list((data_dir / "run").glob("metrics-*/counter_*.db"))
            assert len({f.name for f in files}) >= 2, files
            for _ in range(4):
                scrape = _fresh("GET", f"{base_url}/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
                assert scrape.status_code == 200
                assert _count(scrape.text, "/v1/whoami") == REQUESTS
                assert _count(scrape.text, "/v1/memories/remember") == 2
                assert MARKER.split()[0] not in scrape.text
        assert not list((data_dir / "run").glob("metrics-*")), "serve removes its metrics directory on exit"
        log.seek(0)
        text = log.read().decode()

    assert MARKER.split()[0] not in text and key not in text and TOKEN not in text
    lines = [json.loads(line) for line in text.splitlines() if line.strip()]
    assert all({"ts", "level", "logger", "message"} <= set(line) for line in lines)
    traced = [line for line in lines if line.get("request_id") == "live-1"]
    assert traced and all(line["route"] == "/v1/memories/remember" for line in traced)
    assert all(line.get("tenant", "").startswith("ten_") and line.get("key_id", "").startswith("key_")
               for line in traced)
