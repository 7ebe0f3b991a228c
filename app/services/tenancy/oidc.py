"""Sign-in through the deployment's OpenID provider: accounts provisioned on first sign-in, roles
taken from the provider's claims at every sign-in.

An identity (issuer, subject) has one account, in the operator's namespace (it may hold roles in
several tenants). Each tenant with an OIDC rule (`settings["oidc"]`, `memwarden tenant set
--oidc-role-map`) decides the person's role there from their claims (`app.core.oidc_roles`); the
account's roles in those tenants follow the provider at each sign-in, so someone who leaves a group,
or the company, loses the role the next time they sign in, and is refused when no role is left (their
open sessions end too). Roles in tenants without a rule are the operator's to grant and are kept.
Every sign-in, refusal and role change is audited.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from typing import Any, Mapping

from sqlalchemy.orm import Session

from app.core.access import normalise_agents
from app.core.ids import new_id
from app.core.oidc_roles import OidcRule, parse_domains, parse_role_map
from app.core.timefmt import utcnow
from app.db.models import User, UserRole
from app.errors import Forbidden, ValidationFailed
from app.repos.tenancy import tenants as tenant_repo
from app.repos.tenancy import users as users_repo
from app.services.runtime.context import AppContext
from app.services.tenancy.tenant_config import set_tenant_setting
from app.services.tenancy.users import audit_sign_in, client_key

OIDC_ACTOR = {"kind": "system", "id": "oidc"}
UNUSABLE_PASSWORD = "!oidc"  # not an argon2 hash: password sign-in never checks it (`users.sign_in`)
MAX_USERNAME = 64
USERNAME_UNSAFE = re.compile(r"[^A-Za-z0-9_.@-]")  # the users table's CHECK allows only these


class SignInRefused(Forbidden):
    """The provider vouched for the person, but no tenant gives them a role (or the account is disabled)."""


def set_oidc_rule(ctx: AppContext, *, tenant_id: str, role_claim: str | None, role_map: str | None,
                  email_domains: str | None, actor: dict) -> OidcRule | None:
    """Set (or, with an empty `role_map`, remove) the tenant's claim-to-role rule; arguments left
    None keep their current value. Returns the rule now in force."""
    with ctx.db.sessions() as session:
        current = OidcRule.from_doc(tenant_repo.settings_of(session, tenant_id=tenant_id).get("oidc"))
    try:
        pairs = parse_role_map(role_map) if role_map is not None else (current.role_map if current else ())
        domains = (parse_domains(email_domains) if email_domains is not None
                   else (current.email_domains if current else ()))
    except ValueError as exc:
        raise ValidationFailed.at("/oidc", str(exc)) from None
    claim = (role_claim if role_claim is not None else (current.role_claim if current else "groups")).strip()
    if not claim or len(claim) > 128:
        raise ValidationFailed.at("/oidc/role_claim", "the role claim must be 1-128 characters")
    rule = OidcRule(claim, pairs, domains) if pairs else None
    set_tenant_setting(ctx, tenant_id, "oidc", rule.to_doc() if rule else None,
                       data={"oidc": {"role_claim": claim, "role_map": len(pairs), "email_domains": len(domains)}},
                       actor=actor)
    return rule


def sign_in_with_claims(ctx: AppContext, *, issuer: str, claims: Mapping[str, Any], client: str | None) -> str:
    """Open a session for the person the provider vouched for (verified `claims`, `sub` required);
    returns the session id. Provisions the account on first sign-in and brings its roles in
    OIDC-ruled tenants in line with the claims; SignInRefused when no role is left."""
    subject = str(claims["sub"])
    client = client_key(client)
    refusal = None
    with ctx.db.sessions.begin() as session:
        users_repo.lock_oidc_identity(session, issuer=issuer, subject=subject)
        user = users_repo.find_by_oidc_identity(session, issuer=issuer, subject=subject)
        ruled = {tenant.id: OidcRule.from_doc((tenant.settings or {}).get("oidc"))
                 for tenant in tenant_repo.with_setting(session, key="oidc")}
        wanted = {tenant_id: role for tenant_id, rule in ruled.items()
                  if rule is not None and (role := rule.role_for(claims))}
        name = _display_name(claims)
        if user is not None and user.disabled_at is not None:
            refusal = "your account here is disabled; ask your administrator"
            audit_sign_in(ctx, session, user.id, user.username, "auth.sign_in_failed", "disabled", client)
        elif user is None and not wanted:
            refusal = "no tenant here gives you a role; ask your administrator to map one of your groups"
            audit_sign_in(ctx, session, None, name, "auth.sign_in_failed", "no_role", client)
        else:
            created = user is None
            if created:
                user = _provision(session, issuer, subject, name)
            _sync_roles(ctx, session, user, ruled, wanted, created)
            if not users_repo.tenant_ids_of(session, user_id=user.id):
                # They had an account but lost every role: their open sessions end now, too.
                refusal = "you no longer have a role here; ask your administrator"
                users_repo.revoke_all_web_sessions(session, user_id=user.id, at=utcnow())
                audit_sign_in(ctx, session, user.id, user.username, "auth.sign_in_failed", "no_role", client)
            else:
                session_id = secrets.token_urlsafe(32)
                users_repo.insert_web_session(session, session_id=session_id, user_id=user.id)
                audit_sign_in(ctx, session, user.id, user.username, "auth.signed_in", "oidc", client)
    if refusal is not None:
        raise SignInRefused(refusal)
    return session_id


def _display_name(claims: Mapping[str, Any]) -> str:
    """The account's username: the verified email, else the preferred username, else the subject,
    in the characters a username may hold (others become `-`)."""
    for candidate in (claims.get("email") if claims.get("email_verified") is True else None,
                      claims.get("preferred_username"), claims.get("sub")):
        if isinstance(candidate, str):
            name = USERNAME_UNSAFE.sub("-", candidate.strip()).lstrip("_.@-")[:MAX_USERNAME]
            if name:
                return name
    return "oidc-user"


def _provision(session: Session, issuer: str, subject: str, name: str) -> User:
    """Create the identity's account; a name another operator account holds gets a suffix derived
    from the identity (never the other account: a provider's claim must not take over a local one)."""
    if users_repo.find_by_username(session, username=name) is not None:
        suffix = hashlib.sha256(f"{issuer} {subject}".encode()).hexdigest()[:8]
        name = f"{name[:MAX_USERNAME - 9]}-{suffix}"
    user = User(id=new_id("usr"), username=name, password_hash=UNUSABLE_PASSWORD, oidc_issuer=issuer,
                oidc_subject=subject)
    users_repo.insert_user(session, user, None)
    return user


def _sync_roles(ctx: AppContext, session: Session, user: User, ruled: dict[str, OidcRule | None],
                wanted: dict[str, str], created: bool) -> None:
    """Give the account the `wanted` role in each OIDC-ruled tenant (none where the rule gives
    none); each change is audited in its tenant. A kept role keeps its agent allow-list."""
    for tenant_id in ruled:
        role = wanted.get(tenant_id)
        existing = users_repo.get_role(session, user_id=user.id, tenant_id=tenant_id)
        if (existing.role if existing else None) == role:
            continue
        if existing is None:
            users_repo.add_role(session, UserRole(user_id=user.id, tenant_id=tenant_id, role=role,
                                                  agents=normalise_agents("*")))
        elif role is None:
            users_repo.delete_role(session, existing)
        else:
            existing.role = role
        agents = list(existing.agents) if existing is not None and role is not None else (["*"] if role else [])
        subject = {"type": "user", "id": user.id}
        if created:
            ctx.audit.append(session, tenant_id=tenant_id, event_type="user.created", actor=OIDC_ACTOR,
                             subject=subject, data={"username": user.username, "role": role, "agents": agents})
        else:
            ctx.audit.append(session, tenant_id=tenant_id, event_type="user.role_changed", actor=OIDC_ACTOR,
                             subject=subject, data={"role": role, "agents": agents})

