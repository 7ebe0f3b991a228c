"""`memwarden audit receipts`, and the erasure receipts beside `audit export` and `audit verify`.

`audit receipts --tenant T [--memory ID] [--json]` lists the signed receipts of a tenant (or one
memory): each store that, read back after its delete, no longer held the memory. `audit export
--receipts FILE` writes them beside the chain's export; `audit verify EXPORT --receipts FILE`
checks, offline, each receipt's signature and that the audit seq it cites is in the (verified)
export and is an event that ended that memory. Exit 1 when any receipt fails.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from app.cli.common import open_context
from app.config import Settings


def cmd_receipts(args: argparse.Namespace, settings: Settings) -> int:
    from app.services.audit import erasure
    from app.services.tenancy.tenants import resolve_tenant

    ctx = open_context(settings)
    tenant = resolve_tenant(ctx, args.tenant)
    rows = erasure.receipts_listed(ctx, tenant_id=tenant.id, memory_id=args.memory)
    if args.json:
        print(json.dumps({"tenant": tenant.name, "verifier_key": ctx.audit.vkey, "receipts": rows}, sort_keys=True))
        return 0
    for row in rows:
        print(f"{row['memory_id']}  {row['store']}  confirmed {row['confirmed_at']}  audit seq {row['audit_seq']}")
    print(f"{len(rows)} receipt(s); verifier key: {ctx.audit.vkey}", file=sys.stderr)
    return 0


def write_receipts(ctx, tenant_id: str, path: str, from_seq: int, to_seq: int | None) -> int:
    """Write a tenant's receipts to `path` (JSONL, atomically); how many."""
    from app.services.audit import erasure

    out = Path(path)
    tmp = out.with_name(out.name + ".part")
    count = 0
    with tmp.open("w", encoding="utf-8") as fh:
        for line in erasure.export_lines(ctx, tenant_id=tenant_id, from_seq=from_seq, to_seq=to_seq):
            fh.write(line + "\n")
            count += 1
    tmp.replace(out)
    return count


def verify_receipts(export_path: str, receipts_path: str, vkeys: list[str] | None, as_json: bool) -> tuple[int, dict]:
    """Check a receipts file against a verified export: (exit code, report)."""
    from app.core.auditchain import AuditChainError
    from app.core.auditchain.receipts import check_receipts

    try:
        with open(receipts_path, encoding="utf-8") as receipts, open(export_path, encoding="utf-8") as export:
            report = check_receipts(receipts, export, vkeys)
    except (OSError, UnicodeDecodeError, AuditChainError) as exc:
        print(f"unusable: --receipts: {exc}", file=sys.stderr)
        return 2, {}
    if not as_json:
        if report["ok"]:
            print(f"receipts intact: {report['confirmed']} erasure receipt(s) signed and each cites an ending "
                  "event of its memory")
        for failure in report["failures"]:
            print(f"receipt bad: line {failure['line']}: {failure['memory_id'] or '-'}: {failure['reason']}: "
                  f"{failure['detail']}")
    return (0 if report["ok"] else 1), report


def register(audit: argparse._SubParsersAction) -> None:
    receipts = audit.add_parser("receipts", help="list the signed erasure receipts of a tenant or one memory")
    receipts.add_argument("--tenant", required=True, help="tenant name or id")
    receipts.add_argument("--memory", help="only this memory's receipts")
    receipts.add_argument("--json", action="store_true", help="machine-readable list")
    receipts.set_defaults(func=cmd_receipts)
