"""Where PostgreSQL's CPU goes per remember and per recall (issue 25, goals 1-2: PostgreSQL's share).

Usage, from a checkout with its venv active (run it in a worktree of each tree to compare them):

    python dev/bench-records/pgcpu-account.py OUT.json [--rounds 2] [--levels 1,16] [--no-statements]

`memwarden serve` on a fresh embedded PostgreSQL, memorywire's corpus (100 facts a scope), the same
workload as `memwarden bench compare` (`app.bench.driver_common.run_levels`: remember every fact,
then recall every query, `rounds` times into fresh scopes, at each level of clients). Three parts:

1. processes: around each phase, the CPU of every child of the postmaster (and the postmaster) read
   from /proc/<pid>/schedstat (nanoseconds, not 10 ms ticks), grouped by process title: backends
   (the server's pooled connections), walwriter, checkpointer, background writer, autovacuum, ...;
   "exited" is what the postmaster reaped during the phase (its cutime+cstime, in ticks: backends
   that closed, autovacuum workers; a backend's whole life moves from "backends" to "exited" when
   it ends, so only their sum is a phase's). CPU ms per operation per group, load average beside
   each, and how many backends the phase started (the pool's overflow connections close and reopen).
2. statements: `log_min_duration_statement = 0` switched on (ALTER SYSTEM, a reload) for one
   round at `--statement-clients` (default 1); every parse/bind/execute PostgreSQL logged, grouped by statement text, summed
   per operation of the phase it fell in (the read audit and recall-count batches fall in the
   recall phase). Durations are the backend's wall time per message: on a quiet box ~CPU. Logging
   itself costs CPU, so part 1 runs with logging off.
3. plans: one logged instance of each recall-phase statement replayed with its logged parameters
   under EXPLAIN (ANALYZE, BUFFERS) in a transaction that is rolled back.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import psycopg

from app.bench import common, compare, driver_common, recall as bench_recall
from app.db.embedded import start_embedded

CORPUS = Path(__file__).resolve().parents[3] / "shared" / "bench" / "memorywire-microbench.json"
TICK = os.sysconf("SC_CLK_TCK")
GROUPS = ("backends", "walwriter", "checkpointer", "bgwriter", "autovacuum", "walsender", "postmaster",
          "other", "exited")


def _title_group(cmdline: str) -> str:
    """A postmaster child's group from its process title (`postgres: walwriter`, `postgres: user db [local] idle`)."""
    title = cmdline.removeprefix("postgres: ").strip()
    for prefix, group in (("walwriter", "walwriter"), ("checkpointer", "checkpointer"),
                          ("background writer", "bgwriter"), ("autovacuum", "autovacuum"),
                          ("walsender", "walsender")):
        if title.startswith(prefix):
            return group
    if "[local]" in title or re.search(r"\d+\.\d+\.\d+\.\d+\(\d+\)", title):
        return "backends"
    return "other"


def _run_ns(pid: int) -> int:
    with open(f"/proc/{pid}/schedstat") as f:
        return int(f.read().split()[0])


def _reaped_s(pid: int) -> float:
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[13]) + int(fields[14])) / TICK  # cutime, cstime


def pg_clock(postmaster: int, server_pid: int):
    """CPU seconds so far by group (plus the server's process tree, for scale). A pid's group is
    fixed at first sight (a backend's title changes with its state)."""
    import psutil

    seen: dict[int, str] = {}

    def clock() -> dict[str, float]:
        out = dict.fromkeys(GROUPS, 0.0)
        for child in psutil.Process(postmaster).children():
            try:
                group = seen.setdefault(child.pid, _title_group(" ".join(child.cmdline())))
                out[group] += _run_ns(child.pid) / 1e9
            except (psutil.Error, OSError):
                continue
        out["postmaster"] = _run_ns(postmaster) / 1e9
        # Not CPU: backends started so far, so a phase's figure reads as backends started per 1,000 ops.
        out["started_backends_per_1000_ops"] = float(sum(1 for g in seen.values() if g == "backends"))
        out["exited"] = _reaped_s(postmaster)
        server = psutil.Process(server_pid)  # threaded: its threads' times, in ticks
        out["server"] = sum(sum(p.cpu_times()[:4]) for p in (server, *server.children(recursive=True)))
        return out

    return clock


LOG = re.compile(r"^(\S+ \S+ \S+) \S* ?\[(\d+)\] (LOG|DETAIL):\s+(.*)$")
DURATION = re.compile(r"duration: ([\d.]+) ms(?:\s+(parse|bind|execute|statement)( [^:]*)?: (.*))?$")


def _normal(sql: str) -> str:
    sql = re.sub(r"\s+", " ", sql).strip()
    return re.sub(r"'[^']*'|\b\d+\b", "?", sql)[:160]


def statement_account(log: str, marks: dict[str, tuple[str, str]], ops: dict[str, int]) -> tuple[dict, dict]:
    """Per phase: {statement: {ms per op by message kind, calls per op}}; and one (sql, params) per
    recall-phase statement for EXPLAIN."""
    lines = re.sub(r"\n\t", " ", log).splitlines()
    account: dict[str, Any] = {}
    samples: dict[str, tuple[str, str | None]] = {}
    for phase, (begin, end) in marks.items():
        inside = False
        per: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
        last: tuple[str, str] | None = None
        for line in lines:
            m = LOG.match(line)
            if not m:
                continue
            kind, what = m.group(3), m.group(4)
            if begin in what:
                inside = True
                continue
            if end in what:
                break
            if not inside:
                continue
            if kind == "DETAIL":
                if last and phase == "recall" and last[1] not in samples and what.startswith("Parameters:"):
                    samples[last[1]] = (last[0], what.removeprefix("Parameters: "))
                continue
            d = DURATION.match(what)
            if not d or not d.group(2):
                continue
            ms, message, sql = float(d.group(1)), d.group(2), d.group(4)
            if "mark-" in sql:
                continue
            key = _normal(sql)
            per[key][f"{message}_ms"] += ms
            per[key]["total_ms"] += ms
            if message in ("execute", "statement"):
                per[key]["calls"] += 1
            last = (sql, key)
            if phase == "recall" and message == "execute" and key not in samples:
                samples[key] = (sql, None)
        n = ops[phase]
        rows = {k: {f: round(v / n, 4) for f, v in fields.items()} for k, fields in per.items()}
        account[phase] = dict(sorted(rows.items(), key=lambda kv: -kv[1]["total_ms"]))
    return account, samples


PARAM = re.compile(r"\$(\d+) = ('(?:[^']|'')*'|NULL)")


def explain(admin_url: str, samples: dict[str, tuple[str, str | None]]) -> dict[str, list[str]]:
    """Each statement replayed with its logged parameters under EXPLAIN (ANALYZE, BUFFERS), rolled back."""
    out: dict[str, list[str]] = {}
    with psycopg.connect(admin_url.replace("postgresql+psycopg://", "postgresql://")) as conn:
        for key, (sql, params) in samples.items():
            if not re.match(r"\s*(SELECT|INSERT|UPDATE|WITH|DELETE)", sql, re.I):
                continue
            values: list[Any] = []
            for _, v in PARAM.findall(params or ""):
                values.append(None if v == "NULL" else v[1:-1].replace("''", "'"))
            try:
                with conn.transaction(force_rollback=True):
                    cur = psycopg.RawCursor(conn)
                    rows = cur.execute("EXPLAIN (ANALYZE, BUFFERS) " + sql, values).fetchall()
                out[key] = [re.sub(r"'\[[-0-9.,e]+\]'", "'[vector]'", r[0]) for r in rows]
            except psycopg.Error as exc:
                out[key] = [f"EXPLAIN failed: {type(exc).__name__}: {str(exc)[:200]}"]
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--levels", default="1,16")
    parser.add_argument("--no-statements", action="store_true")
    parser.add_argument("--statement-clients", type=int, default=1, help="clients in the logged round")
    parser.add_argument("--env", action="append", default=[], help="KEY=VALUE for the server (a setting to try)")
    args = parser.parse_args()
    common.quiet_http_logs()
    corpus = bench_recall.load_corpus(CORPUS)
    report: dict[str, Any] = {"corpus": str(CORPUS), "rounds": args.rounds, "env": args.env, "levels": []}
    with common.scratch_dir() as data_dir:
        env = common.clean_env(data_dir, MEMWARDEN_RATE_LIMIT_PER_MINUTE="1000000",
                               **dict(pair.split("=", 1) for pair in args.env))
        with common.serve(data_dir, env=env) as server:
            token = common.provision_via_cli(data_dir)
            embedded = start_embedded(data_dir)
            postmaster = int((embedded.pgdata / "postmaster.pid").read_text().split()[0])
            clock = pg_clock(postmaster, server.proc.pid)
            remember, recall_ids, _ = compare.http_workload(server.base_url, token, "pgcpu")
            driver_common.run_levels(corpus, remember, recall_ids, levels=[1], rounds=1,
                                     cpu_clock=clock)  # warm-up: caches, prepared statements, pool
            for clients in driver_common.parse_levels(args.levels):
                load = os.getloadavg()[0]
                remember, recall_ids, _ = compare.http_workload(server.base_url, token, f"pgcpu-l{clients}")
                run = driver_common.run_levels(corpus, remember, recall_ids, levels=[clients],
                                               rounds=args.rounds, cpu_clock=clock)["levels"][0]
                entry = {"clients": clients, "load_1m_before": load, "load_1m_after": os.getloadavg()[0]}
                for op in ("remember", "recall"):
                    r = run[op]
                    by_group = dict(r["cpu_ms_per_op_by_part"])
                    started = by_group.pop("started_backends_per_1000_ops")
                    server_ms = by_group.pop("server")
                    entry[op] = {"ops": r["ops"], "errors": r["errors"], "ops_per_s": r["ops_per_s"],
                                 "postgresql_cpu_ms_per_op": round(sum(by_group.values()), 3),
                                 "cpu_ms_per_op_by_group": by_group, "server_cpu_ms_per_op": server_ms,
                                 "backends_started_per_1000_ops": started}
                report["levels"].append(entry)
                print(json.dumps(entry), flush=True)
            if not args.no_statements:
                with psycopg.connect(embedded.admin_url.replace("postgresql+psycopg://", "postgresql://"),
                                     autocommit=True) as conn:
                    conn.execute("ALTER SYSTEM SET log_min_duration_statement = 0")
                    conn.execute("ALTER SYSTEM SET log_line_prefix = '%m %a [%p] '")
                    conn.execute("SELECT pg_reload_conf()")
                    time.sleep(0.5)
                    remember, recall_ids, _ = compare.http_workload(server.base_url, token, "pgcpu-logged")
                    marks, ops = {}, {}
                    facts, queries = corpus["facts"], corpus["queries"]
                    for phase, items, call in (("remember", facts, lambda f: remember("s", f)),
                                               ("recall", queries, lambda q: recall_ids("s", q, 5))):
                        marks[phase] = (f"mark-begin-{phase}", f"mark-end-{phase}")
                        conn.execute(f"SELECT 'mark-begin-{phase}'")
                        driver_common.phase(args.statement_clients, items, call)
                        time.sleep(1.5)  # the background batches (read audit, recall counts) land inside
                        conn.execute(f"SELECT 'mark-end-{phase}'")
                        ops[phase] = len(items)
                    conn.execute("ALTER SYSTEM RESET log_min_duration_statement")
                    conn.execute("SELECT pg_reload_conf()")
                log = (embedded.pgdata / "log").read_text(errors="replace")
                if os.environ.get("LOG_OUT"):  # keep PostgreSQL's log to read it
                    Path(os.environ["LOG_OUT"]).write_text(log)
                report["statements_ms_per_op"], samples = statement_account(log, marks, ops)
                report["explain"] = explain(embedded.admin_url, samples)
            with psycopg.connect(embedded.admin_url.replace("postgresql+psycopg://", "postgresql://")) as conn:
                # The recall-count batch updates memories: a non-HOT update adds an entry to every index.
                report["memories_updates"] = dict(zip(("updates", "hot", "new_page"), conn.execute(
                    "SELECT n_tup_upd, n_tup_hot_upd, n_tup_newpage_upd FROM pg_stat_user_tables "
                    "WHERE relname = 'memories'").fetchone()))
    report["machine"] = common.machine()
    common.write_json(args.out, report)


if __name__ == "__main__":
    main()
