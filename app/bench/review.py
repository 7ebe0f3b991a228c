"""`memwarden bench review`: the review queue under load.

Loads N pending changes (default 100,000) spread over 100 agents, plus live memories to diff
against, into a fresh embedded database; then, through the real server over HTTP, measures the
queue page and change-detail render times (signed-in reviewer, p50/p95) and approval throughput
through `POST /v1/changes/{id}/approve` with several concurrent clients.

The clients share the machine with the server and PostgreSQL, so they use plain keep-alive
`http.client` connections (one per client thread), the cheapest client at hand, and the report
gives CPU per approval of each side (client, server processes, PostgreSQL) besides the rate.
"""

from __future__ import annotations

import argparse
import http.client
import os
import random
import re
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
from sqlalchemy import create_engine, text

from app.bench.common import (clean_env, cli, latency_summary, machine, quiet_http_logs, scratch_dir, serve,
                              table, write_json)
from app.config import Settings

TEMPLATES = [
    "{u} prefers {x} for breakfast.", "{u}'s favourite city is {x}.", "{u} works on the {x} project.",
    "{u} is allergic to {x}.", "{u} drives a {x} car.", "{u}'s manager is {x}.", "{u} reads {x} novels.",
    "{u} has a meeting about {x} on Monday.",
]
VALUES = ["oats", "Lisbon", "Apollo", "pollen", "blue", "Dana", "mystery", "budgets", "rice", "Oslo", "Zephyr",
          "dust", "red", "Eli", "fantasy", "hiring"]
USERS = ["alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi"]
PASSWORD = "bench-review-password"


def add_parser(bench: argparse._SubParsersAction) -> None:
    parser = bench.add_parser("review", help="queue/detail render p95 and approval throughput at N pending changes")
    parser.add_argument("--changes", type=int, default=100_000)
    parser.add_argument("--live", type=int, default=5_000, help="live memories to diff against")
    parser.add_argument("--agents", type=int, default=100)
    parser.add_argument("--requests", type=int, default=100, help="page renders measured per kind")
    parser.add_argument("--approvals", type=int, default=1_000)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--workers", type=int, default=2, help="server worker processes (one per core)")
    parser.add_argument("--out", help="write the JSON report here")
    parser.add_argument("--data-dir")
    parser.set_defaults(func=run)


def _load(admin_url: str, tenant_id: str, embed, n_changes: int, n_live: int, n_agents: int) -> float:
    """Bulk-load through SQL (the app's own columns); returns seconds taken."""
    started = time.perf_counter()
    sentences = [t.format(u=u.capitalize(), x=x) for t in TEMPLATES for u in USERS[:4] for x in VALUES[:8]]
    vectors = embed(sentences)
    engine = create_engine(admin_url)
    with engine.begin() as conn:
        conn.execute(text("CREATE TEMP TABLE bench_tpl (n int, content text, embedding vector(384))"))
        conn.execute(text("INSERT INTO bench_tpl VALUES (:n, :c, CAST(:v AS vector))"),
                     [{"n": i, "c": s, "v": str(v.tolist())} for i, (s, v) in enumerate(zip(sentences, vectors))])
        params = {"t": tenant_id, "k": len(sentences), "a": n_agents}
        conn.execute(text("""
            INSERT INTO memories (id, tenant_id, agent_id, user_id, type, content, embedding, status, created_at,
                                  updated_at, live_from, digest_key)
            SELECT 'mem_l' || lpad(g::text, 25, '0'), :t, 'agent-' || (g % :a), 'u' || (g % 8), 'semantic',
                   p.content, p.embedding, 'live', now() - make_interval(secs => g), now(), now(),
                   decode(md5(random()::text) || md5(random()::text), 'hex')
            FROM generate_series(1, :n) g JOIN bench_tpl p ON p.n = g % :k"""), {**params, "n": n_live})
        conn.execute(text("""
            INSERT INTO memories (id, tenant_id, agent_id, user_id, type, content, embedding, status, created_at,
                                  updated_at, digest_key, change_id)
            SELECT 'mem_p' || lpad(g::text, 25, '0'), :t, 'agent-' || (g % :a), 'u' || (g % 8), 'semantic',
                   p.content || ' (v' || g || ')', p.embedding, 'pending', now() - make_interval(secs => :n - g),
                   now(), decode(md5(random()::text) || md5(random()::text), 'hex'), 'chg_' || lpad(g::text, 26, '0')
            FROM generate_series(1, :n) g JOIN bench_tpl p ON p.n = g % :k"""), {**params, "n": n_changes})
        conn.execute(text("""
            INSERT INTO changes (id, tenant_id, agent_id, user_id, operation, status, request, memory_ids,
                                 submitted_at, submitted_by, approvals_required)
            SELECT 'chg_' || lpad(g::text, 26, '0'), :t, 'agent-' || (g % :a), 'u' || (g % 8), 'remember',
                   'pending', jsonb_build_object('memory_id', 'mem_p' || lpad(g::text, 25, '0')),
                   ARRAY['mem_p' || lpad(g::text, 25, '0')], now() - make_interval(secs => :n - g), 'key_bench', 1
            FROM generate_series(1, :n) g"""), {**params, "n": n_changes})
        conn.execute(text("ANALYZE memories; ANALYZE changes"))
    engine.dispose()
    return time.perf_counter() - started


def _sign_in(base_url: str, username: str) -> httpx.Client:
    browser = httpx.Client(base_url=base_url, timeout=60, follow_redirects=False)
    page = browser.get("/login")
    token = re.search(r'name="csrf_token" value="([^"]+)"', page.text).group(1)
    response = browser.post("/login", data={"username": username, "password": PASSWORD, "csrf_token": token,
                                            "next": "/review"})
    if response.status_code != 303:
        raise RuntimeError(f"sign-in failed: {response.status_code}")
    return browser


def _timed_get(http: httpx.Client, path: str) -> float:
    started = time.perf_counter()
    response = http.get(path)
    elapsed = (time.perf_counter() - started) * 1000
    if response.status_code != 200:
        raise RuntimeError(f"GET {path} -> {response.status_code}")
    return elapsed


def _cpu_seconds(server_pid: int, data_dir: Path) -> dict[str, float]:
    """CPU seconds used so far by the server's process tree and by its PostgreSQL's (a daemon
    outside that tree, found by its data directory), read from /proc."""
    tick = os.sysconf("SC_CLK_TCK")
    parent: dict[int, int] = {}
    cpu: dict[int, float] = {}
    postmasters = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            command = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:  # gone meanwhile
            continue
        fields = stat.rsplit(")", 1)[1].split()  # after the command name: state, ppid, ... utime (12th), stime
        pid = int(entry)
        parent[pid], cpu[pid] = int(fields[1]), (int(fields[11]) + int(fields[12])) / tick
        if " -D " in command and str(data_dir) in command and "postgres" in command.split(" ", 1)[0]:
            postmasters.append(pid)

    def tree(root: int) -> float:
        members, frontier = {root}, [root]
        while frontier:
            children = [pid for pid, ppid in parent.items() if ppid in frontier and pid not in members]
            members.update(children)
            frontier = children
        return sum(cpu.get(pid, 0.0) for pid in members)

    return {"server": tree(server_pid), "postgres": sum(tree(pid) for pid in postmasters)}


def _approve_all(base_url: str, key: str, change_ids: list[str], clients: int) -> list[int]:
    """POST an approval of each change from `clients` threads, each on its own keep-alive connection."""
    address = urlsplit(base_url)
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    local, opened = threading.local(), []

    def approve(change_id: str) -> int:
        connection = getattr(local, "connection", None)
        if connection is None:
            connection = local.connection = http.client.HTTPConnection(address.hostname, address.port, timeout=60)
            opened.append(connection)
        connection.request("POST", f"/v1/changes/{change_id}/approve", body=b"{}", headers=headers)
        response = connection.getresponse()
        response.read()
        return response.status

    try:
        with ThreadPoolExecutor(clients) as pool:
            return list(pool.map(approve, change_ids))
    finally:
        for connection in opened:
            connection.close()


def run(args: argparse.Namespace, settings: Settings) -> int:
    quiet_http_logs()
    from app.db.database import resolve_urls
    from app.embeddings import get_embedder

    with scratch_dir(args.data_dir) as data_dir:
        with serve(data_dir, workers=args.workers) as server:
            cli(data_dir, "tenant", "create", "bench")
            done = subprocess.run([sys.executable, "-m", "app.cli", "user", "create", "--username", "bench-reviewer",
                                   "--role", "reviewer", "--tenant", "bench", "--password-stdin"],
                                  input=PASSWORD + "\n", env=clean_env(data_dir), capture_output=True, text=True)
            if done.returncode != 0:
                raise RuntimeError(done.stderr)
            key = cli(data_dir, "apikey", "create", "--tenant", "bench", "--scopes",
                      "review:decide,memory:read").strip().splitlines()[-1]
            urls = resolve_urls(Settings(data_dir=data_dir))
            tenant_id = re.search(r"(ten_[0-9a-z]{26})", cli(data_dir, "tenant", "list")).group(1)
            load_s = _load(urls.admin_url, tenant_id, get_embedder("local").embed, args.changes, args.live, args.agents)
            print(f"loaded {args.changes} pending changes and {args.live} live memories in {load_s:.1f}s")

            browser = _sign_in(server.base_url, "bench-reviewer")
            for _ in range(5):
                _timed_get(browser, "/review")
            queue_ms = [_timed_get(browser, "/review") for _ in range(args.requests)]
            filtered_ms = [_timed_get(browser, f"/review?agent=agent-{random.randrange(args.agents)}")
                           for _ in range(args.requests)]
            ids = [f"chg_{random.randrange(1, args.changes):026d}" for _ in range(args.requests)]
            detail_ms = [_timed_get(browser, f"/review/{cid}") for cid in ids]

            approve_ids = [f"chg_{i:026d}" for i in range(1, min(args.approvals, args.changes) + 1)]
            cpu_before, client_before = _cpu_seconds(server.proc.pid, data_dir), time.process_time()
            started = time.perf_counter()
            codes = _approve_all(server.base_url, key, approve_ids, args.clients)
            elapsed = time.perf_counter() - started
            client_cpu = time.process_time() - client_before
            cpu_after = _cpu_seconds(server.proc.pid, data_dir)
            ok = sum(1 for c in codes if c == 200)
            cpu_ms = {"client": round(client_cpu * 1000 / len(approve_ids), 3),
                      **{side: round((cpu_after[side] - cpu_before[side]) * 1000 / len(approve_ids), 3)
                         for side in ("server", "postgres")}}
            report: dict[str, Any] = {
                "benchmark": "review", "machine": machine(), "pending_changes": args.changes,
                "live_memories": args.live, "agents": args.agents, "load_seconds": round(load_s, 1),
                "queue_page": latency_summary(queue_ms), "queue_page_agent_filter": latency_summary(filtered_ms),
                "change_detail": latency_summary(detail_ms),
                "server_workers": args.workers,
                "approvals": {"n": len(approve_ids), "ok": ok, "clients": args.clients,
                              "seconds": round(elapsed, 2), "per_second": round(ok / elapsed, 1),
                              "cpu_ms_per_approval": cpu_ms},
                "goals": {"page_p95_ms": 100, "approvals_per_second": 200},
            }
            browser.close()
    print(table([
        ["queue page", report["queue_page"]["p50_ms"], report["queue_page"]["p95_ms"]],
        ["queue page, agent filter", report["queue_page_agent_filter"]["p50_ms"],
         report["queue_page_agent_filter"]["p95_ms"]],
        ["change detail (diff)", report["change_detail"]["p50_ms"], report["change_detail"]["p95_ms"]],
    ], ["page", "p50 ms", "p95 ms"]))
    print(f"approvals: {report['approvals']['per_second']}/s ({ok}/{len(approve_ids)} ok, {args.clients} clients); "
          f"CPU ms per approval: {cpu_ms}")
    write_json(args.out, report)
    return 0
