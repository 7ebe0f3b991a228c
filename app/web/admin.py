"""The tenant admin page (admin role only): members and their roles, API keys, review policy,
redaction mode and registered secrets, memory backends, reviewer canaries, and recover (quarantine
what a compromised key, agent or source wrote). Every change goes through a service that audits it.

Each section is a partial (`templates/admin/_<section>.html`); an htmx POST gets back only the
section it changed, a plain form POST is redirected to the page (or, on a problem, gets the page
with the problem shown in that section). A new API key's token is rendered once, in the response
to its creation, and nowhere else."""

from __future__ import annotations

from typing import Any, Callable
from urllib.parse import quote

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import RedirectResponse
from starlette.routing import Route

from app.core.access import SCOPES, writes_and_decides
from app.core.durations import format_duration
from app.errors import AppError, BacktestFailed, ValidationFailed
from app.services.tenancy import apikeys, tenant_config, users
from app.services.router import backends
from app.services.review import canaries, policy_backtest, suggestions
from app.services.audit import recover
from app.web import admin_view
from app.services.runtime.context import AppContext
from app.services.tenancy.users import Reviewer, TenantRole
from app.web.auth import current_user, pick_tenant
from app.web.memories import wants_fragment
from app.web.templating import render

SECTIONS = {"users": "admin/_users.html", "keys": "admin/_keys.html", "policy": "admin/_policy.html",
            "redaction": "admin/_redaction.html", "backends": "admin/_backends.html",
            "canaries": "admin/_canaries.html", "recover": "admin/_recover.html"}
EMPTY_RECOVER_FORM = {"kind": "key", "value": "", "since": "", "until": "", "dry_run": True}
SAMPLE_WRITE = ('{"operation": "remember", "agent_id": "support-bot", "type": "semantic", "source": "zendesk",\n'
                ' "tags": ["faq"], "risk_level": "none", "content": "The store opens at 9."}')
EMPTY_POLICY_TEST = {"policy_test": None, "policy_sample": SAMPLE_WRITE}


def _load(ctx, role: TenantRole) -> dict[str, Any]:
    members = users.list_users(ctx, role.tenant_id)
    keys = apikeys.list_keys(ctx, tenant_id=role.tenant_id)
    names = {u.id: u.username for u, _ in members}
    return {
        "members": [{"id": u.id, "username": u.username, "role": r.role, "agents": list(r.agents),
                     "sign_in_name": f"{role.tenant_name}/{u.username}" if u.home_tenant_id else u.username,
                     "disabled": u.disabled_at is not None, "via_provider": u.oidc_subject is not None}
                    for u, r in members],
        "keys": [{"id": k.id, "name": k.name, "scopes": list(k.scopes), "agents": list(k.agents),
                  "created_at": k.created_at, "last_used_at": k.last_used_at, "revoked_at": k.revoked_at,
                  "read_budget_exceeded_at": k.read_budget_exceeded_at, "owner_id": k.owner_user_id,
                  # An owner who no longer holds a role here is shown by id (their key decides nothing).
                  "owner": names.get(k.owner_user_id, k.owner_user_id) if k.owner_user_id else None,
                  "owner_left": bool(k.owner_user_id) and k.owner_user_id not in names,
                  "decides": "review:decide" in k.scopes,
                  "writes_and_decides": writes_and_decides(k.scopes) and k.revoked_at is None}
                 for k in keys],
        **admin_view.settings_view(ctx, role.tenant_id),
        "backends": backends.admin_view(ctx, tenant_id=role.tenant_id),
        "policy_rules": suggestions.rule_list(suggestions.policy_of(ctx, role.tenant_id)),
        **_canary_view(ctx, role.tenant_id),
    }


def _canary_view(ctx, tenant_id: str) -> dict[str, Any]:
    cfg = canaries.get_config(ctx, tenant_id)
    return {"canary_config": cfg, "canary_families": canaries.families(cfg["corpus"]),
            "canary_corpora": sorted(canaries.CORPORA), "canary_rates": canaries.catch_rates(ctx, tenant_id)}


async def _page_context(request: Request, user: Reviewer, role: TenantRole) -> dict[str, Any]:
    """What every rendering of the page or a section starts from: the tenant's data and empty forms."""
    data = await run_in_threadpool(_load, request.app.state.ctx, role)
    return {"role": role, "me": user.user_id, "tenants": user.tenants_with("admin"), "roles": users.ROLES,
            "scopes": SCOPES, "tenant_q": quote(role.tenant_name), "new_key": None, "policy_problems": [],
            "recover_form": EMPTY_RECOVER_FORM, "recover_report": None, "recover_kinds": recover.KIND_LABELS,
            "notes": {}, **EMPTY_POLICY_TEST, **data}


async def _respond(request: Request, user: Reviewer, role: TenantRole, section: str, *, ok: str | None = None,
                   error: AppError | None = None, extra: dict[str, Any] | None = None, status: int = 200):
    """The changed section (htmx), else the whole page; a plain POST that succeeded is redirected."""
    tenant_q = quote(role.tenant_name)
    if not wants_fragment(request) and error is None and not extra and request.method == "POST":
        return RedirectResponse(f"/admin?tenant={tenant_q}#admin-{section}", status_code=303)
    context = {**await _page_context(request, user, role),
               "notes": {section: {"ok": ok, "error": error}} if (ok or error) else {}, **(extra or {})}
    if error is not None:
        status = error.status
    template = SECTIONS[section] if wants_fragment(request) else "admin/index.html"
    return render(request, template, context, status=status)


def _role(request: Request) -> tuple[Reviewer, TenantRole]:
    user = current_user(request)
    return user, pick_tenant(request, user, "admin")


async def index(request: Request):
    user, role = _role(request)
    policy_backtest.prepare(request.app.state.ctx)  # the policy editor's save is backtested
    return render(request, "admin/index.html", await _page_context(request, user, role))


def _text(form, name: str, limit: int = 1000) -> str:
    """A form field as text; a value over `limit` characters is refused (422), never cut short."""
    value = form.get(name)
    if value is None:
        return ""
    value = str(value)
    if len(value) > limit:
        raise ValidationFailed.at(f"/{name}", f"{name} is {len(value)} characters; at most {limit} are allowed")
    return value


def _form_action(section: str, act: Callable[[AppContext, Reviewer, TenantRole, Any, dict[str, Any]], str]):
    """A POST that changes one section: `act` reads the form's fields and calls the service (which
    audits), in a worker thread, and returns the line shown on success; a problem it raises is shown
    in the section instead."""
    async def handler(request: Request):
        user, role = _role(request)
        form = await request.form()
        try:
            ok = await run_in_threadpool(act, request.app.state.ctx, user, role, form, request.path_params)
        except AppError as error:
            return await _respond(request, user, role, section, error=error)
        return await _respond(request, user, role, section, ok=ok)

    handler.__name__ = act.__name__
    return handler


def _create_user(ctx: AppContext, user: Reviewer, role: TenantRole, form, params) -> str:
    created = admin_view.create_member(
        ctx, tenant_id=role.tenant_id, username=_text(form, "username", 200),
        password=_text(form, "password", users.MAX_PASSWORD), role=_text(form, "role", 20),
        agents=_text(form, "agents") or "*", actor=user.actor)
    return f"Created user {created.username}."


def _change_user(ctx: AppContext, user: Reviewer, role: TenantRole, form, params) -> str:
    action = str(form.get("action", ""))
    if action not in ("save", "remove"):
        raise ValidationFailed.at("/action", "choose save or remove")
    admin_view.change_member(
        ctx, tenant_id=role.tenant_id, user_id=params["user_id"],
        role=_text(form, "role", 20) if action == "save" else None, agents=_text(form, "agents") or "*",
        acting_user_id=user.user_id, actor=user.actor)
    return "Role saved." if action == "save" else "Role removed from this tenant."


async def create_key(request: Request):
    user, role = _role(request)
    form = await request.form()
    scopes = [str(s) for s in form.getlist("scopes")][:len(SCOPES)]
    try:
        created = await run_in_threadpool(
            apikeys.create_key, request.app.state.ctx, tenant_id=role.tenant_id, scopes=scopes,
            agents=_text(form, "agents") or "*", name=_text(form, "name", 200).strip(), actor=user.actor,
            owner=_text(form, "owner", 200).strip() or None)
    except AppError as error:
        return await _respond(request, user, role, "keys", error=error)
    new_key = {"id": created.key.id, "token": created.token, "scopes": list(created.key.scopes),
               "agents": list(created.key.agents), "owner_id": created.key.owner_user_id}
    return await _respond(request, user, role, "keys", extra={"new_key": new_key}, status=201)


def _revoke_key(ctx: AppContext, user: Reviewer, role: TenantRole, form, params) -> str:
    apikeys.revoke_key(ctx, tenant_id=role.tenant_id, key_id=params["key_id"], actor=user.actor)
    return f"Revoked {params['key_id']}: requests with it now get 401."


async def save_policy(request: Request):
    user, role = _role(request)
    form = await request.form()
    text = str(form.get("policy", ""))  # the service refuses an over-long policy, kept in the textarea
    reason = str(form.get("override_reason") or "") or None
    try:
        await run_in_threadpool(admin_view.save_policy_text, request.app.state.ctx, tenant_id=role.tenant_id,
                                text=text, actor=user.actor, override_reason=reason)
    except (ValidationFailed, BacktestFailed) as error:
        problems = error.details if isinstance(error.details, list) else []
        return await _respond(request, user, role, "policy", error=error,
                              extra={"policy_text": text, "policy_problems": problems})
    return await _respond(request, user, role, "policy", ok="Policy saved; it applies to the next write.")


async def test_policy(request: Request):
    """The editor's test box: which rule decides a sample write, and the outcome (nothing is saved)."""
    user, role = _role(request)
    form = await request.form()
    text = str(form.get("sample", ""))[:20_001]
    try:
        result = await run_in_threadpool(suggestions.try_sample_text, request.app.state.ctx, role.tenant_id, text)
    except ValidationFailed as error:
        return await _respond(request, user, role, "policy", error=error, extra={"policy_sample": text})
    return await _respond(request, user, role, "policy", extra={"policy_sample": text, "policy_test": result})


async def suggestions_page(request: Request):
    """Policy rules learned from this tenant's decisions, each with its measured effect."""
    user, role = _role(request)
    policy_backtest.prepare(request.app.state.ctx)  # accepting a suggestion is backtested
    return await _suggestions_response(request, user, role)


def _accepted_rule(ctx, tenant_id: str, rule_id: str | None) -> dict[str, Any] | None:
    """The rule an accepted suggestion made, as the policy lists it, with where it sits: its position
    among the rules tried in order (the built-in screening rule last). None when it is not in the policy."""
    if not rule_id:
        return None
    rules = suggestions.rule_list(suggestions.policy_of(ctx, tenant_id))
    found = next((i for i, r in enumerate(rules) if r["id"] == rule_id and r["provenance"]), None)  # learned only
    if found is None:
        return None
    return {**rules[found], "position": found + 1, "of": len(rules),
            "before": [r["id"] for r in rules[found + 1:]]}


async def _suggestions_response(request: Request, user: Reviewer, role: TenantRole, *, ok: str | None = None,
                                error: AppError | None = None, accepted: str | None = None,
                                backtest: dict[str, Any] | None = None, failed_id: str | None = None):
    ctx = request.app.state.ctx
    items = await run_in_threadpool(suggestions.refresh, ctx, role.tenant_id)
    rule_id = accepted or str(request.query_params.get("accepted", ""))[:128] or None
    made = await run_in_threadpool(_accepted_rule, ctx, role.tenant_id, rule_id)
    context = {"role": role, "tenants": user.tenants_with("admin"), "tenant_q": quote(role.tenant_name),
               "accepted_rule": made, "accepted_backtest": backtest if made else None,
               "backtest_failed": ({"suggestion_id": failed_id, "report": error.details}
                                   if error is not None and error.code == "backtest_failed" else None),
               "suggestions": items, "min_decisions": ctx.settings.suggest_min_decisions,
               "min_days": ctx.settings.suggest_min_days,
               "notes": {"suggestions": {"ok": ok, "error": error}} if (ok or error) else {}}
    template = "admin/_suggestions.html" if wants_fragment(request) else "admin/suggestions.html"
    return render(request, template, context, status=error.status if error else 200)


def _suggestion_action(kind: str):
    async def handler(request: Request):
        user, role = _role(request)
        suggestion_id = request.path_params["suggestion_id"]
        act = suggestions.accept if kind == "accept" else suggestions.dismiss
        extra = {}
        if kind == "accept":  # an admin going ahead although the rule's backtest finds known-bad writes
            extra["override_reason"] = str((await request.form()).get("override_reason") or "") or None
        try:
            done = await run_in_threadpool(act, request.app.state.ctx, tenant_id=role.tenant_id,
                                           suggestion_id=suggestion_id, actor=user.actor, **extra)
        except AppError as error:
            return await _suggestions_response(request, user, role, error=error, failed_id=suggestion_id)
        accepted = done["rule_id"] if kind == "accept" else None
        if not wants_fragment(request):  # the page it lands on shows the rule made, as the fragment does
            made = f"&accepted={quote(accepted)}" if accepted else ""
            return RedirectResponse(f"/admin/suggestions?tenant={quote(role.tenant_name)}{made}", status_code=303)
        ok = (f"Accepted: rule {done['rule_id']} now auto-approves these writes (high-risk ones still go to review)."
              if kind == "accept" else "Dismissed: it returns only if its evidence grows materially.")
        return await _suggestions_response(request, user, role, ok=ok, accepted=accepted,
                                           backtest=done.get("backtest"))

    handler.__name__ = f"{kind}_suggestion"
    return handler


def _save_review_sla(ctx: AppContext, user: Reviewer, role: TenantRole, form, params) -> str:
    seconds = tenant_config.set_review_sla(ctx, tenant_id=role.tenant_id, duration=_text(form, "review_sla", 40),
                                           actor=user.actor)
    return f"Review SLA: {format_duration(seconds)}."


def _save_redaction(ctx: AppContext, user: Reviewer, role: TenantRole, form, params) -> str:
    mode = _text(form, "mode", 20)
    tenant_config.set_redaction_mode(ctx, tenant_id=role.tenant_id, mode=mode, actor=user.actor)
    return f"Secret-shaped writes are now: {mode}."


def _register_secret(ctx: AppContext, user: Reviewer, role: TenantRole, form, params) -> str:
    label = _text(form, "label", 64).strip()
    value = _text(form, "value", 10_000)
    if not label:
        raise ValidationFailed.at("/label", "give the secret a label (it replaces the value in redactions)")
    tenant_config.register_secret(ctx, tenant_id=role.tenant_id, label=label, value=value, actor=user.actor)
    return f"Registered secret {label}; writes containing it are now redacted or rejected."


def _int_field(form, name: str, limit: int = 12) -> int:
    try:
        return int(_text(form, name, limit).strip())
    except ValueError:
        raise ValidationFailed.at(f"/{name}", "a whole number") from None


def _save_canaries(ctx: AppContext, user: Reviewer, role: TenantRole, form, params) -> str:
    """The canaries form: the same settings `PUT /v1/policy/canaries` takes, validated by the service."""
    try:
        threshold = float(_text(form, "miss_threshold_percent", 12).strip()) / 100
    except ValueError:
        raise ValidationFailed.at("/miss_threshold", "a percentage from 0 to 100") from None
    doc = {"enabled": form.get("enabled") == "on", "one_in": _int_field(form, "one_in"),
           "corpus": _text(form, "corpus", 40).strip(), "families": [str(f)[:100] for f in form.getlist("families")],
           "miss_threshold": threshold, "min_decided": _int_field(form, "min_decided")}
    cfg = canaries.set_config(ctx, tenant_id=role.tenant_id, doc=doc, actor=user.actor)
    if not cfg["enabled"]:
        return "Canaries are off."
    return f"Canaries on: one per {cfg['one_in']} staged writes."


def _add_backend(ctx: AppContext, user: Reviewer, role: TenantRole, form, params) -> str:
    name = _text(form, "name", 64).strip()
    backends.add_backend(ctx, tenant_name=role.tenant_name, name=name, kind="memwarden",
                         agents=_text(form, "agents", 200).strip() or "*",
                         options={"url": _text(form, "url", 2000).strip()}, secret=_text(form, "api_key", 500),
                         actor=user.actor, from_web=True)
    return f"Backend {name} added; live memories are being delivered."


def _change_backend(ctx: AppContext, user: Reviewer, role: TenantRole, form, params) -> str:
    name, action = params["name"], _text(form, "action", 20)
    if action in ("enable", "disable"):
        backends.set_enabled(ctx, tenant_name=role.tenant_name, name=name, enabled=action == "enable",
                             actor=user.actor)
        return f"Backend {name} {action}d."
    if action == "retry":
        count = backends.retry_failed(ctx, tenant_name=role.tenant_name, name=name, actor=user.actor)
        return f"{count} failed deliveries to {name} owed again."
    if action == "remove":
        backends.remove_backend(ctx, tenant_name=role.tenant_name, name=name, actor=user.actor)
        return f"Backend {name} removed; what it stores stays there."
    raise ValidationFailed.at("/action", "enable, disable, retry or remove")


async def run_recover(request: Request):
    """Recover (or dry-run it) from the admin page; the report is shown in the section."""
    user, role = _role(request)
    form = await request.form()
    entered = {name: str(form.get(name) or "").strip()[:256] for name in ("kind", "value", "since", "until")}
    entered["dry_run"] = bool(form.get("dry_run"))
    try:
        target = recover.parse_form_target(_text(form, "kind", 10), _text(form, "value", 256), _text(form, "since", 64),
                                           _text(form, "until", 64))
        report = await run_in_threadpool(recover.recover, request.app.state.ctx, tenant_id=role.tenant_id,
                                         target=target, actor=user.actor, dry_run=entered["dry_run"])
    except AppError as error:
        return await _respond(request, user, role, "recover", error=error, extra={"recover_form": entered})
    return await _respond(request, user, role, "recover", extra={"recover_form": entered, "recover_report": report})


routes = [
    Route("/admin", index, methods=["GET"]),
    Route("/admin/users", _form_action("users", _create_user), methods=["POST"]),
    Route("/admin/users/{user_id}", _form_action("users", _change_user), methods=["POST"]),
    Route("/admin/keys", create_key, methods=["POST"]),
    Route("/admin/keys/{key_id}/revoke", _form_action("keys", _revoke_key), methods=["POST"]),
    Route("/admin/policy", save_policy, methods=["POST"]),
    Route("/admin/policy/test", test_policy, methods=["POST"]),
    Route("/admin/suggestions", suggestions_page, methods=["GET"]),
    Route("/admin/suggestions/{suggestion_id}/accept", _suggestion_action("accept"), methods=["POST"]),
    Route("/admin/suggestions/{suggestion_id}/dismiss", _suggestion_action("dismiss"), methods=["POST"]),
    Route("/admin/review-sla", _form_action("policy", _save_review_sla), methods=["POST"]),
    Route("/admin/redaction", _form_action("redaction", _save_redaction), methods=["POST"]),
    Route("/admin/secrets", _form_action("redaction", _register_secret), methods=["POST"]),
    Route("/admin/backends", _form_action("backends", _add_backend), methods=["POST"]),
    Route("/admin/backends/{name}", _form_action("backends", _change_backend), methods=["POST"]),
    Route("/admin/canaries", _form_action("canaries", _save_canaries), methods=["POST"]),
    Route("/admin/recover", run_recover, methods=["POST"]),
]
