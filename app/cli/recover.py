"""`memwarden recover`: quarantine what a compromised key, agent or source wrote in a time window,
and what was derived from it, and offer to revert what it forgot, merged or expired (see
app/services/audit/recover.py). `memwarden recover report`: the incident report of a target, or of a
recover that ran (app/services/audit/incident.py)."""

from __future__ import annotations

import argparse
import json

from app.cli import common as cli_common
from app.config import Settings
from app.errors import ValidationFailed


def _target(args: argparse.Namespace):
    from app.services.audit import recover

    if not args.tenant:
        raise ValidationFailed.at("/tenant", "--tenant is required")
    return recover.parse_target(key=args.key, agent=args.agent, source=args.source, since=args.since,
                                until=args.until)  # bad input fails before the database is opened


def cmd_recover(args: argparse.Namespace, settings: Settings) -> int:
    from app.services.audit import recover
    from app.services.tenancy.tenants import resolve_tenant

    target = _target(args)
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
          f"{report['since']} to {report['until'] or 'now'}: {verb} {counts['quarantined']} memories "
          f"and {counts['derived_quarantined']} derived from them, "
          f"{counts['revertable']} revertable, {counts['not_revertable']} not revertable, "
          f"{counts['already_pending']} already offered for revert, {counts['awaiting_review']} awaiting review")
    for memory_id in report["quarantined"]:
        print(f"  quarantine {memory_id}")
    for item in report["derived"]:
        path = " <- ".join(reversed(item["path"]))
        print(f"  derived    {item['memory_id']} ({item['status']}, {item['action']}): "
              f"{path} ({', '.join(item['kinds'])})")
    for item in report["revertable"]:
        print(f"  revert     {item['memory_id']} ({item['operation']} at {item['at']}, audit seq {item['audit_seq']})")
    for memory_id in report["awaiting_review"]:
        print(f"  awaiting review {memory_id} (not served; reject its change)")
    for item in report["not_revertable"]:
        print(f"  cannot revert {item['memory_id']} ({item['operation']}): {item['reason']}")
    if report["blast_radius_truncated"]:
        print("  the lineage goes deeper than followed: run `memwarden recover report` on the derived memories")
    if not args.dry_run and (report["quarantine_changes"] or report["revert_changes"] or report["derived_changes"]):
        print("review them at /review?rule=recover")
    return 0


def cmd_report(args: argparse.Namespace, settings: Settings) -> int:
    from app.core.ids import has_prefix
    from app.services.audit import incident
    from app.services.tenancy.tenants import resolve_tenant

    if args.recover_id:
        if not args.tenant:
            raise ValidationFailed.at("/tenant", "--tenant is required")
        if not has_prefix(args.recover_id, "rcv"):
            raise ValidationFailed.at("/recover_id", "not a recover id (rcv_…)")
        if args.key or args.agent or args.source or args.since or args.until:
            raise ValidationFailed.at("/recover_id", "give a recover id or a principal and window, not both")
        ctx = cli_common.open_context(settings)
        tenant = resolve_tenant(ctx, args.tenant)
        target, ran = incident.target_of(ctx, tenant.id, args.recover_id)
    else:
        target = _target(args)
        ctx = cli_common.open_context(settings)
        tenant = resolve_tenant(ctx, args.tenant)
        ran = None
    report = incident.report(ctx, tenant.id, target, ran=ran)
    if args.json:
        print(json.dumps({"tenant": tenant.name, **report}, indent=2))
        return 0
    counts = report["counts"]
    print(f"incident report of {target.kind} {target.value} in {tenant.name}, {report['since']} to "
          f"{report['until'] or 'now'}{' (recover ' + report['recover_id'] + ')' if report['recover_id'] else ''}: "
          f"{counts['recovered']} recovered memories, {counts['derived']} derived from them, "
          f"{counts['reads']} reads by {counts['readers']} readers")
    for item in report["recovered"]:
        print(f"  {item['memory_id']} ({item['status']}, agent {item['agent_id']}): "
              f"{item['counts']['derived']} derived, {item['counts']['reads']} reads"
              f"{' (lineage deeper than followed)' if item['truncated'] else ''}")
        for derived in item["derived"]:
            print(f"    derived {derived['memory_id']} ({derived['status']}) by {' then '.join(derived['kinds'])}")
    for reader in report["readers"]:
        print(f"  reader {reader['actor']}: {reader['reads']} reads ({', '.join(reader['operations'])}), "
              f"{reader['first_read_at']} to {reader['last_read_at']}")
    return 0


def _principal_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--tenant", help="the tenant (required)")
    who = parser.add_mutually_exclusive_group()
    who.add_argument("--key", help="an API key id (key_…), revoked or not")
    who.add_argument("--agent", help="an agent id")
    who.add_argument("--source", help="a memory `source` value")
    parser.add_argument("--since", help="window start, RFC 3339 with offset (inclusive; required)")
    parser.add_argument("--until", help="window end, RFC 3339 with offset (exclusive; default: now)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")


def register(sub) -> None:
    """Add `recover` (and `recover report`) to the `memwarden` parser."""
    rec = sub.add_parser("recover", help="quarantine what a key, agent or source wrote in a window and what was "
                                         "derived from it; offer its forgets, merges and expires for revert")
    _principal_options(rec)
    rec.add_argument("--dry-run", action="store_true", help="print counts and ids; change nothing")
    rec.set_defaults(func=cmd_recover)
    actions = rec.add_subparsers(dest="recover_command", required=False)
    report = actions.add_parser("report", help="the incident report: each recovered memory, what was derived from "
                                               "it, and the reads that returned any of them (ids, never content)")
    _principal_options(report)
    report.add_argument("--recover-id", help="report this recover (rcv_…): its principal and window")
    report.set_defaults(func=cmd_report)
