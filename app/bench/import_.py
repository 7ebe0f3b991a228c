"""`memwarden bench import`: how fast `memwarden import` brings N memories into a fresh database.

1. A fresh data dir; this process opens the embedded PostgreSQL through the services (migrated as
   `memwarden serve` would) and creates a tenant with the default policy.
2. A mem0 platform export of `--count` memories is written to a temp file: the synthetic facts of
   `bench scale` (seeded), spread over `--agents` agents and their users, with ids, categories and
   timestamps, as a mem0 user would bring them.
3. The import service runs on it exactly as `memwarden import` does — whole-file check (schema,
   redaction, policy), then batches of `--batch-size`: one embedding call, screening against live
   memory, insert with per-memory audit events and `memory.written` events, one transaction each.
   Phases are timed (check, write); the seconds spent embedding (in the importer's worker thread,
   overlapping the writes) are counted separately.
4. The same file is imported again: every id is already present, so this measures what resuming an
   interrupted import costs before it reaches the batches left to write.
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Sequence

from app.bench import common, scale_data


class TimedEmbedder:
    """The real embedder, with the seconds spent in it counted."""

    def __init__(self, inner):
        self.inner, self.seconds, self.texts = inner, 0.0, 0

    @property
    def dim(self) -> int:
        return self.inner.dim

    @property
    def name(self) -> str:
        return self.inner.name

    def embed(self, texts: Sequence[str]):
        started = time.perf_counter()
        try:
            return self.inner.embed(texts)
        finally:
            self.seconds += time.perf_counter() - started
            self.texts += len(texts)


def mem0_export(count: int, agents: int, seed: int) -> dict[str, Any]:
    """A mem0 platform export of `count` synthetic memories (ids, users, agents, categories, times)."""
    rng = random.Random(seed)
    users = {a: scale_data.users_for(rng, a, 20) for a in range(agents)}
    start = datetime(2025, 1, 1, tzinfo=timezone.utc)
    items = []
    for n in range(count):
        agent = rng.randrange(agents)
        user, fact = scale_data.memories(rng, users[agent], 1)[0]
        created = start + timedelta(seconds=n * 30)
        items.append({"id": str(uuid.UUID(int=rng.getrandbits(128))), "memory": fact.content, "user_id": user,
                      "agent_id": f"agent-{agent}", "metadata": {"question": fact.question},
                      "categories": [fact.type, rng.choice(["personal", "preferences", "health", "work"])],
                      "created_at": created.isoformat(), "updated_at": created.isoformat()})
    return {"memories": items}


def run(args: argparse.Namespace) -> dict[str, Any]:
    from app.config import Settings
    from app.services.runtime.context import AppContext
    from app.services.transfer.importer import import_file
    from app.services.tenancy.tenants import create_tenant

    report: dict[str, Any] = {"benchmark": "import", "config": {
        "count": args.count, "agents": args.agents, "batch_size": args.batch_size, "format": "mem0", "seed": args.seed}}
    with common.scratch_dir(args.data_dir) as data_dir, tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "mem0-export.json"
        path.write_text(json.dumps(mem0_export(args.count, args.agents, args.seed)))
        report["config"]["file_mb"] = round(path.stat().st_size / 1e6, 1)
        ctx = AppContext.open(Settings(data_dir=data_dir, rate_limit_per_minute=0))
        try:
            tenant = create_tenant(ctx, name="bench-import", actor=common.BENCH_ACTOR)
            timed = TimedEmbedder(ctx.embedder)
            ctx.__dict__["embedder"] = timed  # the cached_property's slot: every service call uses it
            marks: dict[str, float] = {}

            def progress(phase: str, total: int):
                marks[phase] = time.perf_counter()
                print(f"{phase} {total:,} memories", flush=True)
                done = [0]

                def advance(n: int) -> None:
                    done[0] += n
                    if phase == "importing" and done[0] % (args.batch_size * 40) < n:
                        rate = done[0] / (time.perf_counter() - marks[phase])
                        print(f"  {done[0]:,}/{total:,} ({rate:,.0f}/s)", flush=True)
                return advance

            started = time.perf_counter()
            result = import_file(ctx, tenant_id=tenant.id, path=path, actor=common.BENCH_ACTOR,
                                 batch_size=args.batch_size, progress=progress)
            ended = time.perf_counter()
            if not result.ok:
                raise SystemExit(f"import refused records: {[str(p) for p in result.problems[:5]]}")
            write_s = ended - marks["importing"]
            report["import"] = {
                "records": result.records, "imported_live": result.imported, "staged": result.staged,
                "batches": result.batches, "wall_s": round(ended - started, 1),
                "rate_per_s": round(result.records / (ended - started), 1),
                "check_s": round(marks["importing"] - started, 1), "write_s": round(write_s, 1),
                "embed_s": round(timed.seconds, 1), "embed_rate_per_s": round(timed.texts / timed.seconds, 1),
                "embed_overlaps_write": True,
            }
            print("re-importing the same file (resume: every id already present)", flush=True)
            started = time.perf_counter()
            again = import_file(ctx, tenant_id=tenant.id, path=path, actor=common.BENCH_ACTOR,
                                batch_size=args.batch_size)
            report["resume_rerun"] = {"skipped_existing": again.skipped_existing, "imported": again.imported,
                                      "wall_s": round(time.perf_counter() - started, 1)}
        finally:
            ctx.close()
    return report


def summary(report: dict[str, Any]) -> str:
    imp, again = report["import"], report["resume_rerun"]
    rows = [("import (check + embed + screen + write)", f"{imp['rate_per_s']:,.0f} memories/s ({imp['wall_s']:,.0f} s)"),
            ("whole-file check", f"{imp['check_s']:,.1f} s"),
            ("write phase (batches: screening, insert, audit)", f"{imp['write_s']:,.0f} s"),
            ("embedding, in a worker thread during the write phase",
             f"{imp['embed_rate_per_s']:,.0f} memories/s ({imp['embed_s']:,.0f} s busy)"),
            ("re-run (all present, resume cost)", f"{again['wall_s']:,.1f} s, {again['skipped_existing']:,} skipped")]
    return common.table(rows, [f"import ({report['config']['count']:,} mem0 memories)", "result"])


def cmd_import(args: argparse.Namespace, settings) -> int:
    started = time.perf_counter()
    load_before = common.machine()["loadavg_1_5_15"]
    report = run(args)
    report["wall_s"] = round(time.perf_counter() - started, 1)
    report["machine"] = {**common.machine(), "loadavg_before": load_before}
    report["command"] = (f"memwarden bench import --count {args.count} --agents {args.agents} "
                         f"--batch-size {args.batch_size}" + (f" --out {args.out}" if args.out else ""))
    print(summary(report))
    common.write_json(args.out, report)
    return 0


def add_parser(bench: argparse._SubParsersAction) -> None:
    p = bench.add_parser("import", help="import rate of N mem0 memories into a fresh database",
                         description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--count", type=int, required=True, help="memories in the generated mem0 export")
    p.add_argument("--agents", type=int, default=100)
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--seed", type=int, default=11)
    p.add_argument("--out", help="write the JSON report here (e.g. import.json)")
    p.add_argument("--data-dir", help="use (and keep) this empty directory instead of a temporary one")
    p.set_defaults(func=cmd_import)
