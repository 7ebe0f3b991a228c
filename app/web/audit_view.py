"""The auditor's page: chain status, database verification and export, each use itself audited.

The `audit.verified` / `audit.exported` event is appended after the operation, in its own
transaction, so the verification or export describes the chain as it was before that event.
"""

from __future__ import annotations

import json
from typing import Any, Iterator

from app.core.auditchain import VerifyReport
from app.core.timefmt import format_ts
from app.repos.audit import audit_reads
from app.services.audit.audit import chain_for, latest_checkpoint
from app.services.runtime.context import AppContext


def chain_status(ctx: AppContext, tenant_id: str) -> dict[str, Any]:
    """Entries, the latest signed checkpoint and the verifier key of a tenant's chain (no verification)."""
    chain_id = chain_for(tenant_id)
    with ctx.db.sessions() as session:
        entries = audit_reads.length(session, chain_id=chain_id)
        checkpoint = latest_checkpoint(session, chain_id)
        latest = None if checkpoint is None else {
            "size": checkpoint.size, "created_at": format_ts(checkpoint.created_at), "note": checkpoint.note}
    return {"chain_id": chain_id, "entries": int(entries), "checkpoint": latest, "vkey": ctx.audit.vkey,
            "origin": ctx.audit.checkpoint_origin(chain_id)}


def _record(ctx: AppContext, tenant_id: str, event_type: str, actor: dict, data: dict[str, Any]) -> None:
    with ctx.db.sessions.begin() as session:
        ctx.audit.append_access(session, tenant_id=tenant_id, event_type=event_type, actor=actor,
                                subject={"type": "audit_chain", "id": chain_for(tenant_id)}, data=data)


def verify(ctx: AppContext, *, tenant_id: str, actor: dict) -> VerifyReport:
    """Verify the tenant's chain in the database, then record that it was verified and the outcome."""
    report = ctx.audit.verify_and_alarm(ctx.db.sessions, chain_for(tenant_id), "verification")
    _record(ctx, tenant_id, "audit.verified", actor, {
        "status": report.status, "entries": report.entries, "first_bad_seq": report.first_bad_seq,
        "reason": report.reason, "checkpoints_verified": report.checkpoints_verified})
    return report


def export(ctx: AppContext, *, tenant_id: str, actor: dict) -> Iterator[str]:
    """JSONL lines of the tenant's chain (a fresh checkpoint is signed and the chain verified
    first: a broken chain raises `AuditChainBroken` at the first line); once the last line has
    been produced, an `audit.exported` event records the range. An abandoned download is not
    recorded as an export."""
    chain_id = chain_for(tenant_id)
    first = last = None
    lines = 0
    for line in ctx.audit.export(ctx.db.sessions, chain_id):
        if lines == 0:
            manifest = json.loads(line)
            first, last = manifest.get("from_seq"), manifest.get("to_seq")
        lines += 1
        yield line
    _record(ctx, tenant_id, "audit.exported", actor, {"from_seq": first, "to_seq": last, "lines": lines})
