"""Measure write screening on blind sets, the way an agent meets it: through a real `memwarden serve`.

Each set is JSONL, one write a line: `id`, `family`, `label` (`poisoned` | `benign`), `agent`,
`type` (a procedure in prose is sent as `semantic`: `procedural` memories are FSM documents),
`source` (`user`, `document`, `email`, `web`, `tool`, `inferred`, or absent), `prior` (live
memories of the agent the write relates to) and `content`. A write's agent gets its own id, so one
write's prior memories never meet another's (with `--shared-agents`, a benign stream's rows keep
their `agent`, so each agent's history grows as an assistant's does and `unlike_agent` can read it); its priors are
remembered first, as the user's, and approved by a reviewer key when staged. Then the write is remembered under the
tenant's default policy. A poisoned write is *stopped* when it is staged (202) or refused (403/422); a benign one is
*staged* when it is not stored live.

Several source trees can be measured in one run (`--tree`, e.g. a worktree at an older commit
beside this checkout), each against its own fresh server and database, with the same venv: an A/B
of screening on the same writes, on the same machine, at the same load. Run from the checkout:

    python dev/screening/measure_blind.py --tree . --tree ../baseline --out report.json \\
        stranger-a.jsonl stranger-b.jsonl benign-stream.jsonl

Development tooling: not part of the package. A blind set is measured once; its report is kept
beside it, and the set is spent for tuning from then on.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from app.bench.common import clean_env, machine, scratch_dir, serve

STOPPED = {202, 403, 422}


def run_cli(tree: Path, data_dir: Path, *args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "app.cli", *args], cwd=tree, env=clean_env(data_dir),
                          capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        raise RuntimeError(f"memwarden {' '.join(args)} failed: {done.stderr[-2000:]}")
    return done.stdout


def key(tree: Path, data_dir: Path, scopes: str) -> str:
    return run_cli(tree, data_dir, "apikey", "create", "--tenant", "blind", "--scopes", scopes).strip().splitlines()[-1]


def load(path: Path) -> list[dict[str, Any]]:
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    for row in rows:
        row.setdefault("label", "benign")
        row.setdefault("family", "stream")
        row["set"] = path.stem
    return rows


def memory_type(row: dict[str, Any], content: str) -> str:
    """The row's type, except that a procedure written as prose is sent as `semantic`: Memwarden's
    `procedural` memories are FSM documents, and prose there is a 422 before any screening."""
    kind = row.get("type") or "semantic"
    if kind == "procedural":
        try:
            json.loads(content)
        except ValueError:
            return "semantic"
    return kind


def remember(http: httpx.Client, agent_id: str, row: dict[str, Any], content: str, source: str | None
             ) -> httpx.Response:
    body = {"agent_id": agent_id, "type": memory_type(row, content), "content": content}
    if source:
        body["source"] = source
    if row.get("user"):
        body["user_id"] = row["user"]
    return http.post("/v1/memories/remember", json=body)


def agent_of(row: dict[str, Any], n: int, shared: bool) -> str:
    """The row's agent id (the API's id grammar): its own, or with `shared` a stream row's agent of its set."""
    name = f"{row['set']}-{row['agent']}" if shared and row["family"] == "stream" else f"{row['agent']}-{n}"
    return re.sub(r"[^A-Za-z0-9_.:@-]+", "-", name)[-128:]


def replay(base_url: str, agent_key: str, reviewer_key: str, rows: list[dict[str, Any]],
           shared: bool = False) -> list[dict[str, Any]]:
    outcomes = []
    with httpx.Client(base_url=base_url, headers={"Authorization": f"Bearer {agent_key}"}, timeout=60) as agent, \
            httpx.Client(base_url=base_url, headers={"Authorization": f"Bearer {reviewer_key}"}, timeout=60) as rev:
        for n, row in enumerate(rows):
            agent_id = agent_of(row, n, shared)
            for prior in row.get("prior") or []:
                seeded = remember(agent, agent_id, {**row, "type": "semantic"}, prior, "user")
                if seeded.status_code == 202:
                    rev.post(f"/v1/changes/{seeded.json()['change_id']}/approve",
                             json={"confirm_risk": True}).raise_for_status()
                elif seeded.status_code != 201:
                    raise RuntimeError(f"prior of {row['id']}: {seeded.status_code} {seeded.text[:300]}")
            response = remember(agent, agent_id, row, row["content"], row.get("source"))
            refused = response.status_code in (403, 422) and response.json()["error"]["code"] == "validation_error"
            if response.status_code not in (201, *STOPPED) or refused:  # bad input is no screening stop
                raise RuntimeError(f"{row['id']}: {response.status_code} {response.text[:300]}")
            change = {}
            if response.status_code == 202:
                shown = rev.get(f"/v1/changes/{response.json()['change_id']}")
                shown.raise_for_status()
                change = shown.json()
            outcomes.append({"id": row["id"], "set": row["set"], "family": row["family"], "label": row["label"],
                             "status": response.status_code, "risk_level": change.get("risk_level"),
                             "flags": sorted(f["name"] for f in change.get("risk_flags") or []),
                             "policy_rule": change.get("policy_rule")})
    return outcomes


def summarise(outcomes: list[dict[str, Any]]) -> dict[str, Any]:
    by: dict[tuple[str, str], collections.Counter] = collections.defaultdict(collections.Counter)
    for o in outcomes:
        counted = by[(o["set"], o["family"])]
        counted[o["label"]] += 1
        counted[f"{o['label']}_stopped"] += o["status"] in STOPPED
    sets: dict[str, Any] = {}
    for (set_name, family), c in sorted(by.items()):
        entry = sets.setdefault(set_name, {"families": {}, "poisoned": 0, "poisoned_stopped": 0, "benign": 0,
                                           "benign_staged": 0})
        entry["families"][family] = {"poisoned_stopped": f"{c['poisoned_stopped']}/{c['poisoned']}",
                                     "benign_staged": f"{c['benign_stopped']}/{c['benign']}"}
        entry["poisoned"] += c["poisoned"]
        entry["poisoned_stopped"] += c["poisoned_stopped"]
        entry["benign"] += c["benign"]
        entry["benign_staged"] += c["benign_stopped"]
    return sets


def measure(tree: Path, rows: list[dict[str, Any]], shared: bool = False) -> dict[str, Any]:
    env_extra = {"MEMWARDEN_RATE_LIMIT_PER_MINUTE": "0", "MEMWARDEN_READ_BUDGET_PER_KEY": "0"}
    with scratch_dir() as data_dir, serve(data_dir, env={**clean_env(data_dir), **env_extra}, cwd=tree) as server:
        run_cli(tree, data_dir, "tenant", "create", "blind")
        agent_key = key(tree, data_dir, "memory:read,memory:write")
        reviewer_key = key(tree, data_dir, "review:decide,memory:read")
        started = time.perf_counter()
        outcomes = replay(server.base_url, agent_key, reviewer_key, rows, shared)
        seconds = round(time.perf_counter() - started, 1)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=tree, capture_output=True, text=True)
    return {"tree": str(tree), "commit": commit.stdout.strip(), "seconds": seconds, "sets": summarise(outcomes),
            "outcomes": outcomes}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("sets", nargs="+", type=Path)
    parser.add_argument("--tree", action="append", type=Path, required=True, help="a source tree to measure")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--shared-agents", action="store_true",
                        help="a benign stream's rows keep their agent, so its history grows")
    args = parser.parse_args()
    rows = [row for path in args.sets for row in load(path)]
    report = {"machine": machine(), "load_average_before": [round(x, 2) for x in os.getloadavg()],
              "writes": len(rows), "shared_agents": args.shared_agents,
              "trees": [measure(tree.resolve(), rows, args.shared_agents) for tree in args.tree]}
    report["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
    for tree in report["trees"]:
        print(f"\n== {tree['tree']} @ {tree['commit']} ({tree['seconds']} s)")
        for set_name, entry in tree["sets"].items():
            print(f"  {set_name}: poisoned stopped {entry['poisoned_stopped']}/{entry['poisoned']}, "
                  f"benign staged {entry['benign_staged']}/{entry['benign']}")
            for family, f in entry["families"].items():
                print(f"    {family:40} poisoned stopped {f['poisoned_stopped']:>7}  benign staged {f['benign_staged']:>7}")
    if args.out:
        args.out.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
