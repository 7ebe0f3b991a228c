"""`memwarden backend`: the memory stores a tenant's governed memories are also delivered to
and recalled from (the router; see app/services/router/backends.py)."""

from __future__ import annotations

import argparse
import json
import os


from app.cli import common as cli_common
from app.config import Settings


def _options(args: argparse.Namespace) -> dict:
    options = {}
    for name in ("url", "factory", "config"):
        if getattr(args, name):
            options[name] = getattr(args, name)
    if "config" in options:  # serve reads it from wherever it was started
        options["config"] = os.path.abspath(options["config"])
    if args.infer:
        options["infer"] = True
    if args.factory_arg:
        pairs = [arg.partition("=") for arg in args.factory_arg]
        options["factory_args"] = {key: value for key, _, value in pairs}
    return options


def cmd_add(args: argparse.Namespace, settings: Settings) -> int:
    from app.services.router import backends

    secret = None
    if args.api_key_file:
        with open(args.api_key_file, encoding="utf-8") as handle:
            secret = handle.read().strip()
    ctx = cli_common.open_context(settings)
    backend = backends.add_backend(ctx, tenant_name=args.tenant, name=args.name, kind=args.kind, agents=args.agents,
                                   options=_options(args), secret=secret, weight=args.weight,
                                   timeout_ms=args.timeout_ms, actor=cli_common.cli_actor())
    print(f"added backend {backend.name} ({backend.kind}, agents {backend.agents}): {backend.id}")
    return 0


def cmd_list(args: argparse.Namespace, settings: Settings) -> int:
    from app.services.router import backends
    from app.services.tenancy.tenants import resolve_tenant

    ctx = cli_common.open_context(settings)
    tenant = resolve_tenant(ctx, args.tenant)
    rows = backends.list_backends(ctx, tenant_id=tenant.id)
    status = {s["backend"]: s for s in backends.status(ctx, tenant_id=tenant.id)}
    if args.json:
        print(json.dumps([{**row, "deliveries": status.get(row["name"])} for row in rows], indent=2))
        return 0
    for row in rows:
        s = status.get(row["name"], {})
        oldest = s.get("oldest_pending_seconds")
        print(f"{row['name']}\t{row['kind']}\tagents {row['agents']}\tpending {s.get('pending', 0)}\t"
              f"failed {s.get('failed', 0)}\toldest pending {oldest if oldest is not None else '-'} s")
    return 0


def cmd_remove(args: argparse.Namespace, settings: Settings) -> int:
    from app.services.router import backends

    ctx = cli_common.open_context(settings)
    backends.remove_backend(ctx, tenant_name=args.tenant, name=args.name, actor=cli_common.cli_actor())
    print(f"removed backend {args.name} (what it stores stays there)")
    return 0


def cmd_enable(args: argparse.Namespace, settings: Settings) -> int:
    from app.services.router import backends

    ctx = cli_common.open_context(settings)
    enabled = args.backend_command == "enable"
    backends.set_enabled(ctx, tenant_name=args.tenant, name=args.name, enabled=enabled, actor=cli_common.cli_actor())
    print(f"backend {args.name} {'enabled' if enabled else 'disabled'}")
    return 0


def cmd_retry(args: argparse.Namespace, settings: Settings) -> int:
    from app.services.router import backends

    ctx = cli_common.open_context(settings)
    count = backends.retry_failed(ctx, tenant_name=args.tenant, name=args.name, actor=cli_common.cli_actor())
    print(f"{count} failed deliveries to {args.name} owed again")
    return 0


def cmd_drift(args: argparse.Namespace, settings: Settings) -> int:
    from app.services.router import backend_checks
    from app.services.tenancy.tenants import resolve_tenant

    ctx = cli_common.open_context(settings)
    tenant = resolve_tenant(ctx, args.tenant)
    report = backend_checks.drift(ctx, tenant_id=tenant.id, name=args.name, resync=args.resync)
    print(json.dumps(report, indent=2))
    return 1 if report["problems"] and not args.resync else 0


def cmd_show(args: argparse.Namespace, settings: Settings) -> int:
    from app.services.router import backend_checks
    from app.services.tenancy.tenants import resolve_tenant

    ctx = cli_common.open_context(settings)
    tenant = resolve_tenant(ctx, args.tenant)
    print(json.dumps(backend_checks.show(ctx, tenant_id=tenant.id, name=args.name, memory_id=args.memory_id),
                     indent=2))  # JSON: a memory's text is printed escaped, never as terminal input
    return 0


def register(sub) -> None:
    """Add `backend` to the `memwarden` parser."""
    backend = sub.add_parser("backend", help="memory stores governed memories are delivered to (the router)")
    commands = backend.add_subparsers(dest="backend_command", required=True)
    add = commands.add_parser("add", help="deliver a tenant's governed memories to a store and recall from it")
    add.add_argument("--tenant", required=True)
    add.add_argument("--name", required=True)
    add.add_argument("--kind", required=True, choices=["mem0", "memwarden", "memorywire"])
    add.add_argument("--agents", default="*", help="glob (* and ?) of the agents whose memories it takes")
    add.add_argument("--url", help="memwarden: the other server's base URL")
    add.add_argument("--api-key-file", help="memwarden: a file holding the other server's API key (stored sealed)")
    add.add_argument("--factory", help="mem0 or memorywire: module:callable returning the store, importable by "
                                       "serve (offline mem0: app.stores.mem0_local:memory)")
    add.add_argument("--factory-arg", action="append", metavar="KEY=VALUE",
                     help="a keyword argument for the factory (repeatable; never a secret: it is shown in lists)")
    add.add_argument("--config", help="mem0: a mem0 JSON config file (Memory.from_config)")
    add.add_argument("--infer", action="store_true", help="mem0: let mem0's LLM rewrite what it stores")
    add.add_argument("--weight", type=float, default=1.0, help="weight in `weighted` fusion")
    add.add_argument("--timeout-ms", type=int, default=2000, help="recall waits this long for the store")
    add.set_defaults(func=cmd_add)
    ls = commands.add_parser("list", help="backends and their delivery backlog")
    ls.add_argument("--tenant", required=True)
    ls.add_argument("--json", action="store_true")
    ls.set_defaults(func=cmd_list)
    rm = commands.add_parser("remove", help="stop routing to a backend")
    rm.add_argument("--tenant", required=True)
    rm.add_argument("--name", required=True)
    rm.set_defaults(func=cmd_remove)
    for verb, text in (("enable", "resume a backend (it catches up on what changed)"),
                       ("disable", "pause a backend: owed nothing, left out of recall")):
        toggle = commands.add_parser(verb, help=text)
        toggle.add_argument("--tenant", required=True)
        toggle.add_argument("--name", required=True)
        toggle.set_defaults(func=cmd_enable)
    retry = commands.add_parser("retry", help="owe again the deliveries a backend gave up on")
    retry.add_argument("--tenant", required=True)
    retry.add_argument("--name", required=True)
    retry.set_defaults(func=cmd_retry)
    drift = commands.add_parser("drift", help="compare a backend with Memwarden's ledger (exit 1 on drift)")
    drift.add_argument("--tenant", required=True)
    drift.add_argument("--name", required=True)
    drift.add_argument("--resync", action="store_true", help="owe a delivery for every memory that drifted")
    drift.set_defaults(func=cmd_drift)
    show = commands.add_parser("show", help="one memory as Memwarden holds it and as the backend's store answers")
    show.add_argument("memory_id", metavar="MEMORY_ID", help="the memory's Memwarden id (mem_…)")
    show.add_argument("--tenant", required=True)
    show.add_argument("--name", required=True)
    show.set_defaults(func=cmd_show)

