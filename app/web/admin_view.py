"""What the tenant admin page needs beyond the services it drives (users, apikeys, tenant_config):
a read of the tenant's settings, policy text parsing with JSON-pointer problems, and guarded
role changes. Every change goes through those services, which audit it."""

from __future__ import annotations

import copy
import json
import re
from typing import Any

from app.core import jsontext
from app.core.access import normalise_agents
from app.core.durations import format_duration
from app.core.policy import DEFAULT_POLICY
from app.core.timefmt import format_ts
from app.db.models import User, UserRole
from app.errors import NotFound, ValidationFailed
from app.repos.tenancy import tenants as tenant_repo
from app.repos.tenancy import users as users_repo
from app.services.tenancy import tenant_config, users
from app.services.runtime.context import AppContext

USERNAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}$")
MAX_POLICY_TEXT = 256 * 1024


def settings_view(ctx: AppContext, tenant_id: str) -> dict[str, Any]:
    """The tenant's policy (or the default, flagged), review SLA, redaction mode and registered
    secrets (labels only)."""
    with ctx.db.sessions() as session:
        tenant = tenant_repo.get(session, tenant_id=tenant_id)
        if tenant is None:
            raise NotFound("tenant not found")
        stored = (tenant.settings or {}).get("policy")
        secrets = tenant_repo.secret_labels(session, tenant_id=tenant_id)
    return {
        "policy_text": json.dumps(stored if stored else copy.deepcopy(DEFAULT_POLICY), indent=2, ensure_ascii=False),
        "policy_is_default": not stored,
        "redaction_mode": (tenant.settings or {}).get("redaction_mode", "redact"),
        "review_sla": format_duration(tenant_config.review_sla_seconds(tenant.settings)),
        "two_person_owned_keys": tenant_config.two_person_owned_keys(tenant.settings),
        "secrets": [{"id": s.id, "label": s.label, "created_at": format_ts(s.created_at)} for s in secrets],
    }


def save_policy_text(ctx: AppContext, *, tenant_id: str, text: str, actor: dict,
                     override_reason: str | None = None) -> None:
    """Parse the textarea's JSON and save it; ValidationFailed lists each problem with its JSON path."""
    if len(text) > MAX_POLICY_TEXT:
        raise ValidationFailed.at("/", f"the policy is over {MAX_POLICY_TEXT // 1024} KiB")
    try:
        doc = jsontext.loads(text)
    except ValueError as exc:
        msg = getattr(exc, "msg", str(exc))
        where = f" at line {exc.lineno}, column {exc.colno}" if hasattr(exc, "lineno") else ""
        raise ValidationFailed("the policy is not valid JSON",
                               details=[{"path": "/", "message": f"not valid JSON: {msg}{where}"}]) from None
    tenant_config.set_policy(ctx, tenant_id=tenant_id, doc=doc, actor=actor, override_reason=override_reason)


def _agents(raw: str) -> list[str]:
    try:
        return normalise_agents(raw)
    except ValueError as exc:
        raise ValidationFailed.at("/agents", str(exc)) from None


def member(ctx: AppContext, *, tenant_id: str, user_id: str) -> tuple[User, UserRole]:
    """A user holding a role in this tenant, else NotFound (users of other tenants are invisible)."""
    with ctx.db.sessions() as session:
        row = users_repo.member(session, tenant_id=tenant_id, user_id=user_id)
    if row is None:
        raise NotFound("no such user in this tenant")
    return row[0], row[1]


def create_member(ctx: AppContext, *, tenant_id: str, username: str, password: str, role: str, agents: str,
                  actor: dict) -> User:
    username = username.strip()
    if not USERNAME.match(username):
        raise ValidationFailed.at("/username", "usernames are 1-64 characters: letters, digits, '_', '.', '@', '-'")
    return users.create_user(ctx, username=username, password=password, tenant_id=tenant_id, role=role, homed=True,
                             agents=_agents(agents), actor=actor)


def change_member(ctx: AppContext, *, tenant_id: str, user_id: str, role: str | None, agents: str,
                  acting_user_id: str, actor: dict) -> None:
    """Change a member's role and allow-list, or remove their role (role None). An admin cannot
    lower or remove their own admin role here (another admin must), so a tenant keeps an admin."""
    member(ctx, tenant_id=tenant_id, user_id=user_id)
    if role is not None and role not in users.ROLES:
        raise ValidationFailed.at("/role", f"role must be one of {', '.join(users.ROLES)}")
    if user_id == acting_user_id and role != "admin":
        raise ValidationFailed.at("/role", "you cannot lower or remove your own admin role; ask another admin")
    agent_list = _agents(agents) if role is not None else None
    users.set_role(ctx, user_id=user_id, tenant_id=tenant_id, role=role, agents=agent_list, actor=actor)
