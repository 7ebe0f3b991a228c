"""Grants in tag and metadata *values*: power handed over under a key no list names.

``protected`` knows protected settings by their key (``role``, ``permissions``, ``sudo`` …). A write
can grant the same power under any other key, or in a tag's value: ``auth:superuser``,
``groups: [domain-admins]``, ``rbac: {grant: [users:delete]}``, ``acting_as: u_admin_01``,
``clearance: top-secret``, a bare ``override_safety`` tag. An agent that reads such a memory back
reads a grant, whatever the content says, so these are ``protected_memory`` evidence and high on
their own (as a protected key is). What counts, read from each value (linear, bounded):

* a **power role or group**: admin, administrator, superuser, root, sudo(ers), owner(s), as a whole
  value or a token of one (``u_admin_0001``, ``finance-admins``); a bare tag only when it is
  group-shaped (``domain-admins``, ``superuser``): ``admin-console`` is a topic;
* a **permission scope** with a write, delete or admin verb (``billing:write``, ``users:delete``,
  ``admin:org``, ``*:*``);
* a **clearance level** (``top-secret``, ``ts/sci``) under any key;
* **impersonation**: ``acting_as``, ``impersonate``, ``run_as``, ``sudo_as``, ``assume_role`` … with
  any value, and ``on_behalf_of`` / ``as_user`` naming a power principal;
* an **override flag** set: ``override_safety``, ``bypass_review``, ``skip_checks``, ``disable_mfa``
  as a bare tag, or as a key whose value is true / yes / on / 1;
* a **safeguard switched off** under a key that names it: ``approval_required: false``,
  ``safety_review: skip``, ``mfa_enforced: off``, ``kyc_check: waived``;
* a **power claimed** as a yes/no setting: ``is_owner: true``, ``can_approve_changes: yes``,
  ``may_override_limits: 1``.

``trusted`` / ``verified`` markers (a bare tag, or a key set to true) are medium: a note can be a
verified fact. Values under descriptive keys (``topic``, ``category``, ``subject``, ``title`` …)
are topics, not grants, and are skipped.
"""

from __future__ import annotations

import re
from typing import Any, Iterator, Mapping, Sequence

from app.core.jsontext import pointer_segment
from app.core.screening.flags import Span

#: Not "owner": a home's or a deal's owner is ordinary business (the key ``owner`` is read by ``protected``).
_POWER = r"(?:admins?|administrators?|sys[-_]?admins?|superusers?|super[-_ ]?admins?|global[-_ ]?admins?|root|sudo|sudoers|god[-_ ]?mode)"
#: A whole value that is, or is built on, a power role: ``superuser``, ``u_admin_0001``, ``finance-admins``.
#: Tokens joined by "-" or "_" only: ``docs/admin.md`` is a file about admins, and words with spaces
#: are prose ("root cause", "admin fee"), except the directory groups' own names ("Domain Admins").
_POWER_VALUE = re.compile(r"(?:[a-z0-9]{1,24}[-_]){0,3}" + _POWER + r"(?:[-_][a-z0-9]{1,24}){0,2}|"
                          r"(?:domain|enterprise|global|schema|tenant|org|organi[sz]ation|workspace) admin(?:istrator)?s?")
#: A bare tag that *is* a grant, not a topic: plural admin groups, superuser, sudo, root access.
_POWER_TAG = re.compile(r"(?:[a-z0-9]{1,24}[-_])?(?:admins|superusers?|super[-_]?admins?|sudoers|sudo|"
                        r"root[-_]access|admin[-_](?:rights|access|privileges?|role|group)|full[-_]access|god[-_]?mode)")
#: A permission scope with a write, delete or admin verb, either order.
_SCOPE = re.compile(r"(?:[a-z0-9_*-]{1,40}[:.](?:write|delete|admin|manage|owner|full|sudo|root)|"
                    r"(?:write|delete|admin|manage|sudo):[a-z0-9_.*-]{1,40}|\*:\*)")
_CLEARANCE = re.compile(r"(?:top[-_ ]?secret|ts[-_ /]?sci|cosmic[-_ ]top[-_ ]secret|q[-_ ]clearance)")
_IMPERSONATE_KEYS = frozenset({"acting_as", "act_as", "impersonate", "impersonating", "impersonation", "run_as", "runas",
                               "sudo_as", "assume_role", "assumed_role", "login_as", "log_in_as", "masquerade",
                               "masquerade_as", "effective_user", "switch_user", "su"})
_BEHALF_KEYS = frozenset({"on_behalf_of", "as_user", "for_user", "delegated_from", "delegate_of"})
_OVERRIDE = re.compile(r"(?:override|overrides|bypass|skip|disable|ignore|no|without|suspend)[-_ ]?(?:the[-_])?"
                       r"(?:safety|security|review|reviews|approval|approvals|checks?|auth\w*|verification|guardrails?|"
                       r"filters?|polic(?:y|ies)|moderation|confirmation|permissions?|mfa|2fa|limits?|validation|"
                       r"sandbox|audit|rbac|acl)")
_TRUE = re.compile(r"(?:true|yes|on|1|enabled?|always|all)")
_MARKER = re.compile(r"(?:trusted|verified|pre[-_]?approved|whitelisted|allowlisted)(?:[-_](?:source|sender|user|input))?")
#: Keys whose values name what a memory is about, not what it grants.
_DESCRIPTIVE = frozenset({"topic", "topics", "category", "categories", "subject", "title", "label", "labels", "kind",
                          "type", "project", "about", "summary", "description", "note", "notes", "tag", "tags",
                          "keywords", "department", "team", "position", "job", "job_title", "occupation", "name",
                          "contact", "company"})
_MAX_VALUE = 200
#: A key that names a safeguard switch: ``approval_required``, ``safety_review``, ``needs_security_check``,
#: ``mfa_enforced``. Set to false / skip / waived it switches the safeguard off for whatever reads the memory.
_SAFEGUARD_KEY = re.compile(r"(?:[a-z0-9]{1,24}_){0,3}(?:approval|approvals|review|reviews|safety|security|compliance|"
                            r"verification|verify|mfa|2fa|kyc|qa|sign_?off|moderation|audit|confirmation|fraud_check|"
                            r"four_eyes|dual_control)(?:_[a-z0-9]{1,24}){0,3}")
_OFF = re.compile(r"(?:false|no|off|skip|skipped|waived?|disabled?|bypass(?:ed)?|exempt|not[_ -]?required|not[_ -]?needed|"
                  r"never|optional)")
#: A key that claims a power of the principal: ``is_owner``, ``can_approve_changes``, ``may_override_limits``.
_POWER_KEY = re.compile(r"(?:is|can|may|has|allowed_to|allow|able_to)_(?:[a-z0-9]{1,24}_){0,2}(?:owner|admin\w*|superuser|root|"
                        r"sudo|approv\w*|overrid\w*|bypass\w*|grant\w*|sign\w*|manage_(?:users|roles|permissions|access|billing)|"
                        r"delete\w*|impersonat\w*|elevat\w*|unlock\w*|release\w*|waive\w*)(?:_[a-z0-9]{1,24}){0,3}")


def _key(name: str) -> str:
    return re.sub(r"[\s-]+", "_", name.strip().lower())


def _grant_value(key: str, value: str) -> str | None:
    """``high`` / ``medium`` when ``value`` under ``key`` grants power, else None."""
    v = value.strip().lower()
    if not v or len(v) > _MAX_VALUE or key in _DESCRIPTIVE:
        return None
    if key in _IMPERSONATE_KEYS and not _TRUE.fullmatch(v) and v not in ("false", "no", "none", "null", "off", "0"):
        return "high"
    if _OVERRIDE.fullmatch(key) and _TRUE.fullmatch(v):
        return "high"
    # Protected settings by meaning, under names no list has: a safeguard switched off, a power claimed.
    if len(key) <= 80 and _SAFEGUARD_KEY.fullmatch(key) and _OFF.fullmatch(v):
        return "high"
    if len(key) <= 80 and _POWER_KEY.fullmatch(key) and _TRUE.fullmatch(v):
        return "high"
    if _POWER_VALUE.fullmatch(v) or _CLEARANCE.fullmatch(v) or _SCOPE.fullmatch(v) or _OVERRIDE.fullmatch(v):
        return "high"
    if key in _BEHALF_KEYS:
        return None
    if _MARKER.fullmatch(key) and _TRUE.fullmatch(v):
        return "medium"
    return None


def _tag(tag: str) -> str | None:
    """The level of one tag: ``key:value`` read as a value, a bare tag as a grant or marker."""
    parts = re.split(r"[:=]", tag, maxsplit=1)
    if len(parts) == 2:
        return _grant_value(_key(parts[0]), parts[1])
    t = tag.strip().lower()
    if len(t) > _MAX_VALUE:
        return None
    if _POWER_TAG.fullmatch(t) or _OVERRIDE.fullmatch(t):
        return "high"
    return "medium" if _MARKER.fullmatch(t) else None


def _leaves(value: Any, path: str, key: str, depth: int = 0) -> Iterator[tuple[str, str, Any]]:
    """(path, nearest key, scalar) for every scalar in the metadata tree (bounded depth and width)."""
    if depth > 32:
        return
    if isinstance(value, Mapping):
        for k, item in list(value.items())[:256]:
            yield from _leaves(item, f"{path}/{pointer_segment(k)}", _key(str(k)), depth + 1)
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value[:256]):
            yield from _leaves(item, f"{path}/{i}", key, depth + 1)
    else:
        yield path, key, value


def spans(tags: Sequence[str], metadata: Mapping[str, Any] | None) -> tuple[list[Span], list[Span]]:
    """Evidence of grants in tags and metadata values: (high spans, medium spans)."""
    high: list[Span] = []
    medium: list[Span] = []
    for i, tag in enumerate(tags):
        level = _tag(tag) if isinstance(tag, str) else None
        if level:
            (high if level == "high" else medium).append(Span(f"tags/{i}", 0, len(tag)))
    for path, key, value in _leaves(metadata or {}, "metadata", ""):
        if isinstance(value, bool):
            value = "true" if value else "false"
        elif isinstance(value, int):
            value = str(value)
        if not isinstance(value, str):
            continue
        level = _grant_value(key, value)
        if level:
            (high if level == "high" else medium).append(Span(path, 0, len(value)))
    return high, medium
