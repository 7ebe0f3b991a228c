"""Per-tenant settings the memory services need: redaction mode, registered secrets and the review
policy, cached per process under the tenant row's version (`rules_for`)."""

from __future__ import annotations

import hashlib
import hmac
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from sqlalchemy.orm import Session

from app.core.ids import new_id
from app.core.durations import parse_duration
from app.core.canonical import canonical_json
from app.core.policy import Policy, PolicyError
from app.core.redaction import Redactor, RegisteredSecret
from app.core.screening import Protection
from app.core.screening.protected import validate_settings as validate_screening
from app.db.models import TenantSecret
from app.errors import NotFound, ValidationFailed
from app.repos.router import backends as backends_repo
from app.repos.tenancy import tenants as tenant_repo
from app.services.review import policy_backtest
from app.services.memory import staging
from app.services.runtime.context import AppContext

REDACTION_MODES = ("redact", "reject")


def secrets_key(ctx: AppContext, tenant_id: str) -> bytes:
    """The HMAC key a tenant's registered secrets are hashed with (derived, never stored)."""
    root = ctx.settings.resolved_secret_key().encode()
    return hmac.new(root, b"memwarden/registered-secrets/" + tenant_id.encode(), hashlib.sha256).digest()


def redaction_mode(session: Session, tenant_id: str) -> str:
    tenant = tenant_repo.get(session, tenant_id=tenant_id)
    if tenant is None:
        raise NotFound("tenant not found")
    return (tenant.settings or {}).get("redaction_mode", "redact")


def redactor_for(ctx: AppContext, session: Session, tenant_id: str) -> Redactor:
    rows = tenant_repo.secret_digests(session, tenant_id=tenant_id)
    registered = [RegisteredSecret(r.length, r.digest) for r in rows]
    return Redactor(registered, secrets_key(ctx, tenant_id) if registered else None)


@dataclass(frozen=True)
class TenantRules:
    """What every write of a tenant needs from its settings: the redactor (registered secrets
    compiled in), the redaction mode and the review policy."""

    redactor: Redactor
    mode: str
    policy: Policy
    protection: Protection = Protection()
    """Extra keys and paths screening treats as protected (``settings["screening"]``)."""
    read_budget: tuple[tuple[str, int], ...] = ()
    """The tenant's own read budgets (``settings["read_budget"]``: `per_key`, `per_agent`), if any."""
    backends: tuple = ()
    """The tenant's enabled memory backends (`app.services.router.backends`), detached rows."""


_RULES_CACHE_SIZE = 4096
_rules: OrderedDict[tuple[str, int, bytes], TenantRules] = OrderedDict()
_rules_lock = threading.Lock()


def rules_for(ctx: AppContext, principal) -> TenantRules:
    """The tenant's rules, from a per-process cache keyed by the config version the caller's key
    was checked with (`Principal.config_version`, read in the same statement as the key), so a
    write reads no settings rows. Every change of settings or secrets updates the tenant row, and
    so its version: the next request sees the change, in every process. Without a version (a
    principal that did not come from a key check) the rules are read afresh."""
    key = (principal.tenant_id, principal.config_version, secrets_key(ctx, principal.tenant_id))
    if principal.config_version is not None:
        with _rules_lock:
            cached = _rules.get(key)
            if cached is not None:
                _rules.move_to_end(key)
                return cached
    with ctx.db.sessions() as session:
        rules = load_rules(ctx, session, principal.tenant_id)
    if principal.config_version is not None:
        with _rules_lock:
            _rules[key] = rules
            while len(_rules) > _RULES_CACHE_SIZE:
                _rules.popitem(last=False)
    return rules


def cached_rules(ctx: AppContext, tenant_id: str, config_version: int) -> TenantRules | None:
    """The tenant's rules cached for `config_version` by `rules_for`, or None (never reads the database)."""
    with _rules_lock:
        return _rules.get((tenant_id, config_version, secrets_key(ctx, tenant_id)))


def load_rules(ctx: AppContext, session: Session, tenant_id: str) -> TenantRules:
    """The tenant's rules read afresh in `session` (an import reads them once for a whole file)."""
    settings = tenant_repo.settings_of(session, tenant_id=tenant_id)
    return TenantRules(redactor_for(ctx, session, tenant_id), redaction_mode(session, tenant_id),
                       staging.tenant_policy(session, tenant_id), Protection.from_settings(settings.get("screening")),
                       tuple(sorted(read_budget_of(settings).items())),
                       tuple(backends_repo.for_tenant(session, tenant_id=tenant_id, enabled_only=True)))


def set_screening(ctx: AppContext, *, tenant_id: str, doc: dict, actor: dict) -> None:
    """Set the tenant's extra protected keys and path globs (``{"protected_keys": [...],
    "protected_paths": [...]}``); writes naming them are high risk (``protected_memory``)."""
    problems = validate_screening(doc)
    if problems:
        raise ValidationFailed.at("/screening", "; ".join(problems))
    _set_setting(ctx, tenant_id, "screening", dict(doc), event_type="tenant.settings_changed",
                 data={"screening": {k: len(v) for k, v in doc.items()}}, actor=actor)


REVIEW_SLA_MAX_SECONDS = 90 * 86400
def review_sla_seconds(settings: dict | None) -> int:
    """The review SLA (seconds) in a tenant's settings; 0 when none is set."""
    value = (settings or {}).get("review_sla_seconds")
    return value if isinstance(value, int) and value > 0 else 0


def tenant_review_sla(ctx: AppContext, tenant_id: str) -> int:
    """The tenant's review SLA in seconds (0: none)."""
    with ctx.db.sessions() as session:
        return review_sla_seconds(tenant_repo.settings_of(session, tenant_id=tenant_id))


def parse_review_sla(duration: str) -> int:
    """A review SLA as written (`4h`, `2d`, `off`) in seconds (0: none); ValidationFailed unless
    it is whole minutes from 1m to 90d, or off."""
    try:
        seconds = parse_duration(duration)
    except ValueError as exc:
        raise ValidationFailed.at("/review_sla", str(exc)) from None
    if seconds and not 60 <= seconds <= REVIEW_SLA_MAX_SECONDS:
        raise ValidationFailed.at("/review_sla", "must be between 1m and 90d, or off")
    if seconds % 60:
        raise ValidationFailed.at("/review_sla", "must be whole minutes (the queue filters by the minute)")
    return seconds


def set_review_sla(ctx: AppContext, *, tenant_id: str, duration: str, actor: dict) -> int:
    """Set the longest a change may wait for review (`4h`, `2d`, `off`…); changes waiting longer
    are flagged in the queue, counted in `/metrics` and announced once (`review.sla_breached`).
    Returns the SLA in seconds (0: disabled)."""
    seconds = parse_review_sla(duration)
    _set_setting(ctx, tenant_id, "review_sla_seconds", seconds, event_type="tenant.settings_changed",
                 data={"review_sla_seconds": seconds}, actor=actor)
    return seconds


def _bump_version(session: Session, tenant_id: str) -> None:
    """Touch the tenant row so its version changes with the secrets (see `rules_for`)."""
    tenant_repo.touch(session, tenant_id=tenant_id)


def set_redaction_mode(ctx: AppContext, *, tenant_id: str, mode: str, actor: dict) -> None:
    if mode not in REDACTION_MODES:
        raise ValidationFailed.at("/redaction_mode", f"must be one of {', '.join(REDACTION_MODES)}")
    _set_setting(ctx, tenant_id, "redaction_mode", mode, event_type="tenant.settings_changed",
                 data={"redaction_mode": mode}, actor=actor)


def set_tenant_setting(ctx: AppContext, tenant_id: str, key: str, value: Any, *, data: dict, actor: dict) -> None:
    """Set (None: remove) one key of the tenant's settings, audited as `tenant.settings_changed`
    with `data` (which must say what changed without holding secrets)."""
    _set_setting(ctx, tenant_id, key, value, event_type="tenant.settings_changed", data=data, actor=actor)


def _set_setting(ctx: AppContext, tenant_id: str, key: str, value: Any, *, event_type: str, data: dict,
                 actor: dict) -> None:
    """Set (None: remove) one key of the tenant's settings and audit it, in one transaction (row-locked)."""
    with ctx.db.sessions.begin() as session:
        tenant = tenant_repo.get(session, tenant_id=tenant_id, lock=True)
        if tenant is None:
            raise NotFound("tenant not found")
        settings = {**(tenant.settings or {}), key: value}
        if value is None:
            del settings[key]
        tenant.settings = settings
        ctx.audit.append(session, tenant_id=tenant_id, event_type=event_type, actor=actor,
                         subject={"type": "tenant", "id": tenant_id}, data=data)


def register_secret(ctx: AppContext, *, tenant_id: str, label: str, value: str, actor: dict) -> str:
    """Store a keyed hash of `value` so later writes containing it are redacted; returns its id."""
    try:
        secret = RegisteredSecret.from_plaintext(value, secrets_key(ctx, tenant_id))
    except ValueError as exc:
        raise ValidationFailed.at("/value", str(exc)) from None
    secret_id = new_id("sec")
    with ctx.db.sessions.begin() as session:
        tenant_repo.add_secret(session, TenantSecret(id=secret_id, tenant_id=tenant_id, label=label[:64], digest=secret.digest,
                                 length=secret.length))
        _bump_version(session, tenant_id)
        ctx.audit.append(session, tenant_id=tenant_id, event_type="secret.registered", actor=actor,
                         subject={"type": "secret", "id": secret_id}, data={"label": label[:64]})
    return secret_id


def parse_policy(doc: Any) -> Policy:
    """A policy document validated (422 listing every problem)."""
    try:
        return Policy.parse(doc)
    except PolicyError as exc:
        raise ValidationFailed("invalid policy", details=exc.problems) from None


def set_policy(ctx: AppContext, *, tenant_id: str, doc: dict, actor: dict,
               override_reason: str | None = None) -> dict[str, Any]:
    """Replace the tenant's review policy: validated, backtested (`app.services.review.policy_backtest`:
    409 `backtest_failed` when it would admit known-bad writes with no one deciding, unless
    `override_reason` is given), and audited with a digest of it and the backtest's counts.
    Returns the backtest report."""
    policy = parse_policy(doc)
    report = policy_backtest.backtest(ctx, tenant_id, policy)
    recorded = policy_backtest.gate(report, policy_backtest.override_reason(override_reason))
    normalised = policy.to_doc()
    _set_setting(ctx, tenant_id, "policy", normalised, event_type="policy.changed", actor=actor,
                 data={"rules": [r["id"] for r in normalised["rules"]],
                       "policy_sha256": hashlib.sha256(canonical_json(normalised)).hexdigest(),
                       "backtest": recorded})
    return report


TWO_PERSON_OWNED_KEYS = "two_person_owned_keys"
"""Tenant setting (true or absent): approvals of changes needing two or more come from people."""


def two_person_owned_keys(settings: dict | None) -> bool:
    """Whether a tenant's settings refuse approvals by keys of no one on changes needing two or more."""
    return (settings or {}).get(TWO_PERSON_OWNED_KEYS) is True


def set_two_person_owned_keys(ctx: AppContext, *, tenant_id: str, on: bool, actor: dict) -> None:
    """Whether approvals of changes needing two or more must come from people (signed in, or with an
    API key that has an owner): on, a key of no one gets 403 there (`app.services.review.review`)."""
    _set_setting(ctx, tenant_id, TWO_PERSON_OWNED_KEYS, True if on else None, event_type="tenant.settings_changed",
                 data={TWO_PERSON_OWNED_KEYS: bool(on)}, actor=actor)


READ_BUDGET_KINDS = ("per_key", "per_agent")


def read_budget_of(settings: dict | None) -> dict[str, int]:
    """The read budgets a tenant set for itself (`per_key`, `per_agent`; 0 turns one off)."""
    stored = (settings or {}).get("read_budget")
    if not isinstance(stored, dict):
        return {}
    return {k: v for k, v in stored.items() if k in READ_BUDGET_KINDS and isinstance(v, int) and v >= 0}


def set_read_budget(ctx: AppContext, *, tenant_id: str, actor: dict, **budgets: int | None) -> dict[str, int]:
    """Set the tenant's own read budgets (`per_key`, `per_agent`: distinct memories per window;
    0 turns one off; a kind left None keeps its current value). Returns what the tenant now sets."""
    for kind, value in budgets.items():
        if kind not in READ_BUDGET_KINDS:
            raise ValidationFailed.at(f"/read_budget/{kind}", "not a read budget")
        if value is not None and not 0 <= value <= 10_000_000:
            raise ValidationFailed.at(f"/read_budget/{kind}", "must be between 0 and 10000000")
    with ctx.db.sessions() as session:
        current = read_budget_of(tenant_repo.settings_of(session, tenant_id=tenant_id))
    merged = {**current, **{k: v for k, v in budgets.items() if v is not None}}
    _set_setting(ctx, tenant_id, "read_budget", merged, event_type="tenant.settings_changed",
                 data={"read_budget": merged}, actor=actor)
    return merged
