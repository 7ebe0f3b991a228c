"""The auditors' decisions log: who approved or rejected which change, and when.

An audit view of the `changes` table: ids, agent, operation, status, deciders, times, risk level
and policy rule — never the change's request or any memory content (a reviewer's free-text reason
is left out too, as it may quote content)."""

from __future__ import annotations

import csv
import io
import json
from functools import cache
from typing import Any, Iterator

from app.core.cursor import encode_cursor
from app.core.timefmt import format_ts, parse_ts
from app.db.models import Change
from app.errors import ValidationFailed
from app.paths import SCHEMAS_DIR
from app.repos.review import changes as changes_repo
from app.repos.review.changes import DecisionFilter
from app.repos.review.suggestions import LEARNED_DECIDER_PREFIX
from app.services.runtime.context import AppContext
from app.services.runtime.cursors import decode_cursor

DEFAULT_LIMIT = 100
EXPORT_PAGE = 500
COLUMNS = ("change_id", "status", "agent_id", "operation", "decided_by", "decided_at", "approved_by",
           "approved_via", "approvals_required", "submitted_by", "submitted_at", "risk_level", "policy_rule",
           "learned_rule")


def _reviewer_labels(reviewer: str) -> tuple[str, ...]:
    # Deciders are recorded as actor labels (`user:<id>`, `api_key:<id>`); a bare id matches either.
    if ":" in reviewer:
        return (reviewer,)
    return (f"user:{reviewer}", f"api_key:{reviewer}")


def _timestamp(spec: dict[str, Any], name: str):
    value = spec.get(name)
    if value in (None, ""):
        return None
    try:
        return parse_ts(value)
    except ValueError as exc:
        raise ValidationFailed.at(f"/{name}", f"not an RFC 3339 timestamp: {exc}") from None


@cache
def operations() -> tuple[str, ...]:
    """The operations a change can have (the `operation` enum of `schemas/change.json`)."""
    schema = json.loads((SCHEMAS_DIR / "change.json").read_text(encoding="utf-8"))
    return tuple(schema["properties"]["operation"]["enum"])


def filter_from(spec: dict[str, Any]) -> DecisionFilter:
    """The filter a validated query (`decisions.query`, or the page's form) asks for; 422 for bad
    dates and for an operation no change can have (an empty page would read as "none decided")."""
    decided_from, decided_to = _timestamp(spec, "from"), _timestamp(spec, "to")
    if decided_from and decided_to and decided_from > decided_to:
        raise ValidationFailed.at("/from", "from must not be later than to")
    if spec.get("operation") and spec["operation"] not in operations():
        raise ValidationFailed.at("/operation", f"not an operation; one of {', '.join(operations())}")
    return DecisionFilter(reviewer=_reviewer_labels(spec["reviewer"]) if spec.get("reviewer") else (),
                          status=spec.get("status") or None, agent_id=spec.get("agent_id") or None,
                          operation=spec.get("operation") or None,
                          decided_from=decided_from, decided_to=decided_to)


def decision_json(change: Change) -> dict[str, Any]:
    """One decision as the log shows it (no request body, no content, no reason)."""
    return {"change_id": change.id, "status": change.status, "agent_id": change.agent_id,
            "operation": change.operation, "decided_by": change.decided_by, "decided_at": format_ts(change.decided_at),
            "approved_by": [a.get("by") for a in _approvals(change)],
            "approved_via": [a.get("via_key") for a in _approvals(change)],
            "approvals_required": change.approvals_required, "submitted_by": change.submitted_by,
            "submitted_at": format_ts(change.submitted_at), "risk_level": change.risk_level,
            "policy_rule": change.policy_rule, "learned_rule": learned_rule(change)}


def _approvals(change: Change) -> list[dict[str, Any]]:
    return [a for a in change.approvals if isinstance(a, dict) and a.get("by")]


def learned_rule(change: Change) -> str | None:
    """The learned policy rule that approved `change` on its own, or None for a person's decision."""
    decider = change.decided_by or ""
    return change.policy_rule if decider.startswith(LEARNED_DECIDER_PREFIX) else None


def names_of(change: Change) -> dict[str, str]:
    """The display names the decision kept, by actor label: each approver's (a person's username, as
    recorded with their approval) and the decider's (kept with a decided change's view)."""
    names = {a["by"]: a["name"] for a in change.approvals if isinstance(a, dict) and a.get("by") and a.get("name")}
    reviewer = (change.decided_view or {}).get("reviewer") or {}
    if change.decided_by and reviewer.get("name"):
        names.setdefault(change.decided_by, reviewer["name"])
    return names


def vias_of(change: Change) -> dict[str, str]:
    """The API key each approval given with one was given with, by actor label (for the page)."""
    return {a["by"]: a["via_key"] for a in _approvals(change) if a.get("via_key")}


def list_decisions(ctx: AppContext, tenant_id: str, flt: DecisionFilter, limit: int = DEFAULT_LIMIT,
                   cursor: str | None = None, *, with_names: bool = False) -> dict[str, Any]:
    """One page of the tenant's decisions, newest first: `{items, next_cursor}`. `with_names` adds
    each item's `names` (`names_of`) for the page; the API's items keep the schema's fields only."""
    after = decode_cursor(cursor) if cursor else None
    with ctx.db.sessions() as session:
        rows = changes_repo.decisions_page(session, tenant_id=tenant_id, flt=flt, limit=limit + 1, after=after)
    more, rows = len(rows) > limit, rows[:limit]
    next_cursor = encode_cursor(rows[-1].decided_at, rows[-1].id) if more else None
    items = [{**decision_json(c), **({"names": names_of(c), "via": vias_of(c)} if with_names else {})} for c in rows]
    return {"items": items, "next_cursor": next_cursor}


def all_decisions(ctx: AppContext, tenant_id: str, flt: DecisionFilter) -> Iterator[dict[str, Any]]:
    """Every decision the filter matches, newest first, a page at a time (for downloads)."""
    cursor = None
    while True:
        page = list_decisions(ctx, tenant_id, flt, EXPORT_PAGE, cursor)
        yield from page["items"]
        cursor = page["next_cursor"]
        if cursor is None:
            return


FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")
"""A cell starting with one of these is run as a formula by spreadsheet programs (CSV injection)."""


def csv_cell(value: Any) -> str:
    """One CSV cell: a value a spreadsheet would run as a formula (an agent id may start with `-` or
    `@`) gets a leading `'`, which makes it text (OWASP's advice); None is empty."""
    text = "" if value is None else str(value)
    return "'" + text if text.startswith(FORMULA_PREFIXES) else text


def csv_lines(items) -> Iterator[str]:
    """The decisions as CSV text: a header row, then one row per decision (approvers joined by spaces,
    every cell neutralised against formula injection by `csv_cell`)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer)

    def line(values) -> str:
        buffer.seek(0)
        buffer.truncate()
        writer.writerow(values)
        return buffer.getvalue()

    yield line(COLUMNS)
    for item in items:
        yield line([csv_cell(_joined(item[c]) if c in ("approved_by", "approved_via") else item[c])
                    for c in COLUMNS])


def _joined(values: list[str | None]) -> str:
    """A list cell: its values joined by spaces, `-` for none (a signed-in approval used no key)."""
    return " ".join(v or "-" for v in values)
