"""Server CPU and context switches per remember and recall over HTTP, split by the serving
process's threads (issue 25 goal 1, sixth pass: the CPU budget).

Usage, from a checkout with its venv active (run it in a worktree of each tree to compare them):

    python dev/bench-records/hotpath-threads-hot6.py 300 > threads.json

`memwarden serve` runs on a fresh embedded PostgreSQL in its own process, as `memwarden bench
hotpath --http` runs it; one keep-alive client sends the same bodies one at a time. Around each
operation's N timed requests (after 30 warm-up pairs) every thread of the server is read from
`/proc/<pid>/task/<tid>/`: `schedstat`'s first field (nanoseconds on a CPU, not the 10 ms ticks of
`stat`) and `status`'s voluntary and involuntary context switches, i.e. how often a thread went to
sleep to hand work to another (a futex wake-up each). Threads are named with `py-spy dump` (Python's
names; the ones without a Python name are native: onnxruntime's pool). Also printed: the CPU of one
single-text embedding of the same texts in this process (the same model and settings), so each
row can be read against the embedding. Prints one JSON object; the load average before and after.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

from app.bench import common
from app.bench.hotpath import recall_body, remember_body



def _thread_names(pid: int) -> dict[int, str]:
    """tid -> Python thread name, from `py-spy dump` (empty without py-spy)."""
    spy = shutil.which("py-spy")
    if spy is None:
        return {}
    out = subprocess.run([spy, "dump", "-p", str(pid)], capture_output=True, text=True, timeout=60).stdout
    return {int(m.group(1)): m.group(2) for m in re.finditer(r'^Thread (\d+) \(\w+\): "([^"]*)"', out, re.M)}


def _role(tid: int, pid: int, names: dict[int, str]) -> str:
    name = names.get(tid)
    if tid == pid:
        return "event loop (main thread)"
    if name is None:  # no Python name: a native thread (onnxruntime's pool), if py-spy named the rest
        return "native (onnxruntime pool)" if names else f"thread {tid} (install py-spy to name it)"
    return re.sub(r"_\d+$", "", name)  # request_0, request_1 -> request


def _snapshot(pid: int) -> dict[int, tuple[int, int]]:
    """tid -> (ns on CPU, context switches)."""
    snap = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            ns = int((task / "schedstat").read_text().split()[0])
            status = (task / "status").read_text()
        except OSError:
            continue
        switches = sum(int(v) for v in re.findall(r"ctxt_switches:\s+(\d+)", status))
        snap[int(task.name)] = (ns, switches)
    return snap


def _embedding_cpu_ms(texts: list[str]) -> float:
    from app.embeddings import get_embedder

    embedder = get_embedder()
    for text in texts[:20]:
        embedder.embed([text])
    started = time.process_time()
    for text in texts:
        embedder.embed([text])
    return round((time.process_time() - started) * 1000 / len(texts), 3)


def main(n: int) -> dict:
    common.quiet_http_logs()
    load_before = os.getloadavg()
    report: dict = {"requests": n, "per_request": {}}
    with common.scratch_dir() as data_dir, common.serve(data_dir) as server, \
            common.client(server.base_url, common.provision_via_cli(data_dir)) as http:
        pid = server.proc.pid
        for i in range(30):
            http.post("/v1/memories/remember", json=remember_body(i)).raise_for_status()
            http.post("/v1/memories/recall", json=recall_body(i)).raise_for_status()
        names = _thread_names(pid)
        for op, body in (("remember", remember_body), ("recall", recall_body)):
            before = _snapshot(pid)
            for i in range(n):
                response = http.post(f"/v1/memories/{op}", json=body(30 + i))
                assert response.status_code in (200, 201), response.text
            after = _snapshot(pid)
            cpu: dict[str, float] = defaultdict(float)
            switches: dict[str, float] = defaultdict(float)
            for tid, (ns, sw) in after.items():
                ns0, sw0 = before.get(tid, (0, 0))
                role = _role(tid, pid, names)
                cpu[role] += (ns - ns0) / 1e6 / n
                switches[role] += (sw - sw0) / n
            rows = {role: {"cpu_ms": round(cpu[role], 3), "context_switches": round(switches[role], 2)}
                    for role in sorted(cpu, key=cpu.get, reverse=True) if cpu[role] or switches[role]}
            rows["total"] = {"cpu_ms": round(sum(cpu.values()), 3),
                             "context_switches": round(sum(switches.values()), 2)}
            report["per_request"][op] = rows
    report["embedding_cpu_ms_here"] = {
        "remember_content": _embedding_cpu_ms([remember_body(i)["content"] for i in range(n)]),
        "recall_query": _embedding_cpu_ms([recall_body(i)["query"] for i in range(n)]),
    }
    report["loadavg_before"], report["loadavg_after"] = load_before, os.getloadavg()
    report["command"] = f"python dev/bench-records/hotpath-threads-hot6.py {n}"
    return report


if __name__ == "__main__":
    print(json.dumps(main(int(sys.argv[1]) if len(sys.argv) > 1 else 300), indent=2))
