"""`memwarden compact`: distil near-duplicate (and, if configured, stale) memories now, or opt a
tenant in to the background job (OpenWOP RFC 0012; see app/services/memory/compaction.py)."""

from __future__ import annotations

import argparse

from app.cli import common as cli_common
from app.config import Settings


def cmd_compact(args: argparse.Namespace, settings: Settings) -> int:
    from app.services.memory import compaction
    from app.services.tenancy.tenants import resolve_tenant

    ctx, actor = cli_common.open_context(settings), cli_common.cli_actor()
    tenant = resolve_tenant(ctx, args.tenant)
    if args.schedule:
        config = compaction.set_config(ctx, tenant_id=tenant.id, actor=actor, enabled=args.schedule == "on",
                                       similarity=args.similarity, stale_after_days=args.stale_after_days)
        print(f"compaction of {tenant.name}: schedule {args.schedule}, similarity {config.similarity}, "
              f"stale after {config.stale_after_days or '-'} days")
        return 0
    stats = compaction.compact_tenant(ctx, tenant.id, agent_id=args.agent, trigger="cli", actor=actor,
                                      similarity=args.similarity)
    print(f"compaction {stats['run_id']}: {stats['groups']} group(s), {stats['compacted']} compacted "
          f"({stats['sources']} memories merged), {stats['staged']} staged for review, {stats['skipped']} skipped")
    return 0


def register(sub) -> None:
    """Add `compact` to the `memwarden` parser."""
    compact = sub.add_parser("compact", help="distil near-duplicate memories of a tenant now, or set its schedule")
    compact.add_argument("--tenant", required=True)
    compact.add_argument("--agent", help="only this agent's memories")
    compact.add_argument("--similarity", type=float, help="cosine threshold for near-duplicates (0.5-1)")
    compact.add_argument("--stale-after-days", type=float, help="with --schedule: also digest older episodic memories")
    compact.add_argument("--schedule", choices=["on", "off"],
                         help="opt the tenant in or out of the background job (and store the options), then exit")
    compact.set_defaults(func=cmd_compact)
