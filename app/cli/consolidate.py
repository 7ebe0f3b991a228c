"""`memwarden consolidate`: promote repeated short-term facts to long-term memory and evict cold
items now (`--dry-run`: only say what would happen), or opt a tenant in and set its schedule
(see app/services/memory/consolidation.py)."""

from __future__ import annotations

import argparse
import json

from app.cli import common as cli_common
from app.config import Settings

SETTINGS = ("agents", "schedule", "interval_minutes", "short_term_days", "min_mentions", "promote_at",
            "evict_after_days", "protect_recalled_days", "evict_action", "evictions", "opt_out")


def cmd_consolidate(args: argparse.Namespace, settings: Settings) -> int:
    from app.services.memory import consolidation
    from app.services.tenancy.tenants import resolve_tenant

    ctx, actor = cli_common.open_context(settings), cli_common.cli_actor()
    tenant = resolve_tenant(ctx, args.tenant)
    if any(getattr(args, name) not in (None, False) for name in SETTINGS):
        agents = [] if args.opt_out else ([a.strip() for a in args.agents.split(",") if a.strip()]
                                          if args.agents is not None else None)
        config = consolidation.set_config(
            ctx, tenant_id=tenant.id, actor=actor, agents=agents,
            enabled=None if args.schedule is None and not args.opt_out else (args.schedule == "on" and not args.opt_out),
            interval_minutes=args.interval_minutes, short_term_days=args.short_term_days,
            min_mentions=args.min_mentions, promote_at=args.promote_at, evict_after_days=args.evict_after_days,
            protect_recalled_days=args.protect_recalled_days, evict_action=args.evict_action,
            evict=None if args.evictions is None else args.evictions == "on")
        print(f"consolidation of {tenant.name}: agents {', '.join(config.agents) or '(none: not opted in)'}, "
              f"schedule {'on' if config.enabled else 'off'} every {config.interval_minutes:g} min, "
              f"evictions {'on' if config.evict else 'off'} ({config.evict_action}, never of an item recalled "
              f"in the last {config.protect_recalled_days:g} days)")
        return 0

    def progress(done: int) -> None:
        if args.progress:
            print(f"window {done} done", flush=True)

    result = consolidation.consolidate_tenant(ctx, tenant.id, agent_id=args.agent, trigger="cli", actor=actor,
                                              dry_run=args.dry_run, after_window=progress)
    if args.json:
        print(json.dumps(result, indent=2, sort_keys=True))
        return 0
    verb = "would promote" if args.dry_run else "promoted"
    evictions = sum(len(e["memory_ids"]) for e in result["evictions"])
    print(f"consolidation {result['run_id']}{' (dry run: nothing changed)' if args.dry_run else ''}: "
          f"{result['windows']} window(s), {result['items']} short-term item(s), {verb} "
          f"{len(result['promotions']) if args.dry_run else result['promoted']}, staged {result['staged']} "
          f"for review, denied {result['denied']}, already done {result['already_claimed']}; evicted "
          f"{evictions if args.dry_run else result['evicted']}, staged {result['evictions_staged']} evictions")
    for p in result["promotions"]:  # ids and scores only: memory content stays out of the terminal log
        print(f"  promote {p['agent_id']}/{p['user_id'] or '-'}: {p['items']} item(s) on {p['mentions']} day(s), "
              f"score {p['score']}, {p['statement_from']}, sources {', '.join(p['source_ids'])}"
              + (f" -> {p.get('outcome')} {p.get('memory_id') or p.get('change_id') or ''}" if 'outcome' in p else ""))
    for e in result["evictions"]:
        print(f"  evict {e['agent_id']}/{e['user_id'] or '-'}: {', '.join(e['memory_ids'])}")
    return 0


def register(sub) -> None:
    """Add `consolidate` to the `memwarden` parser."""
    parser = sub.add_parser("consolidate", help="promote repeated short-term facts to long-term memory and evict "
                                                "cold items now, or opt a tenant in and set its schedule")
    parser.add_argument("--tenant", required=True)
    parser.add_argument("--agent", help="only this agent's windows")
    parser.add_argument("--dry-run", action="store_true", help="score and report; change nothing")
    parser.add_argument("--json", action="store_true", help="print the run's result as JSON (ids and scores)")
    parser.add_argument("--progress", action="store_true", help="print a line as each window is done")
    settings = parser.add_argument_group("settings (stored for the tenant, then exit)")
    settings.add_argument("--agents", help="opt these agents in: comma list of globs, '*' for all")
    settings.add_argument("--opt-out", action="store_true", help="opt the tenant out (and stop its schedule)")
    settings.add_argument("--schedule", choices=["on", "off"], help="run for this tenant in the background")
    settings.add_argument("--interval-minutes", type=float, help="the tenant's schedule interval")
    settings.add_argument("--short-term-days", type=float, help="how recent an item is short-term")
    settings.add_argument("--min-mentions", type=int, help="distinct days a fact must be mentioned on")
    settings.add_argument("--promote-at", type=float, help="score (0-1) a repeated fact needs")
    settings.add_argument("--evict-after-days", type=float, help="age before a cold item may be evicted")
    settings.add_argument("--protect-recalled-days", type=float,
                          help="never evict an item recalled within this many days")
    settings.add_argument("--evict-action", choices=["archive", "forget", "demote"])
    settings.add_argument("--evictions", choices=["on", "off"], help="evict cold items (off: promote only)")
    parser.set_defaults(func=cmd_consolidate)
