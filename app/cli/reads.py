"""`memwarden audit access` and `memwarden audit readers`: the read audit from the command line,
the same listings as `GET /v1/audit/access` and `GET /v1/memories/{id}/readers`, every page.
Exit 0; a bad filter (a date that does not parse, an unknown tenant or memory) is 2."""

from __future__ import annotations

import argparse
import json
import sys

from app.cli import common as cli_common
from app.config import Settings

PAGE = 500


def _pages(fetch):
    """Every item of a paginated listing (`fetch(cursor)` returns `{items, next_cursor}`)."""
    cursor = None
    while True:
        page = fetch(cursor)
        yield from page["items"]
        cursor = page["next_cursor"]
        if not cursor:
            return


def _print(items, as_json: bool, columns) -> None:
    for item in items:
        if as_json:
            print(json.dumps(item, sort_keys=True))
        else:
            print("\t".join(columns(item)))


def cmd_access(args: argparse.Namespace, settings: Settings) -> int:
    from app.errors import AppError
    from app.services.audit import read_audit
    from app.services.tenancy.tenants import resolve_tenant

    ctx = cli_common.open_context(settings)
    try:
        tenant_id = resolve_tenant(ctx, args.tenant).id
        flt = read_audit.access_filter({"key_id": args.key, "agent_id": args.agent, "from": args.since,
                                        "to": args.until, "run_id": args.run})
        items = list(_pages(lambda cursor: read_audit.access(ctx, tenant_id, flt, PAGE, cursor)))
    except AppError as exc:
        print(f"memwarden audit access: {exc.message}", file=sys.stderr)
        return 2
    _print(items, args.json, lambda i: (i["read_at"], i["actor"], i["agent_id"] or "-", i["operation"],
                                        str(i["audit_seq"] or "-"), ",".join(i["memory_ids"]) or "-"))
    if not args.json:
        print(f"{len(items)} read(s), {len({m for i in items for m in i['memory_ids']})} distinct memories",
              file=sys.stderr)
    return 0


def cmd_readers(args: argparse.Namespace, settings: Settings) -> int:
    from app.errors import AppError
    from app.services.audit import read_audit
    from app.services.tenancy.tenants import resolve_tenant

    ctx = cli_common.open_context(settings)
    try:
        tenant_id = resolve_tenant(ctx, args.tenant).id
        items = list(_pages(lambda cursor: read_audit.readers(ctx, tenant_id, args.memory_id, PAGE, cursor)))
    except AppError as exc:
        print(f"memwarden audit readers: {exc.message}", file=sys.stderr)
        return 2
    _print(items, args.json, lambda i: (i["read_at"], i["actor"], i["agent_id"] or "-", i["operation"],
                                        str(i["audit_seq"] or "-"), str(i["returned"])))
    return 0


def register(audit: argparse._SubParsersAction) -> None:
    """Add `access` and `readers` under `memwarden audit`."""
    access = audit.add_parser("access", help="the read access log: who was returned which memories, newest first")
    access.add_argument("--tenant", required=True, help="tenant name or id")
    access.add_argument("--key", help="reads by this API key id")
    access.add_argument("--agent", help="reads of this agent's memories")
    access.add_argument("--from", dest="since", help="read at or after (RFC 3339)")
    access.add_argument("--to", dest="until", help="read before (RFC 3339)")
    access.add_argument("--run", help="reads made for this agent run (the run id a recall named)")
    access.add_argument("--json", action="store_true", help="one JSON object per read")
    access.set_defaults(func=cmd_access)

    readers = audit.add_parser("readers", help="every read that returned one memory, newest first")
    readers.add_argument("--tenant", required=True, help="tenant name or id")
    readers.add_argument("memory_id")
    readers.add_argument("--json", action="store_true", help="one JSON object per read")
    readers.set_defaults(func=cmd_readers)
