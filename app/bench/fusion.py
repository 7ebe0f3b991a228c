"""`memwarden bench fusion`: memorywire's adversarial-fusion experiment, run through Memwarden's router.

The setup follows memorywire's published methodology (its `scripts/run_adversarial.py`, THREATS
§3.3), re-implemented here: M = 50 memories, Q = 20 queries with two gold ids each, seed 1337;
three stores — two benign ones that rank the gold ids first and then their own shuffle of
distractors, and one injector that puts K fabricated ids at ranks 0..K-1 (top score 1.0) and a
benign-looking tail after them; each store is asked for 20 hits (memorywire's 4 × k; Memwarden's
router asks max(2k, 20)) and the fused top 5 is scored: recall@5 against the gold ids, leak rate
(share of the top 5 that is injected) and gold displacement (share of the un-attacked top 5's gold
ids pushed out). K sweeps 0, 5, 10, 25, 50.

In Memwarden's router the built-in store is one of the three rankings (a benign one) and each
backend hit passes through the router's own fusion (`routing_rules.fuse_governed`, the function
recall calls). Run two ways: with the drop-ungoverned rule off (every hit competes under its own id:
the fusion math alone, comparable with memorywire) and on (what recall does: a hit Memwarden never
delivered is dropped). A third variant is the honest limit of that rule: an injector that
promotes *governed* but irrelevant memories (ids Memwarden did deliver) is not dropped; only the
fusion method stands between it and the top 5.

When the `memorywire` package is installed, its own `MemoryRouter` runs the same scenario in the
same process, side by side.
"""

from __future__ import annotations

import argparse
import asyncio
import random
from typing import Any

from app.bench.common import machine, table, write_json
from app.core import routing_rules

SEED = 1337
CORPUS = 50
QUERIES = 20
GOLD = 2
TOP_K = 5
PER_STORE_K = 20
BUDGETS = (0, 5, 10, 25, 50)
METHODS = ("rrf", "max", "weighted")


def add_parser(bench: argparse._SubParsersAction) -> None:
    parser = bench.add_parser("fusion", help="memorywire's adversarial-fusion experiment through the router")
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--out", help="write the JSON report here")
    parser.set_defaults(func=run)


def scenario(seed: int) -> dict[str, Any]:
    """Corpus, queries with gold ids, the two benign rankings and the injector's benign tail."""
    rng = random.Random(seed)
    corpus = [f"m{i:03d}" for i in range(CORPUS)]
    queries = [(f"q{q:03d}", rng.sample(corpus, GOLD)) for q in range(QUERIES)]

    def benign(store_seed: int) -> dict[str, list[str]]:
        store_rng, out = random.Random(store_seed), {}
        for query, gold in queries:
            rest = [m for m in corpus if m not in gold]
            store_rng.shuffle(rest)
            out[query] = gold + rest[:PER_STORE_K - len(gold)]
        return out

    return {"corpus": corpus, "queries": queries, "benign": [benign(seed + 101), benign(seed + 102)],
            "tail": benign(seed + 999), "injected": [f"a{i:04d}" for i in range(CORPUS + 16)]}


def _injector(sc: dict[str, Any], query: str, budget: int, inject: list[str]) -> list[tuple[str, float]]:
    top = [(mid, max(1.0 - rank * 0.001, 0.0)) for rank, mid in enumerate(inject[:budget][:PER_STORE_K])]
    room = PER_STORE_K - len(top)
    return top + [(mid, 0.5 - i * 0.01) for i, mid in enumerate(sc["tail"][query][:room])]


def _benign(ranking: list[str]) -> list[tuple[str, float]]:
    return [(mid, 1.0 - rank * 0.01) for rank, mid in enumerate(ranking[:PER_STORE_K])]


def _score(results: dict[str, list[str]], sc: dict[str, Any], baseline: dict[str, list[str]],
           injected: set[str]) -> dict[str, float]:
    recall = leak = displaced = 0.0
    for query, gold in sc["queries"]:
        top = results[query]
        recall += len(set(gold) & set(top)) / len(gold)
        leak += sum(1 for m in top if m in injected) / len(top) if top else 0.0
        base_gold = set(baseline[query]) & set(gold)
        displaced += len(base_gold - set(top)) / len(base_gold) if base_gold else 0.0
    n = len(sc["queries"])
    return {"recall_at_5": round(recall / n, 3), "leak": round(leak / n, 3), "displacement": round(displaced / n, 3)}


def memwarden_router(sc: dict[str, Any], method: str, budget: int, *, drop: bool,
                     promote_governed: bool = False) -> dict[str, list[str]]:
    """The fused top 5 per query through `routing_rules.fuse_governed` (the router's recall fusion).
    The ledger: every corpus id was delivered to each backend under its own id."""
    ledger = {m: m for m in sc["corpus"]}
    out = {}
    for query, gold in sc["queries"]:
        inject = [m for m in sc["corpus"] if m not in gold] if promote_governed else sc["injected"]
        stores = [routing_rules.StoreRanking("benign", _benign(sc["benign"][1][query]), ledger),
                  routing_rules.StoreRanking("injector", _injector(sc, query, budget, inject), ledger)]
        fused = routing_rules.fuse_governed(method, "memwarden", _benign(sc["benign"][0][query]), stores, TOP_K,
                                            drop_ungoverned=drop)
        out[query] = fused.ids
    return out


def memorywire_router(sc: dict[str, Any], method: str, budget: int) -> dict[str, list[str]] | None:
    """The same scenario through memorywire's own MemoryRouter (None when memorywire is absent)."""
    try:
        from memorywire.models import FusionAlgorithm, MemoryType, RecallHit, RecallRequest, RecallResponse
        from memorywire.router import MemoryRouter
    except ImportError:
        return None

    class Ranked:
        """A stub MemoryStore answering recall from a fixed ranking per query."""

        def __init__(self, name: str, answer):
            self.BACKEND_NAME, self.answer = name, answer
            self.capabilities = {"semantic", "episodic", "procedural", "emotional"}

        async def recall(self, req: RecallRequest) -> RecallResponse:
            hits = [RecallHit(id=mid, type=MemoryType.SEMANTIC, content=mid, score=score, source_store=self.BACKEND_NAME)
                    for mid, score in self.answer(req.query)[:req.k or TOP_K]]
            return RecallResponse(results=hits, fusion_used=req.fusion or FusionAlgorithm.RRF,
                                  stores_queried=[self.BACKEND_NAME], latency_ms=0)

        async def health(self) -> dict[str, Any]:
            return {"status": "ok"}

    stores = [Ranked("benign-0", lambda q: _benign(sc["benign"][0][q])),
              Ranked("benign-1", lambda q: _benign(sc["benign"][1][q])),
              Ranked("injector", lambda q: _injector(sc, q, budget, sc["injected"]))]
    router = MemoryRouter(stores, default_fusion=FusionAlgorithm(method), weights={s.BACKEND_NAME: 1.0 for s in stores})

    async def all_queries():
        out = {}
        for query, _ in sc["queries"]:
            response = await router.recall(RecallRequest(agent_id="adv", query=query, k=TOP_K,
                                                         fusion=FusionAlgorithm(method)))
            out[query] = [hit.id for hit in response.results]
        return out

    return asyncio.run(all_queries())


def run(args: argparse.Namespace, settings: Any) -> int:
    sc = scenario(args.seed)
    injected = set(sc["injected"])
    variants = {
        "memwarden_router_fusion_only": lambda m, k: memwarden_router(sc, m, k, drop=False),
        "memwarden_router_drop_ungoverned": lambda m, k: memwarden_router(sc, m, k, drop=True),
        "memorywire_router": lambda m, k: memorywire_router(sc, m, k),
    }
    report: dict[str, Any] = {"machine": machine(), "seed": args.seed, "corpus": CORPUS, "queries": QUERIES,
                              "budgets": list(BUDGETS), "results": {}}
    rows = []
    for variant, route in variants.items():
        for method in METHODS:
            baseline = route(method, 0)
            if baseline is None:
                continue
            per_k = []
            for budget in BUDGETS:
                scores = _score(route(method, budget), sc, baseline, injected)
                per_k.append({"k_attack": budget, **scores})
                rows.append([variant, method, budget, scores["recall_at_5"], scores["leak"], scores["displacement"]])
            report["results"].setdefault(variant, {})[method] = per_k
    # The limit of the drop rule: the injector promotes governed but irrelevant memories.
    corpus_ids = set(sc["corpus"])
    for method in METHODS:
        baseline = memwarden_router(sc, method, 0, drop=True, promote_governed=True)
        per_k = []
        for budget in BUDGETS:
            ranked = memwarden_router(sc, method, budget, drop=True, promote_governed=True)
            scores = _score(ranked, sc, baseline, set())
            irrelevant = sum(len([m for m in ranked[q] if m in corpus_ids and m not in g]) / len(ranked[q])
                             for q, g in sc["queries"]) / len(sc["queries"])
            scores["irrelevant_share"] = round(irrelevant, 3)
            per_k.append({"k_attack": budget, **scores})
            rows.append(["memwarden_promote_governed", method, budget, scores["recall_at_5"],
                         f"({scores['irrelevant_share']})", scores["displacement"]])
        report["results"].setdefault("memwarden_promote_governed", {})[method] = per_k
    print(table(rows, ["variant", "fusion", "K", "recall@5", "leak", "displacement"]))
    print("(for memwarden_promote_governed the leak column shows the share of irrelevant governed memories)")
    write_json(args.out, report)
    return 0
