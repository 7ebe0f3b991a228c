"""Which approvals need the reviewer's explicit confirmation: one table, asked on every path.

The API (`confirm_risk`), the change page and its keyboard (`a` opens the confirmation instead of
approving), a queue row opened in place and bulk approval (each flagged change confirmed by name)
all read `reasons`; the service refuses an unconfirmed approval whichever path sent it, so a path
that forgot to ask still cannot approve.

A confirmation is needed for what a reviewer cannot take back or should not wave through:

* ``risk``: screening put the change at medium or high risk (a poisoned write, a contradiction of a
  sensitive fact);
* ``hard_delete``: a forget or expire that erases memory permanently;
* ``drops_facts``: a merge whose result keeps only some of its memories' text (``keep_canonical``,
  ``keep_highest_confidence``) while another of them says something else.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from app.core import diff as textdiff

CONFIRMED_LEVELS = ("medium", "high")
"""Risk levels whose approval needs confirmation on every path."""

REASONS = {
    "risk": "screening put it at {level} risk",
    "hard_delete": "it permanently deletes memory, which cannot be undone",
    "drops_facts": "the merge keeps one memory's text and drops what the others say",
}
"""Each reason's wording, as the refusal and the pages say it."""


def reasons(*, risk_level: str | None, operation: str, request: Mapping[str, Any] | None,
            merge_drops: bool = False) -> list[str]:
    """Why approving a change needs explicit confirmation (empty: it needs none). `request` is the
    change's stored request; `merge_drops` whether its merge plan drops text (`merge_drops_facts`)."""
    found = []
    if risk_level in CONFIRMED_LEVELS:
        found.append("risk")
    body = request or {}
    if (operation == "forget" and body.get("hard_delete")) or (operation == "expire"
                                                              and body.get("action") == "hard_delete"):
        found.append("hard_delete")
    if operation == "merge" and merge_drops:
        found.append("drops_facts")
    return found


def merge_drops_facts(contents: Iterable[str], merged: str) -> bool:
    """Whether a merge's result leaves out a memory's text that is not a near-duplicate of it."""
    kept = (merged or "").casefold()
    for content in contents:
        text = (content or "").strip()
        if not text or text.casefold() in kept:
            continue
        if textdiff.similarity(text, merged or "") < textdiff.DUPLICATE_SIMILARITY:
            return True
    return False


def describe(found: list[str], risk_level: str | None) -> str:
    """The reasons as one clause, for refusals and pages."""
    return "; ".join(REASONS[r].format(level=risk_level) for r in found)
