"""Separation of duties: the author of a change never decides it, whatever the deciding key's scopes.

A change's author is the key that submitted it (`Change.submitted_by`: a key id, or `api_key:<id>`
for a change a key raised through a recover) and the person who owns that key, or the person who
submitted it signed in (`user:<id>`, a recover run from the admin page). A decider is the same
author when it is that key, or that person — signed in, or with any key they own. Two keys of no
one are two authors: a different key of no one may decide. Withdrawing is the author's own act
and is not a decision (`app.services.review.review.withdraw`)."""

from __future__ import annotations

from typing import Any

from app.errors import OwnChange
from app.repos.tenancy import apikeys as apikeys_repo

KEY_PREFIX = "key_"
ACTOR_KEY = "api_key:"
ACTOR_USER = "user:"

MESSAGE = ("you cannot decide your own change: {author} submitted it, and the author of a change never approves "
           "or rejects it; another reviewer must decide it")


def submitting_key(submitted_by: str | None) -> str | None:
    """The id of the key that submitted a change, or None (a person, the CLI, a compaction run)."""
    value = submitted_by or ""
    value = value.removeprefix(ACTOR_KEY)
    return value if value.startswith(KEY_PREFIX) else None


def submitting_person(submitted_by: str | None) -> str | None:
    """The id of the person who submitted a change signed in, or None."""
    value = submitted_by or ""
    return value.removeprefix(ACTOR_USER) if value.startswith(ACTOR_USER) else None


def deciding_key(actor: dict[str, Any]) -> str | None:
    return actor.get("id") if actor.get("kind") == "api_key" else None


def deciding_person(actor: dict[str, Any]) -> str | None:
    """The person a decision by `actor` is theirs: a person signed in, or the owner of the key used."""
    if actor.get("kind") == "user":
        return actor.get("id")
    return actor.get("owner_user_id") if actor.get("kind") == "api_key" else None


def is_own_change(session, tenant_id: str, submitted_by: str | None, actor: dict[str, Any]) -> bool:
    """Whether `actor` (as the request names it: a person, or a key with its owner) is the author of
    a change `submitted_by` submitted. The submitting key's owner is read only when the decider is a
    person (a key of no one is never that owner)."""
    key, person = submitting_key(submitted_by), submitting_person(submitted_by)
    if key is not None and key == deciding_key(actor):
        return True
    decider = deciding_person(actor)
    if decider is None:
        return False
    if person is not None:
        return person == decider
    return key is not None and apikeys_repo.owner_of(session, tenant_id=tenant_id, key_id=key) == decider


def refuse_own_change(session, tenant_id: str, submitted_by: str | None, actor: dict[str, Any]) -> None:
    """Refuse (403 `own_change`) a decision by the change's author; nothing is decided."""
    if is_own_change(session, tenant_id, submitted_by, actor):
        author = "this key" if submitting_key(submitted_by) == deciding_key(actor) else "you (or a key you own)"
        raise OwnChange(MESSAGE.format(author=author), details={"reason": "own_change"})
