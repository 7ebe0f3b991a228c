"""Which role an identity provider's claims give a person in a tenant (pure, no I/O).

A tenant's rule (``settings["oidc"]``) names the claim to read (`role_claim`, e.g. ``groups``), an
ordered map from claim values to roles (`role_map`, first match wins) and, optionally, the email
domains whose people it admits (`email_domains`: the verified ``email``'s domain or Google's ``hd``).
No rule, or no match, means no role: the person is not let in to that tenant.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from app.core.access import ROLES

MAX_MAP_ENTRIES = 64
MAX_TEXT = 256


@dataclass(frozen=True)
class OidcRule:
    """One tenant's claim-to-role rule."""

    role_claim: str
    role_map: tuple[tuple[str, str], ...]
    email_domains: tuple[str, ...] = ()

    def to_doc(self) -> dict[str, Any]:
        """The JSON stored in the tenant's settings (the map as pairs: JSON objects lose order)."""
        return {"role_claim": self.role_claim, "role_map": [list(pair) for pair in self.role_map],
                "email_domains": list(self.email_domains)}

    @classmethod
    def from_doc(cls, doc: Mapping[str, Any] | None) -> OidcRule | None:
        """The rule in a tenant's settings, or None when the tenant has none (or an unreadable one)."""
        if not isinstance(doc, Mapping) or not doc.get("role_map"):
            return None
        try:
            return cls(str(doc.get("role_claim") or "groups"),
                       tuple((str(value), str(role)) for value, role in doc["role_map"]),
                       tuple(str(d) for d in doc.get("email_domains") or ()))
        except (TypeError, ValueError):
            return None

    def role_for(self, claims: Mapping[str, Any]) -> str | None:
        """The role these ID-token/userinfo claims give, or None (not admitted)."""
        if self.email_domains and not (_email_domain(claims) in self.email_domains
                                       or str(claims.get("hd") or "").lower() in self.email_domains):
            return None
        held = claim_values(claims.get(self.role_claim))
        return next((role for value, role in self.role_map if value in held), None)


def claim_values(value: Any) -> set[str]:
    """A claim as a set of strings: a string is one value, a list its string items."""
    if isinstance(value, str):
        return {value}
    if isinstance(value, (list, tuple)):
        return {item for item in value if isinstance(item, str)}
    return set()


def _email_domain(claims: Mapping[str, Any]) -> str | None:
    """The domain of the email claim, only when the provider says it verified the address."""
    email = claims.get("email")
    if not isinstance(email, str) or "@" not in email or claims.get("email_verified") is not True:
        return None
    return email.rsplit("@", 1)[1].lower()


def parse_role_map(text: str) -> tuple[tuple[str, str], ...]:
    """``'reviewers=reviewer,auditors=auditor'`` as ordered pairs; ValueError names what is wrong."""
    pairs = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        value, equals, role = item.rpartition("=")
        value, role = value.strip(), role.strip()
        if not equals or not value:
            raise ValueError(f"{item!r} is not claim-value=role")
        if role not in ROLES:
            raise ValueError(f"{role!r} is not a role ({', '.join(ROLES)})")
        if len(value) > MAX_TEXT:
            raise ValueError(f"claim value longer than {MAX_TEXT} characters")
        pairs.append((value, role))
    if len(pairs) > MAX_MAP_ENTRIES:
        raise ValueError(f"at most {MAX_MAP_ENTRIES} entries")
    return tuple(pairs)


def parse_domains(text: str) -> tuple[str, ...]:
    """``'example.com,example.org'`` as lower-case domains; ValueError for anything else."""
    domains = tuple(d.strip().lower() for d in text.split(",") if d.strip())
    for domain in domains:
        if "@" in domain or "/" in domain or " " in domain or "." not in domain or len(domain) > MAX_TEXT:
            raise ValueError(f"{domain!r} is not a domain name")
    return domains
