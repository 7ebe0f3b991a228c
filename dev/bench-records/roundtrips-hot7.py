"""Every statement PostgreSQL receives for one remember and one recall over HTTP, in order, with
the time between them (issue 25 goal 1, seventh pass: the round-trip count).

Usage, from a checkout with its venv active (run it in a worktree of each tree to compare them):

    python dev/bench-records/roundtrips-hot7.py [N] > roundtrips.txt

`memwarden serve` runs on a fresh embedded PostgreSQL, as `memwarden bench hotpath --http` runs
it. After 30 warm-up pairs, `log_statement = 'all'` is switched on (`ALTER SYSTEM`, a reload) and N
(default 3) remembers then N recalls are sent one at a time, each bracketed by a marker statement
on a connection of this process; PostgreSQL's log is read between the markers: every statement a
backend of the server received (BEGIN and COMMIT included), with its pid and the ms since the one
before (the log's resolution: a pipeline's statements show at one instant, so the log gives the
order, not the round trips). Then `strace` is attached to the server for TRACED (env, default
100) remembers and as many recalls: per request, the round trips of the thread that served it
(`_round_trips`). Needs strace; `TRACE_OUT=file` keeps the raw trace. Run as root or with ptrace
allowed.
"""

from __future__ import annotations

import os
import re
import statistics
import sys
import time
from datetime import datetime

from sqlalchemy import create_engine, text

from app.bench import common
from app.bench.hotpath import recall_body, remember_body
from app.db.embedded import start_embedded

LINE = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+) \w+ \S* ?\[(\d+)\] LOG:\s+(.*)$")



def _statements(log: str, begin: str, end: str, own_pid: int) -> list[tuple[datetime, int, str]]:
    """(time, backend pid, statement) between the two markers, this process's backend left out."""
    out, inside = [], False
    for line in re.sub(r"\n\t", " ", log).splitlines():  # a statement's continuation lines start with a tab
        m = LINE.match(line)
        if not m:
            continue
        at, pid, what = datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S.%f"), int(m.group(2)), m.group(3)
        if begin in what:
            inside = True
            continue
        if end in what:
            break
        if not inside or pid == own_pid or what.startswith(("parse ", "bind ", "duration")):
            continue
        what = re.sub(r"^(statement|execute [^:]*): ", "", what)
        out.append((at, pid, re.sub(r"\s+", " ", what)[:110]))
    return out


def _round_trips(trace: str) -> list[dict[str, int]]:
    """Per request in an strace of the server (`-f -yy -e trace=sendto,recvfrom,read,write`): the
    round trips to PostgreSQL of the thread that served it, between the request's read from its
    TCP socket and the response's write. A round trip is a run of `sendto`s on one unix socket
    that a `recvfrom` on it ends (libpq writes a pipeline's statements in one or a few sends, then
    waits). `parses`: the round trips that only prepared a named statement (a Parse and a Sync: psycopg
    prepares before it executes, unless it is in a pipeline)."""
    out: list[dict[str, int]] = []
    current: dict[str, int] | None = None
    sending: set[int] = set()
    served_by = None
    for line in trace.splitlines():
        m = re.match(r"(\d+)\s+\S+\s+(sendto|recvfrom|read|write)\((\d+)<(TCP|UNIX-STREAM):\[[^\]]*\]>, \"(.{0,12})", line)
        if not m or "EAGAIN" in line:
            continue
        tid, call, fd, kind, head = int(m.group(1)), m.group(2), int(m.group(3)), m.group(4), m.group(5)
        if kind == "TCP" and call == "read" and head.startswith("POST"):
            current, sending, served_by = {"round_trips": 0, "parses": 0}, set(), None
        elif kind == "TCP" and call == "write" and head.startswith("HTTP/1.1") and current is not None:
            out.append(current)
            current = None
        elif kind == "UNIX-STREAM" and current is not None and call in ("sendto", "recvfrom"):
            if served_by is None:
                served_by = tid  # the first thread to talk to PostgreSQL: the request's
            if tid != served_by:
                continue
            if call == "sendto":
                if fd not in sending:
                    current["round_trips"] += 1
                    sending.add(fd)
            elif fd in sending:
                sending.discard(fd)
                if head.startswith("1\\0\\0\\0\\4Z"):  # ParseComplete, then ReadyForQuery: a prepare alone
                    current["parses"] += 1
    return out


def _traced(pid: int, call) -> list[dict[str, int]]:
    """`call()` with strace attached to every thread of `pid`; its requests' round trips."""
    import subprocess
    import tempfile

    with tempfile.NamedTemporaryFile("r", suffix=".strace") as out:
        tracer = subprocess.Popen(["strace", "-f", "-tt", "-yy", "-s", "24", "-e", "trace=sendto,recvfrom,read,write",
                                   "-o", out.name, "-p", str(pid)], stderr=subprocess.DEVNULL)
        time.sleep(1.5)  # attached to every thread
        call()
        tracer.send_signal(2)
        tracer.wait()
        trace = out.read()
        if os.environ.get("TRACE_OUT"):  # keep the raw trace to read it
            with open(os.environ["TRACE_OUT"], "a") as kept:
                kept.write(trace)
        return _round_trips(trace)


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    traced_n = int(os.environ.get("TRACED", "100"))
    with common.scratch_dir() as data_dir, common.serve(data_dir) as server, \
            common.client(server.base_url, common.provision_via_cli(data_dir)) as http:
        embedded = start_embedded(data_dir)
        admin = create_engine(embedded.admin_url, isolation_level="AUTOCOMMIT")
        for i in range(30):
            http.post("/v1/memories/remember", json=remember_body(i)).raise_for_status()
            http.post("/v1/memories/recall", json=recall_body(i)).raise_for_status()
        with admin.connect() as conn:
            conn.execute(text("ALTER SYSTEM SET log_statement = 'all'"))
            conn.execute(text("ALTER SYSTEM SET log_line_prefix = '%m %a [%p] '"))
            conn.execute(text("SELECT pg_reload_conf()"))
            time.sleep(0.5)
            own_pid = conn.execute(text("SELECT pg_backend_pid()")).scalar()
            for name, body in (("remember", remember_body), ("recall", recall_body)):
                for i in range(n):
                    conn.execute(text(f"SELECT 'mark-begin-{name}-{i}'"))
                    http.post(f"/v1/memories/{name}", json=body(100 + i)).raise_for_status()
                    time.sleep(0.3)  # background writers (read audit, recall counts) land in the window too
                    conn.execute(text(f"SELECT 'mark-end-{name}-{i}'"))
            conn.execute(text("ALTER SYSTEM RESET log_statement"))
            conn.execute(text("SELECT pg_reload_conf()"))
        traced = {name: _traced(server.proc.pid, lambda: [http.post(f"/v1/memories/{name}", json=body(300 + i))
                                                          .raise_for_status() for i in range(traced_n)])
                  for name, body in (("remember", remember_body), ("recall", recall_body))}
        log = (embedded.pgdata / "log").read_text(errors="replace")
        if len(sys.argv) > 2:
            open(sys.argv[2], "w").write(log)
        admin.dispose()
    for name in ("remember", "recall"):
        trips = [r["round_trips"] for r in traced[name]]
        parses = [r["parses"] for r in traced[name]]
        print(f"== {name}, {len(trips)} requests under strace: round trips to PostgreSQL per request "
              f"{statistics.fmean(trips):.2f} (min {min(trips)}, max {max(trips)}), of which prepares alone "
              f"{statistics.fmean(parses):.2f} ({sum(1 for p in parses if p)} requests had one or more)")
        for i in range(n):
            rows = _statements(log, f"mark-begin-{name}-{i}", f"mark-end-{name}-{i}", own_pid)
            print(f"== {name} #{i}: {len(rows)} statements")
            previous = rows[0][0] if rows else None
            for at, pid, what in rows:
                print(f"  +{(at - previous).total_seconds() * 1000:6.2f} ms  [{pid}]  {what}")
                previous = at


if __name__ == "__main__":
    main()
