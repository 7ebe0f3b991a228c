"""`memwarden export`: a tenant's memories as JSONL that `memwarden import` restores losslessly.

Line 1 is a header `{"format": "memwarden.export/v1", "tenant", "exported_at"}`; then one memory
per line, oldest first: the contract's Entry (`id`, `agent_id`, `user_id`, `type`, `content`,
`metadata`, `tags`, `confidence`, `source`, `created_at`, `updated_at`, `expires_at`) with its real
`status` (live, pending, forgotten, archived, merged, superseded) and `ended_at`, `merged_into`,
`superseded_by`, `run_id`, `node_id`. Rejected and withdrawn writes (never memories) and hard-deleted
rows (their content is gone) are left out. The export is audited as one `memory.exported` event
(count and SHA-256 of what was written, never content), and in the read audit (operation `export`)
with the ids of every memory it wrote.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, TextIO

from app.core.importformats import EXPORT_FORMAT, IMPORTABLE_STATUSES
from app.core.timefmt import format_ts, utcnow
from app.db.models import Memory
from app.repos.memory import memories as memories_repo
from app.services.audit import read_audit
from app.services.runtime.context import AppContext
from app.services.memory.memories import entry_json


READ_CHUNK = 1000


def export_line(memory: Memory) -> dict[str, Any]:
    """One memory as its export record."""
    record = entry_json(memory)
    record.update(status=memory.status, ended_at=format_ts(memory.ended_at), merged_into=memory.merged_into,
                  superseded_by=memory.superseded_by, run_id=memory.run_id, node_id=memory.node_id)
    return {k: v for k, v in record.items() if v is not None or k in ("user_id", "source", "expires_at")}


def export_tenant(ctx: AppContext, *, tenant_id: str, out: TextIO, actor: dict[str, str],
                  agent_id: str | None = None) -> int:
    """Write the tenant's memories (optionally one agent's) to `out`; returns how many."""
    digest = hashlib.sha256()

    def emit(line: str) -> None:
        digest.update(line.encode())
        out.write(line)

    emit(json.dumps({"format": EXPORT_FORMAT, "tenant": tenant_id, "exported_at": format_ts(utcnow())}) + "\n")
    exported: list[str] = []
    with ctx.db.stale_session(tenant_id, None) as session:  # a replica that has replayed everything
        for memory in memories_repo.stream_for_export(session, tenant_id=tenant_id, statuses=IMPORTABLE_STATUSES,
                                                      agent_id=agent_id):
            emit(json.dumps(export_line(memory), ensure_ascii=False) + "\n")
            exported.append(memory.id)
    with ctx.db.sessions.begin() as session:
        ctx.audit.append(session, tenant_id=tenant_id, event_type="memory.exported", actor=actor,
                         subject={"type": "tenant", "id": tenant_id},
                         data={"count": len(exported), "agent_id": agent_id, "export_sha256": digest.hexdigest()})
    # Who read which memory includes exports: read records of at most READ_CHUNK ids each,
    # written before the command returns.
    records = [read_audit.new_record(ctx, tenant_id=tenant_id, actor=actor, key_id=None, agent_id=agent_id,
                                     operation="export", memory_ids=exported[i:i + READ_CHUNK])
               for i in range(0, len(exported), READ_CHUNK)]
    if records:
        read_audit.write_tenant(ctx, tenant_id, records)
    return len(exported)
