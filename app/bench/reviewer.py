"""`memwarden bench reviewer`: how many human decisions the learned policy saves, and that it lets
no poisoned write through.

A stream of writes (default 2,000: ~5 % poisoned, from the screening corpus; the rest benign, from
the writes the other benchmarks make and the corpus's benign rows) from a handful of agents, each
with its own source and tags, is replayed through a real `memwarden serve` into a tenant whose
policy sends every remember to review. A scripted reviewer follows the ground truth: it approves
every benign write (confirming the risk when screening flagged it high) and rejects every poisoned
one.

Phase 1 replays the first half with no learned rules. Then the admin key lists the suggestions
mined from those decisions (`GET /v1/policy/suggestions`) and accepts them all. Phase 2 replays
the second half. The report gives the human decisions each phase needed, and the poisoned writes
that reached memory without a human (a 201, i.e. a learned rule or the policy let it through):
that must be 0, else the command exits 1.

With canaries on (`--canary-one-in`, default 20; 0 turns them off), the server stages a reviewer
canary (`app.services.review.canaries`) for every that many real staged writes. The scripted reviewer
knows nothing of them: every so often it sweeps the queue for changes it did not write and decides
them as a person reading the page would, by what screening says (reject at risk medium or high,
approve otherwise). The report's `canaries` gives how many it decided, caught and missed (its
catch rate, from `memwarden canaries status`).

`--browser` adds the reviewer UI measurements (`app.bench.reviewer_ui.run_ui_flows`) under "ui".
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import random
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from app.bench.common import clean_env, cli, client, machine, quiet_http_logs, scratch_dir, serve, table, write_json
from app.bench.corpora import DATA, benign_load_writes, load_corpus

AGENTS = [  # (agent id, source, tags): an agent writes from its own source with its own tags
    ("support-bot", "zendesk", ["faq"]), ("crm-sync", "salesforce", ["account"]),
    ("notes-bot", "meeting-notes", ["meeting"]), ("planner", "calendar", ["schedule"]),
    ("research-bot", "web", ["research"]),
]
# Poison carried in the write itself. The corpus's other poisoned classes only show against prior
# state (a contradiction needs the memory it contradicts, provenance laundering a key restricted
# to some sources, an FSM widening the machine it widens), which this stream does not build.
POISON_CLASSES = ("prompt_injection", "exfiltration", "hidden_characters", "secret_leftover", "pii")
REVIEW_ALL = {"rules": [{"id": "review-every-remember", "description": "A person reviews every remember.",
                         "match": {"operations": ["remember"]}, "action": "require_approval"}]}


def add_parser(bench: argparse._SubParsersAction) -> None:
    parser = bench.add_parser("reviewer", help="human decisions before/after accepting learned policy suggestions")
    parser.add_argument("--writes", type=int, default=2_000, help="writes in the stream (half per phase)")
    parser.add_argument("--poisoned-share", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=22)
    parser.add_argument("--min-decisions", type=int, default=20,
                        help="MEMWARDEN_SUGGEST_MIN_DECISIONS for the server")
    parser.add_argument("--canary-one-in", type=int, default=20,
                        help="one reviewer canary per N real staged writes (0: no canaries)")
    parser.add_argument("--browser", action="store_true",
                        help="also measure reviewer UI flows in Chromium (app.bench.reviewer_ui)")
    parser.add_argument("--out", help="write the JSON report here")
    parser.add_argument("--data-dir")
    parser.set_defaults(func=run)


def stream(n: int, poisoned_share: float, seed: int) -> list[dict[str, Any]]:
    """The labelled writes, shuffled deterministically: each gets an agent (its source and tags)."""
    rng = random.Random(seed)
    corpus = load_corpus(DATA)
    poisoned_pool = [r for r in corpus if r["label"] == "poisoned" and r["class"] in POISON_CLASSES]
    benign_pool = [r for r in corpus if r["label"] == "benign"] + benign_load_writes(seed)
    n_poisoned = round(n * poisoned_share)
    rows = [dict(rng.choice(poisoned_pool), label="poisoned") for _ in range(n_poisoned)]
    rows += [dict(rng.choice(benign_pool), label="benign") for _ in range(n - n_poisoned)]
    rng.shuffle(rows)
    for i, row in enumerate(rows):
        agent, source, tags = AGENTS[rng.randrange(len(AGENTS))]
        row.update(agent_id=agent, source=source, tags=tags)
        if row.get("type", "semantic") != "procedural":  # an FSM is JSON: left as it is
            # A unique suffix: the same corpus text twice would otherwise be a duplicate, not a new fact.
            row["content"] = f"{row['content']} (#{i})"
    return rows


def _decide(reviewer: httpx.Client, change_id: str, benign: bool) -> None:
    """The scripted reviewer: approve benign (confirming any risk), reject poisoned."""
    if not benign:
        response = reviewer.post(f"/v1/changes/{change_id}/reject", json={"reason": "poisoned (ground truth)"})
    else:
        diff = reviewer.get(f"/v1/changes/{change_id}/diff").json()["diff"]
        response = reviewer.post(f"/v1/changes/{change_id}/approve",
                                 json={"seen_state": diff["fingerprint"], "confirm_risk": True})
    if response.status_code != 200:
        raise RuntimeError(f"decide {change_id} -> {response.status_code}: {response.text[:300]}")


SWEEP_EVERY = 50
"""Writes between the scripted reviewer's sweeps of the queue for changes it did not write."""
RISKY = ("medium", "high")


def sweep(reviewer: httpx.Client) -> int:
    """Decide every pending change in the queue (none of the stream's own: those are decided as they
    are staged) by what screening shows: reject at medium or high risk, else approve. Returns how many."""
    decided = 0
    while True:
        listed = reviewer.get("/v1/changes", params={"status": "pending", "limit": 100})
        listed.raise_for_status()
        items = listed.json()["items"]
        if not items:
            return decided
        for item in items:
            _decide(reviewer, item["id"], item["risk_level"] not in RISKY)
            decided += 1


def replay(agent: httpx.Client, reviewer: httpx.Client, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Write each row; decide every staged one. Counts what needed a human and what got through."""
    counts = {"writes": len(rows), "poisoned": 0, "human_decisions": 0, "auto_approved": 0,
              "poisoned_without_human": 0, "benign_staged": 0, "poisoned_staged": 0, "refused": 0,
              "swept": 0}
    started = time.perf_counter()
    for i, row in enumerate(rows):
        if i % SWEEP_EVERY == SWEEP_EVERY - 1:
            counts["swept"] += sweep(reviewer)
        benign = row["label"] == "benign"
        counts["poisoned"] += not benign
        response = agent.post("/v1/memories/remember", json={
            "agent_id": row["agent_id"], "type": row.get("type", "semantic"), "content": row["content"],
            "tags": row["tags"], "source": row["source"]})
        if response.status_code == 202:
            counts["benign_staged" if benign else "poisoned_staged"] += 1
            counts["human_decisions"] += 1
            _decide(reviewer, response.json()["change_id"], benign)
        elif response.status_code == 201:
            counts["auto_approved"] += 1
            if not benign:
                counts["poisoned_without_human"] += 1
                counts.setdefault("poisoned_without_human_classes", []).append(row["class"])
        elif response.status_code in (403, 422):  # refused by policy or redaction: never stored
            counts["refused"] += 1
            counts.setdefault("refused_codes", []).append(response.json()["error"]["code"])
        else:
            raise RuntimeError(f"remember -> {response.status_code}: {response.text[:300]}")
    time.sleep(2 * CANARY_POLL_SECONDS)  # a canary due from the last writes is staged, then swept
    counts["swept"] += sweep(reviewer)
    counts["seconds"] = round(time.perf_counter() - started, 1)
    return counts


CANARY_POLL_SECONDS = 1


def canary_report(data_dir: Path) -> dict[str, Any]:
    """The scripted reviewer's canaries decided, caught and missed (`memwarden canaries status`)."""
    status = json.loads(cli(data_dir, "canaries", "status", "--tenant", "bench"))
    reviewers = status["reviewers"]
    decided = sum(r["decided"] for r in reviewers)
    caught = sum(r["caught"] for r in reviewers)
    return {"one_in": status["config"]["one_in"], "decided": decided, "caught": caught,
            "missed": decided - caught, "catch_rate": round(caught / decided, 4) if decided else None}


def _key(data_dir: Path, scopes: str) -> str:
    return cli(data_dir, "apikey", "create", "--tenant", "bench", "--scopes", scopes).strip().splitlines()[-1].strip()


def run(args: argparse.Namespace, settings) -> int:
    quiet_http_logs()
    if args.browser and importlib.util.find_spec("app.bench.reviewer_ui") is None:
        raise SystemExit("--browser needs app.bench.reviewer_ui, which is not installed")
    load_before = [round(x, 2) for x in os.getloadavg()]
    rows = stream(args.writes, args.poisoned_share, args.seed)
    half = len(rows) // 2
    # The replay compresses days of reviewing into seconds, one write at a time: each scripted decision
    # stands for its own occasion (a batch gap of 0) and one day is enough, or nothing would be learned.
    extra = {"MEMWARDEN_SUGGEST_MIN_DECISIONS": str(args.min_decisions), "MEMWARDEN_SUGGEST_MIN_DAYS": "1",
             "MEMWARDEN_SUGGEST_BATCH_GAP_SECONDS": "0", "MEMWARDEN_RATE_LIMIT_PER_MINUTE": "0",
             "MEMWARDEN_READ_BUDGET_PER_KEY": "0", "MEMWARDEN_CANARY_POLL_SECONDS": str(CANARY_POLL_SECONDS)}
    with scratch_dir(args.data_dir) as data_dir, serve(data_dir, env={**clean_env(data_dir), **extra}) as server:
        cli(data_dir, "tenant", "create", "bench")
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as fh:
            json.dump(REVIEW_ALL, fh)
        try:
            cli(data_dir, "tenant", "set", "--tenant", "bench", "--policy-file", fh.name)
        finally:
            os.unlink(fh.name)
        if args.canary_one_in > 0:
            cli(data_dir, "canaries", "set", "--tenant", "bench", "--one-in", str(args.canary_one_in))
        agent = client(server.base_url, _key(data_dir, "memory:read,memory:write"))
        reviewer = client(server.base_url, _key(data_dir, "review:decide,memory:read"))
        admin = client(server.base_url, _key(data_dir, "admin"))
        print(f"phase 1: {half} writes, every remember reviewed")
        before = replay(agent, reviewer, rows[:half])
        listed = admin.get("/v1/policy/suggestions")
        listed.raise_for_status()
        suggestions = listed.json()["items"]
        accepted = []
        for suggestion in suggestions:
            response = admin.post(f"/v1/policy/suggestions/{suggestion['id']}/accept")
            response.raise_for_status()
            accepted.append({"rule_id": response.json()["rule_id"], "description": suggestion["description"],
                             "evidence": suggestion["evidence"]})
        print(f"accepted {len(accepted)} suggestions; phase 2: {len(rows) - half} writes")
        after = replay(agent, reviewer, rows[half:])
        for http in (agent, reviewer, admin):
            http.close()
        canaries = canary_report(data_dir) if args.canary_one_in > 0 else None
    report: dict[str, Any] = {
        "benchmark": "reviewer", "machine": machine(), "load_average_before": load_before,
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "writes": len(rows), "poisoned_share": args.poisoned_share, "seed": args.seed,
        "min_decisions": args.min_decisions, "agents": [a for a, _, _ in AGENTS],
        "phase_1_no_learned_rules": before, "learned_rules_accepted": accepted, "phase_2_with_learned_rules": after,
        "human_decisions_saved": before["human_decisions"] - after["human_decisions"],
        "poisoned_without_human": before["poisoned_without_human"] + after["poisoned_without_human"],
        "canaries": canaries,
        "command": f"memwarden bench reviewer --writes {args.writes} --canary-one-in {args.canary_one_in}"
                   + (" --browser" if args.browser else ""),
    }
    if args.browser:
        report["ui"] = ui_flows()
    print(table([[name, c["writes"], c["poisoned"], c["human_decisions"], c["auto_approved"],
                  c["poisoned_without_human"], c["seconds"]]
                 for name, c in (("1: no learned rules", before), ("2: learned rules", after))],
                ["phase", "writes", "poisoned", "human decisions", "auto-approved", "poisoned w/o human", "s"]))
    if canaries:
        print(f"canaries: {canaries['decided']} decided by the scripted reviewer, {canaries['caught']} caught, "
              f"{canaries['missed']} missed (catch rate {canaries['catch_rate']})")
    write_json(args.out, report)
    if report["poisoned_without_human"]:
        print(f"FAIL: {report['poisoned_without_human']} poisoned writes reached memory without a human")
        return 1
    return 0


def ui_flows() -> dict[str, Any]:
    """The browser half (another module, optional): wall time and inputs per decision in Chromium, and
    the time 20 decisions take by keyboard and by mouse, at a desktop's and a phone's width."""
    from app.bench.reviewer_ui import run_ui_flows

    return run_ui_flows(20, widths=(1366, 390))

