"""`memwarden serve --workers 2` on its own embedded PostgreSQL: both workers come up, concurrent
writes through fresh connections all land and every read sees all of them, and one key's rate limit
holds across the workers (L + k requests get k 429s whichever worker answers each, less any token
that refilled during the burst)."""

import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import psutil
import pytest

from tests.harness import fresh_env, fresh_server, memwarden_cli

pytestmark = pytest.mark.slow

RATE_LIMIT = 10  # per minute: a token refills every 6 s, so a burst of a few seconds sees at most one
WRITES = 6
READS = 3  # writes + reads stay within the writing key's limit


def _fresh(method: str, url: str, **kwargs) -> httpx.Response:
    """One request on its own connection, so the kernel may hand it to either worker."""
    with httpx.Client(timeout=60) as http:
        return http.request(method, url, **kwargs)


def test_two_workers_share_writes_reads_and_the_rate_limit(tmp_path):
    data_dir = tmp_path / ".memwarden"
    env = fresh_env(data_dir, MEMWARDEN_RATE_LIMIT_PER_MINUTE=str(RATE_LIMIT))
    with fresh_server(data_dir, env=env, workers=2) as (server, base_url), ThreadPoolExecutor(6) as pool:
        workers = [c for c in psutil.Process(server.pid).children()
                   if "postgres" not in c.name() and "python" in c.name()]
        assert len(workers) >= 2, [c.cmdline() for c in workers]

        memwarden_cli(data_dir, "tenant", "create", "workers")
        token = memwarden_cli(data_dir, "apikey", "create", "--tenant", "workers", "--scopes",
                              "memory:read,memory:write").strip().splitlines()[-1]
        auth = {"Authorization": f"Bearer {token}"}
        bodies = [{"agent_id": "agent-w", "type": "semantic", "content": f"Worker fact number {i}."}
                  for i in range(WRITES)]
        writes = list(pool.map(lambda body: _fresh("POST", f"{base_url}/v1/memories/remember",
                                                   headers=auth, json=body), bodies))
        assert [w.status_code for w in writes] == [201] * WRITES, [w.text for w in writes if w.status_code != 201]
        written = {w.json()["id"] for w in writes}
        reads = list(pool.map(lambda _: _fresh("GET", f"{base_url}/v1/memories",
                                               params={"agent_id": "agent-w", "limit": "100"}, headers=auth),
                              range(READS)))
        for read in reads:
            assert read.status_code == 200
            assert {m["id"] for m in read.json()["items"]} == written

        out = memwarden_cli(data_dir, "apikey", "create", "--tenant", "workers", "--scopes", "memory:read")
        burst_auth = {"Authorization": f"Bearer {out.strip().splitlines()[-1].strip()}"}
        extra = 7
        started = time.monotonic()
        codes = list(pool.map(lambda _: _fresh("GET", f"{base_url}/v1/whoami", headers=burst_auth).status_code,
                              range(RATE_LIMIT + extra)))
        refilled = int((time.monotonic() - started) * RATE_LIMIT / 60)  # tokens that flowed in meanwhile
        assert set(codes) == {200, 429}
        # Per-worker buckets would let up to 2 x RATE_LIMIT through; one shared bucket lets exactly
        # RATE_LIMIT through, plus what refilled during the burst (0 unless it took over 6 s).
        assert RATE_LIMIT <= codes.count(200) <= RATE_LIMIT + refilled, (refilled, codes)
