"""`memwarden canaries`: reviewer canaries for a tenant (app/services/review/canaries.py) — turn them on or
off and tune them (`set`), see each reviewer's catch rate (`status`), or stage one now (`stage`)."""

from __future__ import annotations

import argparse
import json

from app.cli import common as cli_common
from app.config import Settings


def _context(args: argparse.Namespace, settings: Settings):
    from app.services.tenancy.tenants import resolve_tenant

    ctx = cli_common.open_context(settings)
    return ctx, resolve_tenant(ctx, args.tenant)


def cmd_set(args: argparse.Namespace, settings: Settings) -> int:
    from app.services.review import canaries

    ctx, tenant = _context(args, settings)
    doc = {k: v for k, v in canaries.get_config(ctx, tenant.id).items() if k in canaries.DEFAULTS}
    doc["enabled"] = not args.off
    for name in ("one_in", "corpus", "miss_threshold", "min_decided"):
        if getattr(args, name) is not None:
            doc[name] = getattr(args, name)
    if args.families is not None:
        doc["families"] = [f for f in args.families.split(",") if f]
    print(json.dumps(canaries.set_config(ctx, tenant_id=tenant.id, doc=doc, actor=cli_common.cli_actor())))
    return 0


def cmd_status(args: argparse.Namespace, settings: Settings) -> int:
    from app.services.review import canaries

    ctx, tenant = _context(args, settings)
    print(json.dumps({"config": canaries.get_config(ctx, tenant.id),
                      "reviewers": canaries.catch_rates(ctx, tenant.id)}, indent=2))
    return 0


def cmd_stage(args: argparse.Namespace, settings: Settings) -> int:
    from app.services.review import canaries

    ctx, tenant = _context(args, settings)
    change_id = canaries.inject(ctx, tenant.id, force=True)
    if change_id is None:
        print("no canary staged: the tenant has no real staged write to model one on")
        return 1
    print("staged one canary")  # its id is not printed: a terminal's scrollback is no place for it
    return 0


def register(sub) -> None:
    """Add `canaries` to the `memwarden` parser."""
    canaries = sub.add_parser("canaries", help="reviewer canaries: synthetic poisoned writes in the review queue")
    csub = canaries.add_subparsers(dest="canaries_command", required=True)
    set_ = csub.add_parser("set", help="turn a tenant's canaries on (or --off) and tune them")
    set_.add_argument("--tenant", required=True)
    set_.add_argument("--off", action="store_true", help="turn canaries off")
    set_.add_argument("--one-in", type=int, help="one canary per N real staged remembers (default 20)")
    set_.add_argument("--corpus", help="the shipped attack corpus to draw from (default screening)")
    set_.add_argument("--families", help="comma list of the corpus's attack families (default: all)")
    set_.add_argument("--miss-threshold", type=float,
                      help="share of missed canaries above which a reviewer's learned rules are suspended (default 0.5)")
    set_.add_argument("--min-decided", type=int, help="canaries a reviewer must have decided first (default 5)")
    set_.set_defaults(func=cmd_set)
    status = csub.add_parser("status", help="a tenant's canary settings and each reviewer's catch rate")
    status.add_argument("--tenant", required=True)
    status.set_defaults(func=cmd_status)
    stage = csub.add_parser("stage", help="stage one canary now, modelled on a recent real staged write")
    stage.add_argument("--tenant", required=True)
    stage.set_defaults(func=cmd_stage)
