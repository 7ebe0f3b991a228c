"""The text a `slack`-format webhook posts for an event: a Slack incoming-webhook message built from
the event's identifiers and ages only (event payloads never hold memory content)."""

from __future__ import annotations

from typing import Any

from app.core.durations import format_duration, human_age


def slack_text(event_type: str, data: dict[str, Any], public_url: str | None) -> str:
    """One line for the event; with `public_url`, links to the change and the review queue."""
    base = public_url.rstrip("/") if public_url else None
    if event_type == "review.sla_breached":
        change = str(data.get("changeId", "?"))
        shown = f"<{base}/review/{change}|{change}>" if base else change
        text = (f":hourglass: Review SLA breached: change {shown} ({data.get('operation')}, agent "
                f"`{data.get('agentId')}`, risk {data.get('riskLevel')}) has waited "
                f"{human_age(data.get('waitedSeconds') or 0)}, over the "
                f"{format_duration(int(data.get('slaSeconds') or 0))} SLA.")
        return text + (f" Queue: {base}/review" if base else "")
    ids = ", ".join(f"{k}={v}" for k, v in sorted(data.items()) if k.endswith("Id") and isinstance(v, str))
    return f"Memwarden event {event_type}" + (f" ({ids})" if ids else "")
