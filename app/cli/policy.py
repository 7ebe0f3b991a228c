"""`memwarden policy backtest`: what a policy change would have admitted with no one deciding, over
the tenant's decided writes and the shipped known attacks (app/services/review/policy_backtest.py), before
it goes live. Exit 0 when nothing known-bad would be newly admitted, 1 when the change would be
refused without an override."""

from __future__ import annotations

import argparse
import json

from app.cli import common as cli_common
from app.config import Settings


def _summary(report: dict) -> str:
    admitted, harmful = report["newly_admitted"], report["newly_admitted_harmful"]
    lines = [f"replayed {report['replayed']['history']} decided write(s) and {report['replayed']['corpus']} "
             f"known-attack write(s) in {report['elapsed_ms']} ms",
             f"newly admitted with no one deciding: {admitted['history']} decided write(s), "
             f"{admitted['corpus']} known-attack write(s); newly staged: {report['newly_staged']['history']}",
             f"of those: {harmful['known_attack']} known attack(s), {harmful['rejected']} rejected by a reviewer, "
             f"{harmful['recovered']} recovered, {harmful['forgotten']} later forgotten"]
    for item in report["named"]:
        lines.append(f"  {item['ref']}: {', '.join(item['harms'])} (admitted by rule {item['rule_id']})")
    lines.append("blocked: an override reason is needed to go ahead" if report["blocking"]
                 else "passes: nothing known-bad is newly admitted")
    return "\n".join(lines)


def cmd_backtest(args: argparse.Namespace, settings: Settings) -> int:
    from app.services.review import policy_backtest, suggestions
    from app.services.tenancy.tenant_config import parse_policy
    from app.services.tenancy.tenants import resolve_tenant

    ctx, actor = cli_common.open_context(settings), cli_common.cli_actor()
    tenant = resolve_tenant(ctx, args.tenant)
    if args.suggestion:
        candidate = suggestions.candidate(ctx, tenant_id=tenant.id, suggestion_id=args.suggestion, actor=actor)
    else:
        with open(args.policy_file, encoding="utf-8") as fh:
            candidate = parse_policy(json.load(fh))
    report = policy_backtest.backtest(ctx, tenant.id, candidate)
    print(json.dumps(report, indent=2) if args.json else _summary(report))
    return 1 if report["blocking"] else 0


def register(sub) -> None:
    """Add `policy` to the `memwarden` parser."""
    policy = sub.add_parser("policy", help="try a policy change before it goes live")
    psub = policy.add_subparsers(dest="policy_command", required=True)
    backtest = psub.add_parser("backtest", help="replay the tenant's decided writes and the known attacks under a "
                                                "candidate policy; exit 1 if it would admit known-bad writes")
    backtest.add_argument("--tenant", required=True)
    which = backtest.add_mutually_exclusive_group(required=True)
    which.add_argument("--policy-file", help="the candidate policy document (schemas/policy.json)")
    which.add_argument("--suggestion", help="an open suggestion's id, as it would be accepted")
    backtest.add_argument("--json", action="store_true", help="print the whole report as JSON")
    backtest.set_defaults(func=cmd_backtest)
