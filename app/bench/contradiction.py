"""`memwarden bench contradiction`: what reading a change of state by meaning adds to screening's
contradiction check, beyond the embedding remember computes anyway.

Each sample is one write checked against its five nearest live texts (as screening does), twice,
interleaved in one run: by frames alone (``contradiction.detect`` without a meaning) and by frames
and meaning (building the ``attributes.Meaning`` from the write's and the live texts' vectors, then
``detect`` with it). The vectors are embedded before timing (remember already has the write's, the
live rows store theirs) and the prototypes once, so the figure is CPU ms per write beyond the
embedding: the prototype reads, the cue grammar, the subject reading and the value check.

    memwarden bench contradiction [--n 2000] [--out report.json]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any

from app.bench import common
from app.core import attributes
from app.core.screening import contradiction

# General notes an assistant keeps, and updates to them: the mix a write meets among its neighbours.
LIVE = ["{n} lives in Oslo.", "{n} works at Acme Corp.", "{n}'s mobile number is +47 912 34 567.",
        "{n} drives a 2015 Honda Civic.", "{n} is vegetarian.", "{n}'s dentist is Dr. Brandt.",
        "{n} banks with Nordea.", "{n}'s rent is 14,000 NOK a month.", "{n} is learning Japanese.",
        "{n} plays guitar on weekends."]
WRITES = ["{n} moved to Bergen last month.", "{n} quit Acme and now works at Globex.",
          "{n} got a new mobile number: +47 998 76 543.", "{n} sold the Civic and drives a Tesla now.",
          "{n} started eating fish again.", "{n} is spending two weeks in Rome on holiday.",
          "{n} also has a savings account at DNB.", "{n} likes green tea in the afternoon.",
          "{n} switched to the Neovim editor.", "{n}'s sister now lives in Lisbon."]
NAMES = ["Heidi", "Ravi", "Ana", "Tomás", "Li Na", "The user", "Olga", "Mehmet"]


def run(settings, n: int) -> dict:
    from app.embeddings import get_embedder

    embedder = get_embedder(settings.embedder)
    writes = [WRITES[i % len(WRITES)].format(n=NAMES[i % len(NAMES)]) for i in range(n)]
    lives = [[LIVE[(i + k) % len(LIVE)].format(n=NAMES[i % len(NAMES)]) for k in range(5)] for i in range(n)]
    texts = sorted(set(writes) | {t for group in lives for t in group})
    vectors = dict(zip(texts, embedder.embed(texts)))
    attributes.prototypes(embedder.embed, embedder.name)
    frames, meaning, flagged = [], [], {"frames": 0, "meaning": 0}
    for write, live in zip(writes, lives):
        started = time.process_time()
        a = contradiction.detect(write, live)
        frames.append((time.process_time() - started) * 1000)
        started = time.process_time()
        read = attributes.meaning(embedder.embed, embedder.name, vectors[write], [vectors[t] for t in live])
        b = contradiction.detect(write, live, read)
        meaning.append((time.process_time() - started) * 1000)
        flagged["frames"] += a is not None
        flagged["meaning"] += b is not None
    report: dict[str, Any] = {"samples": n, "live_per_write": 5, "embedder": embedder.name, "loadavg_1_5_15": list(os.getloadavg()),
              "cpu_ms_per_write": {
                  "frames": {f"p{q}": round(common.percentile(frames, q), 3) for q in (50, 95)},
                  "frames_and_meaning": {f"p{q}": round(common.percentile(meaning, q), 3) for q in (50, 95)}},
              "flagged": flagged}
    report["cpu_ms_per_write"]["meaning_adds_p50"] = round(
        report["cpu_ms_per_write"]["frames_and_meaning"]["p50"] - report["cpu_ms_per_write"]["frames"]["p50"], 3)
    return report


def cmd_contradiction(args, settings) -> None:
    report = run(settings, args.n)
    text = json.dumps(report, indent=2)
    if args.out:
        Path(args.out).write_text(text + "\n")
    print(text)


def add_parser(bench: argparse._SubParsersAction) -> None:
    p = bench.add_parser("contradiction", help="CPU cost of reading a change of state by meaning, A/B",
                         description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, default=2000, help="writes to check (default 2000)")
    p.add_argument("--out", help="write the JSON report here")
    p.set_defaults(func=cmd_contradiction)
