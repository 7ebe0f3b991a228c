"""`memwarden recover`: quarantine what a compromised key, agent or source wrote in a time window
and offer to revert what it forgot, merged or expired (see app/services/recover.py)."""

from __future__ import annotations

import argparse
import json

from app import cli_common
from app.config import Settings


def cmd_recover(args: argparse.Namespace, settings: Settings) -> int:
    from app.services import recover
    from app.services.tenants import resolve_tenant

    target = recover.parse_target(key=args.key, agent=args.agent, source=args.source, since=args.since,
                                  until=args.until)  # bad input fails before the database is opened
    ctx = cli_common.open_context(settings)
    tenant = resolve_tenant(ctx, args.tenant)
    report = recover.recover(ctx, tenant_id=tenant.id, target=target, actor=cli_common.cli_actor(),
                             dry_run=args.dry_run)
    if args.json:
        print(json.dumps({"tenant": tenant.name, **report}, indent=2))
        return 0
    counts = report["counts"]
    verb = "would quarantine" if args.dry_run else "quarantined"
    print(f"recover {report['recover_id'] or '(dry run)'} of {target.kind} {target.value} in {tenant.name}, "
          f"{report['since']} to {report['until'] or 'now'}: {verb} {counts['quarantined']} memories, "
          f"{counts['revertable']} revertable, {counts['not_revertable']} not revertable, "
          f"{counts['already_pending']} already offered for revert, {counts['awaiting_review']} awaiting review")
    for memory_id in report["quarantined"]:
        print(f"  quarantine {memory_id}")
    for item in report["revertable"]:
        print(f"  revert     {item['memory_id']} ({item['operation']} at {item['at']}, audit seq {item['audit_seq']})")
    for memory_id in report["awaiting_review"]:
        print(f"  awaiting review {memory_id} (not served; reject its change)")
    for item in report["not_revertable"]:
        print(f"  cannot revert {item['memory_id']} ({item['operation']}): {item['reason']}")
    if not args.dry_run and (report["quarantine_changes"] or report["revert_changes"]):
        print("review them at /review?rule=recover")
    return 0


def register(sub) -> None:
    """Add `recover` to the `memwarden` parser."""
    rec = sub.add_parser("recover", help="quarantine what a key, agent or source wrote in a window; "
                                         "offer its forgets, merges and expires for revert")
    rec.add_argument("--tenant", required=True)
    who = rec.add_mutually_exclusive_group(required=True)
    who.add_argument("--key", help="an API key id (key_…), revoked or not")
    who.add_argument("--agent", help="an agent id")
    who.add_argument("--source", help="a memory `source` value")
    rec.add_argument("--since", required=True, help="window start, RFC 3339 with offset (inclusive)")
    rec.add_argument("--until", help="window end, RFC 3339 with offset (exclusive; default: now)")
    rec.add_argument("--dry-run", action="store_true", help="print counts and ids; change nothing")
    rec.add_argument("--json", action="store_true", help="print the report as JSON")
    rec.set_defaults(func=cmd_recover)
