"""Workspace files (OpenWOP RFC 0059; contract §7): a tenant's versioned, path-addressed text files.

* Paths are one flat namespace: `^[A-Za-z0-9][A-Za-z0-9._/-]{0,255}$` (RFC 0059's pattern; `/` is an
  ordinary character), never containing `..` or `//`, never ending in `/`.
* Every write makes version N+1 of its path (a delete makes a tombstone version), so versions are
  monotonic and never reused; the ETag is `"v<version>"`. At most `workspace_max_versions` versions
  are kept per path, older ones are pruned; `?version=N` reads one that is kept.
* A write is one transaction under the tenant's lock (the audit chain's, which every audited write
  takes anyway) plus a row lock on the file: concurrent readers see the old or the new version.
* Content is redacted (SR-1/WSR-1) before anything is stored or staged; the audit log gets an HMAC
  of it under a per-file key, as for memories — never the text.
* A tenant policy rule on `workspace_write` / `workspace_delete` (matched by `paths` globs) stages
  the write as a change; the proposed content lives in the change's request (never public) and is
  applied on approval only if the file is still at the version it was proposed against.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from app.core import diff as textdiff
from app.core.access import Principal
from app.core.policy import Policy, WriteRequest
from app.core.screening import Screening, screen
from app.core.timefmt import format_ts, parse_ts, utcnow
from app.db.models import Change, WorkspaceFile, WorkspaceVersion
from app.errors import Conflict, NotFound, SecretLeakage, ValidationFailed, WorkspaceConflict, WorkspaceTooLarge
from app.repos.memory import workspace as repo
from app.services.review import change_reads
from app.services.events import events
from app.services.audit import read_budgets
from app.services.memory import staging
from app.services.runtime.context import AppContext
from app.services.memory.memories import Outcome
from app.services.tenancy.tenant_config import TenantRules, rules_for

PATH_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/-]{0,255}$")
DEFAULT_CONTENT_TYPE = "text/markdown"


def check_path(path: str) -> str:
    """`path` when it is a valid workspace path, else 422."""
    if not PATH_PATTERN.match(path) or ".." in path or "//" in path or path.endswith("/"):
        raise ValidationFailed.at("/path", "a workspace path matches ^[A-Za-z0-9][A-Za-z0-9._/-]{0,255}$ "
                                           "without '..', '//' or a trailing '/'")
    return path


def etag_of(version: int) -> str:
    return f'"v{version}"'


def if_match_holds(header: str, current: int | None) -> bool:
    """RFC 9110 If-Match against the live version (None: no live file). `*` needs a live file;
    `"v3"`, `v3`, `"3"` and `W/"v3"` all name version 3."""
    if current is None:
        return False
    for tag in header.split(","):
        tag = tag.strip().removeprefix("W/").strip('"').removeprefix("v")
        if tag == "*" or tag == str(current):
            return True
    return False


def file_json(version: WorkspaceVersion) -> dict[str, Any]:
    """The RFC 0059 WorkspaceFile shape."""
    return {"path": version.path, "content": version.content, "contentType": version.content_type,
            "version": version.version, "etag": version.etag, "updatedAt": format_ts(version.created_at)}


def _meta_json(version: WorkspaceVersion) -> dict[str, Any]:
    return {"path": version.path, "contentType": version.content_type, "version": version.version,
            "etag": version.etag, "updatedAt": format_ts(version.created_at), "byteSize": version.byte_size}


# --- reads ---------------------------------------------------------------------------------------

def snapshot_instant(ctx: AppContext, principal: Principal, query: dict[str, Any]) -> datetime | None:
    """The instant a read answers as of: `snapshot=` (RFC 3339 / epoch ms) or a run's start (`run_id=`)."""
    if query.get("snapshot") is not None and query.get("run_id") is not None:
        raise ValidationFailed.at("/snapshot", "give snapshot or run_id, not both")
    if query.get("run_id") is not None:
        from app.services.memory import refs

        return refs.run_snapshot(ctx, principal, query["run_id"])
    if query.get("snapshot") is not None:
        try:
            return parse_ts(query["snapshot"])
        except (ValueError, TypeError) as exc:
            raise ValidationFailed.at("/snapshot", f"not an RFC 3339 timestamp or epoch milliseconds: {exc}") from None
    return None


def list_files(ctx: AppContext, principal: Principal, query: dict[str, Any]) -> dict[str, Any]:
    """File metadata (no bodies), by path; `prefix` filters, `snapshot`/`run_id` read the past."""
    instant = snapshot_instant(ctx, principal, query)
    with ctx.db.sessions() as session:
        rows = repo.list_versions(session, tenant_id=principal.tenant_id, instant=instant, prefix=query.get("prefix"))
    return {"files": [_meta_json(v) for v in rows if not v.deleted], "snapshot": format_ts(instant)}


def get_file(ctx: AppContext, principal: Principal, path: str, query: dict[str, Any]) -> dict[str, Any]:
    """One file: current, `version=N` (if kept), or as of `snapshot`/`run_id`; 404 when absent or deleted."""
    check_path(path)
    instant = snapshot_instant(ctx, principal, query)
    if query.get("version") is not None and instant is not None:
        raise ValidationFailed.at("/version", "give version or a snapshot, not both")
    with ctx.db.sessions() as session:
        found = repo.find_version(session, tenant_id=principal.tenant_id, path=path, version=query.get("version"),
                                  instant=instant)
    if found is None or found.deleted:
        raise NotFound("workspace file not found")
    # A file body is read like a memory: taken from the key's read budget (a file belongs to no
    # agent, so the agent budget does not count it) and recorded, named `workspace:<path>`. Files
    # are few per tenant, but a budget of N must mean N whatever a key reads.
    read_budgets.account(ctx, principal, operation="workspace.get", agent_id=None,
                         memory_ids=[change_reads.workspace_read_id(path)], query={"path": path, **query})
    return file_json(found)


# --- writes --------------------------------------------------------------------------------------

@dataclass(frozen=True)
class _Write:
    """A version to commit: `content` None is a delete (tombstone)."""

    path: str
    content: str | None
    content_type: str | None
    created_by: str
    agent_id: str
    run_id: str | None = None
    change_id: str | None = None
    risk_flags: tuple[str, ...] = ()
    """Names of the screening flags the content raised (recorded in the write's audit entry)."""
    risk_level: str = "none"


def _clean(ctx: AppContext, rules: TenantRules, content: str) -> tuple[str, list[dict[str, str]]]:
    """Text checks, size limit and redaction per the tenant's mode."""
    if "\x00" in content:
        raise ValidationFailed.at("/content", "content must be text without NUL characters")
    try:
        size = len(content.encode("utf-8"))
    except UnicodeEncodeError:
        raise ValidationFailed.at("/content", "content is not valid Unicode (lone surrogate)") from None
    _check_size(ctx, size)
    redacted, labels = rules.redactor.redact_text(content)
    findings = [{"field": "content", "label": label} for label in labels]
    if findings and rules.mode == "reject":
        raise SecretLeakage("the file contains secret-shaped values; this tenant rejects them", details=findings)
    _check_size(ctx, len(redacted.encode("utf-8")))  # markers can be longer than what they replace
    return redacted, findings


def _check_size(ctx: AppContext, size: int) -> None:
    limit = ctx.settings.workspace_max_file_bytes
    if size > limit:
        raise WorkspaceTooLarge(f"the file is {size} bytes; the limit is {limit}",
                                details={"byteSize": size, "maxFileBytes": limit})


def _live_version(session: Session, tenant_id: str, path: str) -> tuple[int, int | None]:
    """(head version including tombstones, 0 if never written; live version or None)."""
    head = repo.get_head(session, tenant_id=tenant_id, path=path)
    if head is None:
        return 0, None
    return head.version, None if head.deleted else head.version


def _conflict(current: int | None) -> WorkspaceConflict:
    return WorkspaceConflict("If-Match names a version that is not the current one",
                             details={"currentVersion": current})


def put_file(ctx: AppContext, principal: Principal, path: str, body: dict[str, Any], *,
             if_match: str | None, agent_id: str) -> Outcome:
    """Create or replace (201 / 200 with the new version), or stage the write for review (202)."""
    check_path(path)
    content_type = body.get("contentType") or DEFAULT_CONTENT_TYPE
    rules = rules_for(ctx, principal)  # cached per config version: no settings rows read per write
    content, findings = _clean(ctx, rules, body["content"])
    # Files an agent writes here are read back into prompts, so they are screened like memories
    # (injection, exfiltration, hidden text, secrets, PII); the same policy rules stage them.
    risk = screen(content, memory_type="workspace", allowed_sources=principal.sources, path=path,
                  protection=rules.protection)
    write = _Write(path, content, content_type, principal.key_id, agent_id, body.get("runId"),
                   risk_flags=tuple(risk.names), risk_level=risk.risk)
    request = WriteRequest(operation="workspace_write", agent_id=agent_id, path=path, content=content,
                           risk_flags=risk.names, risk_level=risk.risk)
    return _write(ctx, principal, write, request, if_match, findings, risk, policy=rules.policy)


def delete_file(ctx: AppContext, principal: Principal, path: str, *, if_match: str | None, agent_id: str) -> Outcome:
    """Delete (200, a tombstone version), or stage the delete for review (202); 404 when absent."""
    check_path(path)
    write = _Write(path, None, None, principal.key_id, agent_id)
    return _write(ctx, principal, write, WriteRequest(operation="workspace_delete", agent_id=agent_id, path=path),
                  if_match, [])


def _write(ctx: AppContext, principal: Principal, write: _Write, request: WriteRequest, if_match: str | None,
           findings: list[dict[str, str]], risk: Screening | None = None, policy: Policy | None = None) -> Outcome:
    with ctx.db.sessions.begin() as session:
        decision = staging.review_requirement(session, principal.tenant_id, request, policy)
        if decision.action == "require_approval":
            head, live = _live_version(session, principal.tenant_id, write.path)
            if if_match is not None and not if_match_holds(if_match, live):
                raise _conflict(live)
            if write.content is None and live is None:
                raise NotFound("workspace file not found")
            change = staging.stage_change(
                ctx, session, principal=principal, operation=request.operation, agent_id=write.agent_id,
                user_id=None, request={"path": write.path, "base_version": head, "content": write.content,
                                       "content_type": write.content_type, "run_id": write.run_id},
                memory_ids=[], decision=decision, redactions=findings, screening=risk)
            return Outcome(202, {"status": "pending", "changeId": change.id, "path": write.path,
                                 "reviewUrl": staging.review_url(ctx.settings, change.id)})
        version, created = _commit(ctx, session, principal.tenant_id, principal.actor, write, if_match=if_match)
        if write.content is None:
            return Outcome(200, {"deleted": True, "path": write.path, "version": version.version})
        return Outcome(201 if created else 200, file_json(version))


def _commit(ctx: AppContext, session: Session, tenant_id: str, actor: dict[str, Any], write: _Write, *,
            if_match: str | None = None, base_version: int | None = None) -> tuple[WorkspaceVersion, bool]:
    """Write the next version of a file in `session`'s transaction: lock, check, insert, prune, audit,
    emit `workspace.updated`. Returns the version and whether the file came into existence."""
    events.lock_tenant(session, tenant_id)  # first, like every audited write: one lock order
    head = repo.get_head(session, tenant_id=tenant_id, path=write.path, lock=True)
    live = head.version if head is not None and not head.deleted else None
    if if_match is not None and not if_match_holds(if_match, live):
        raise _conflict(live)
    if base_version is not None and (head.version if head else 0) != base_version:
        raise Conflict("the file changed since this write was proposed; reject it and propose again",
                       details={"reason": "stale_review", "currentVersion": live})
    if write.content is None and live is None:
        raise NotFound("workspace file not found")
    creating = write.content is not None and live is None
    if creating:
        count = repo.count_live(session, tenant_id=tenant_id)
        if count >= ctx.settings.workspace_max_files:
            raise WorkspaceTooLarge(f"the workspace holds {count} files; the limit is "
                                    f"{ctx.settings.workspace_max_files}",
                                    details={"maxFiles": ctx.settings.workspace_max_files})
    now = utcnow()
    if head is None:
        head = WorkspaceFile(tenant_id=tenant_id, path=write.path, version=0, content_type=write.content_type,
                             deleted=False, digest_key=os.urandom(32), created_at=now)
        repo.insert_head(session, head)
    head.version, head.deleted, head.updated_at = head.version + 1, write.content is None, now
    head.content_type = write.content_type or head.content_type
    content_bytes = len(write.content.encode("utf-8")) if write.content is not None else 0
    version = WorkspaceVersion(
        tenant_id=tenant_id, path=write.path, version=head.version, content=write.content,
        content_type=head.content_type, etag=etag_of(head.version), byte_size=content_bytes,
        deleted=write.content is None, created_at=now, created_by=write.created_by, run_id=write.run_id,
        change_id=write.change_id)
    repo.insert_version(session, version, keep=ctx.settings.workspace_max_versions)
    digest = (hmac.new(head.digest_key, write.content.encode(), hashlib.sha256).hexdigest()
              if write.content is not None else None)
    ctx.audit.append(session, tenant_id=tenant_id, actor=actor,
                     event_type="workspace.deleted" if write.content is None else "workspace.written",
                     subject={"type": "workspace_file", "id": write.path},
                     data={"path": write.path, "version": head.version, "content_type": head.content_type,
                           "content_bytes": content_bytes, "content_digest": digest, "agent_id": write.agent_id,
                           "run_id": write.run_id, "change_id": write.change_id,
                           "risk_flags": sorted(write.risk_flags), "risk_level": write.risk_level})
    events.emit(session, tenant_id, "workspace.updated", {"path": write.path, "version": head.version})
    return version, creating


# --- governance (called by app/services/review/diffs.py and approval.py) --------------------------------

def review_diff(session: Session, change: Change) -> dict[str, Any]:
    """A staged workspace write against the file as it is now: a unified line diff; `_state` is
    what the fingerprint covers (the head version, so any write landing meanwhile makes it stale)."""
    request = change.request
    path = request["path"]
    head, live = _live_version(session, change.tenant_id, path)
    current = ""
    if live is not None:
        current = repo.content_of(session, tenant_id=change.tenant_id, path=path, version=live) or ""
    proposed = request.get("content") or ""
    old_label = f"{path} (v{live})" if live is not None else "/dev/null"
    new_label = f"{path} (proposed)" if change.operation == "workspace_write" else "/dev/null"
    lines = textdiff.unified_line_diff(current, proposed, old_label, new_label)
    return {"path": path, "base_version": request["base_version"], "current_version": head,
            "moved": head != request["base_version"], "content_type": request.get("content_type"),
            "lines": [{"kind": line.kind, "text": line.text} for line in lines], "_state": [(path, head)]}


def apply_change(ctx: AppContext, session: Session, change: Change, actor: dict[str, Any]) -> dict[str, Any]:
    """Commit an approved staged write, only if the file is still at the version it was proposed on."""
    request = change.request
    write = _Write(request["path"], request.get("content") if change.operation == "workspace_write" else None,
                   request.get("content_type"), change.submitted_by, change.agent_id, request.get("run_id"), change.id,
                   risk_flags=tuple(flag["name"] for flag in change.risk_flags or []), risk_level=change.risk_level)
    version, _ = _commit(ctx, session, change.tenant_id, actor, write, base_version=request["base_version"])
    return {"path": write.path, "version": version.version}
