"""`memwarden bench consolidate`: consolidation on a scripted month of one assistant's notes.

One process, one fresh embedded PostgreSQL. The month (`app.bench.consolidation_month`: planted
repeated facts, routines, repeated questions, one-off mentions, noise) is written through the
import path (`prepare_remember` + `write_prepared`: redaction, screening and policy, with each
note's own day as `created_at`). Its recall history is written as recall tracking records it
(`last_recalled_at`: a usage statistic, outside the audited state): a share of the older notes
recalled within the protection window, a share long before it; then a few real recalls.

Then one consolidation pass (timed: wall and this process's CPU), a second pass (it must promote
and evict nothing), and the figures: precision and recall of promotions against the planted facts
(a promotion is a hit when most of its sources are one planted fact's notes; a fact promoted twice
counts once for recall and the extra as a false positive), evictions of notes recalled within the
protection window (must be 0), planted evidence evicted although its fact was not promoted, and
the cost per 1,000 short-term items.
"""

from __future__ import annotations

import argparse
import random
import resource
import time
from collections import Counter
from datetime import timedelta
from typing import Any

from app.bench.common import in_process_context, machine, scratch_dir, write_json
from app.config import Settings

ACTOR = {"kind": "bench", "id": "memwarden-bench"}
AGENT, USER = "assistant", "user-1"


def add_parser(bench: argparse._SubParsersAction) -> None:
    parser = bench.add_parser("consolidate", help="promotion precision/recall on a scripted month with planted "
                                                  "facts, evictions vs recent recalls, cost per 1,000 items")
    parser.add_argument("--seeds", default="7,11,23", help="comma list of month seeds (one tenant each)")
    parser.add_argument("--noise-per-day", type=int, default=12)
    parser.add_argument("--protect-recalled-days", type=float, default=7.0)
    parser.add_argument("--out", help="write the report as JSON here")
    parser.set_defaults(func=run)


def _write_month(ctx, tenant_id: str, notes) -> dict[str, str]:
    """The notes through the import path, each on its own day; returns memory id -> note index."""
    from app.core.access import Principal
    from app.core.ids import new_id
    from app.core.timefmt import utcnow
    from app.services.memory import remembering
    from app.services.tenancy.tenant_config import rules_for

    principal = Principal(tenant_id=tenant_id, key_id="key_bench", scopes=frozenset({"memory:write"}), agents=("*",))
    rules = rules_for(ctx, principal)
    end = utcnow()
    days = max(n.day for n in notes) + 1
    ids: dict[str, int] = {}
    embeddings = ctx.embedder.embed([n.content for n in notes])
    for start in range(0, len(notes), 200):
        with ctx.db.sessions.begin() as session:
            writes, vectors = [], []
            for i in range(start, min(len(notes), start + 200)):
                note = notes[i]
                at = end - timedelta(days=days - note.day) + timedelta(minutes=note.minute)
                write = remembering.prepare_remember(ctx, principal, {"agent_id": AGENT, "user_id": USER, "type": "episodic",
                                                              "content": note.content, "confidence": note.confidence},
                                             rules, memory_id=new_id("mem"), created_at=at, updated_at=at,
                                             precheck=False)
                writes.append(write)
                vectors.append(embeddings[i].tolist())
                ids[write.memory.id] = i
            remembering.write_prepared(ctx, session, principal, writes, vectors)
    return ids


def _recall_history(ctx, tenant_id: str, ids: dict[str, int], notes, protect_days: float, rng) -> set[str]:
    """Recall times for the month; returns the ids recalled within the protection window."""
    from sqlalchemy import text

    from app.core.access import Principal
    from app.core.timefmt import utcnow
    from app.services.memory import recall, recall_tracking

    now = utcnow()
    days = max(n.day for n in notes) + 1
    recent, long_ago = [], []
    for memory_id, i in ids.items():
        age = days - notes[i].day
        if age <= protect_days + 1:
            continue
        roll = rng.random()
        if roll < 0.15:
            recent.append((memory_id, now - timedelta(days=rng.uniform(0.1, protect_days - 0.5))))
        elif roll < 0.30:
            long_ago.append((memory_id, now - timedelta(days=rng.uniform(protect_days + 0.5, age - 0.1))))
    with ctx.db.sessions.begin() as session:
        for memory_id, at in recent + long_ago:
            session.execute(text("UPDATE memories SET last_recalled_at = :at, recall_count = recall_count + 1 "
                                 "WHERE tenant_id = :t AND id = :id"), {"at": at, "t": tenant_id, "id": memory_id})
    principal = Principal(tenant_id=tenant_id, key_id="key_bench", scopes=frozenset({"memory:read"}), agents=("*",))
    really = set()
    for query in ("the weekly status report", "the Q3 budget thread", "parking permit", "boarding pass"):
        really |= {h["id"] for h in recall.recall(ctx, principal, {"agent_id": AGENT, "user_id": USER, "k": 3,
                                                                   "query": query})["hits"]}
    recall_tracking.flush(ctx.db.engine)
    return {m for m, _ in recent} | really


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _one_month(ctx, seed: int, noise_per_day: int, protect_days: float) -> dict[str, Any]:
    from sqlalchemy import text

    from app.bench.consolidation_month import PLANTED, month
    from app.services.memory import consolidation
    from app.services.tenancy.tenants import create_tenant

    rng = random.Random(seed)
    notes = month(seed=seed, noise_per_day=noise_per_day)
    tenant = create_tenant(ctx, name=f"bench-consolidate-{seed}", actor=ACTOR)
    ids = _write_month(ctx, tenant.id, notes)
    protected = _recall_history(ctx, tenant.id, ids, notes, protect_days, rng)
    consolidation.set_config(ctx, tenant_id=tenant.id, actor=ACTOR, agents=["*"],
                             protect_recalled_days=protect_days)
    wall, cpu = time.perf_counter(), _cpu()
    first = consolidation.consolidate_tenant(ctx, tenant.id, trigger="cli", actor=ACTOR)
    wall, cpu = time.perf_counter() - wall, _cpu() - cpu
    second = consolidation.consolidate_tenant(ctx, tenant.id, trigger="cli", actor=ACTOR)

    hits, false_positives, promoted_facts = 0, [], Counter()
    for p in first["promotions"]:
        if p.get("outcome") not in ("promoted", "staged"):
            continue
        facts = Counter(notes[ids[s]].fact for s in p["source_ids"])
        fact, count = facts.most_common(1)[0]
        if fact is not None and count * 2 > len(p["source_ids"]) and promoted_facts[fact] == 0:
            hits += 1
        else:
            false_positives.append({"kinds": dict(Counter(notes[ids[s]].kind for s in p["source_ids"])),
                                    "mentions": p["mentions"], "score": p["score"]})
        if fact is not None:
            promoted_facts[fact] += 1
    promotions = hits + len(false_positives)
    evicted = [m for e in first["evictions"] for m in e["memory_ids"]]
    with ctx.db.sessions() as session:
        archived = set(session.execute(text("SELECT id FROM memories WHERE tenant_id = :t AND status = 'archived'"),
                                       {"t": tenant.id}).scalars())
        texts = session.execute(text("SELECT content FROM memories WHERE tenant_id = :t AND type = 'semantic'"),
                                {"t": tenant.id}).scalars().all()
    lost = [m for m in evicted if notes[ids[m]].fact is not None and notes[ids[m]].fact not in promoted_facts]
    return {
        "seed": seed, "items": len(notes), "planted_facts": len(PLANTED),
        "planted_notes": sum(1 for n in notes if n.kind == "planted"),
        "promotions": promotions, "true_positives": hits, "false_positives": false_positives,
        "precision": round(hits / promotions, 3) if promotions else None,
        "recall": round(len([f for f in PLANTED if promoted_facts[f]]) / len(PLANTED), 3),
        "facts_promoted_twice": sum(1 for c in promoted_facts.values() if c > 1),
        "evicted": len(evicted), "evicted_recalled_within_window": len(set(evicted) & protected),
        "protected_notes": len(protected), "archived_rows": len(archived),
        "planted_evidence_evicted_unpromoted": len(lost),
        "rerun": {"promoted": second["promoted"], "staged": second["staged"], "evicted": second["evicted"]},
        "semantic_texts": sorted(texts),
        "cost": {"short_term_items": first["items"], "wall_s": round(wall, 3), "cpu_s": round(cpu, 3),
                 "wall_ms_per_1000_items": round(wall * 1000 / max(1, first["items"]) * 1000, 1),
                 "cpu_ms_per_1000_items": round(cpu * 1000 / max(1, first["items"]) * 1000, 1),
                 "embeddings_per_1000_items": round(promotions * 1000 / max(1, first["items"]), 2)},
    }


def run(args: argparse.Namespace, settings: Settings) -> int:
    before = machine()
    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    months = []
    with scratch_dir() as data_dir, in_process_context(data_dir, pool_size=3, checkpoint_every=10_000) as (ctx, _):
        for seed in seeds:
            result = _one_month(ctx, seed, args.noise_per_day, args.protect_recalled_days)
            months.append(result)
            print(f"seed {seed}: {result['items']} notes, {result['promotions']} promotion(s), precision "
                  f"{result['precision']}, recall {result['recall']}; evicted {result['evicted']} "
                  f"({result['evicted_recalled_within_window']} recalled within {args.protect_recalled_days:g} days, "
                  f"{result['planted_evidence_evicted_unpromoted']} planted notes of unpromoted facts); rerun "
                  f"{result['rerun']}; {result['cost']['wall_ms_per_1000_items']} ms wall / "
                  f"{result['cost']['cpu_ms_per_1000_items']} ms CPU per 1,000 items", flush=True)
    tp = sum(m["true_positives"] for m in months)
    promotions = sum(m["promotions"] for m in months)
    planted = sum(m["planted_facts"] for m in months)
    recalled = sum(round(m["recall"] * m["planted_facts"]) for m in months)
    items = sum(m["cost"]["short_term_items"] for m in months)
    summary = {"precision": round(tp / promotions, 3) if promotions else None, "recall": round(recalled / planted, 3),
               "evicted": sum(m["evicted"] for m in months),
               "evicted_recalled_within_window": sum(m["evicted_recalled_within_window"] for m in months),
               "wall_ms_per_1000_items": round(sum(m["cost"]["wall_s"] for m in months) * 1e6 / max(1, items), 1),
               "cpu_ms_per_1000_items": round(sum(m["cost"]["cpu_s"] for m in months) * 1e6 / max(1, items), 1)}
    print(f"all: precision {summary['precision']}, recall {summary['recall']}, evicted {summary['evicted']} "
          f"({summary['evicted_recalled_within_window']} recalled within the window), "
          f"{summary['wall_ms_per_1000_items']} ms wall / {summary['cpu_ms_per_1000_items']} ms CPU per 1,000 items")
    write_json(args.out, {"benchmark": "consolidate", "machine": before, "loadavg_after": machine()["loadavg_1_5_15"],
                          "protect_recalled_days": args.protect_recalled_days, "summary": summary, "months": months})
    return 0
