"""`memwarden import`: memories from memorywire JSON, mem0 exports or Memwarden JSONL into a tenant.

Every record goes through the rules of `remember` (app.services.memory.remembering): agent id checks,
size and FSM limits, redaction (SR-1) and the tenant's review policy, so a policy can stage
imported memories as pending changes. The import runs in two phases:

1. **Check the whole file** before writing anything: parse, validate each record against
   `remember.request`, normalise ids and timestamps, reject duplicate ids, redact (a secret in
   a `reject`-mode tenant is a bad record) and evaluate the policy (a deny is a bad record). Any
   bad record → the report lists each by line with its reason and nothing is written.
2. **Write in batches**, each in its own transaction: embed the batch's texts in one call (the
   next batch is embedded in a worker thread while this one is written), screen
   each row against live memory and decide it (screening flags can route a row to review), insert
   the rows with their per-memory audit events (`memory.remembered` / `memory.staged` +
   `change.proposed` / `memory.restored`). The transaction of the last batch also appends the one
   `memory.imported` event: counts, format and the file's SHA-256 — never content.

Resume: ids are kept or derived deterministically (app.core.importformats), and ids already in the
tenant are skipped, so re-running an interrupted import writes only the batches that did not
commit. A policy deny that only screening reveals (it needs the embedding) stops the import at that
batch, which rolls back whole; earlier batches stay, and a re-run after fixing the record resumes.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable


from app.contracts import default_contracts, unstorable_problems
from app.core import importformats as formats
from app.core.access import Principal
from app.core.importformats import FileError, ImportRecord, Problem
from app.errors import AppError, Forbidden
from app.repos.memory import memories as memories_repo
from app.services.memory import derivations, remembering
from app.services.tenancy import tenant_config
from app.services.runtime.context import AppContext

DEFAULT_BATCH = 256
Progress = Callable[[str, int], Callable[[int], None]]
"""`progress(phase, total)` returns `advance(n)`; the CLI backs it with a tqdm bar."""


@dataclass(frozen=True)
class OperatorPrincipal(Principal):
    """An operator at the CLI acting for every agent of one tenant (audited as `cli`, not a key)."""

    operator: str = "cli"

    @property
    def actor(self) -> dict[str, str]:
        return {"kind": "cli", "id": self.operator}


def operator_principal(tenant_id: str, actor: dict[str, str]) -> OperatorPrincipal:
    return OperatorPrincipal(tenant_id=tenant_id, key_id=f"cli:{actor['id']}", scopes=frozenset({"memory:write"}),
                             agents=("*",), operator=actor["id"])


@dataclass
class ImportReport:
    """What an import did, or why it did nothing (`problems`)."""

    format: str
    file_sha256: str
    records: int = 0
    imported: int = 0
    staged: int = 0
    restored: int = 0
    skipped_existing: int = 0
    batches: int = 0
    problems: list[Problem] = field(default_factory=list)
    stopped_at_line: int | None = None
    """Set when a batch was refused while writing (earlier batches are committed; re-run resumes)."""

    @property
    def ok(self) -> bool:
        return not self.problems

    def audit_data(self) -> dict[str, Any]:
        return {"format": self.format, "file_sha256": self.file_sha256, "records": self.records,
                "imported": self.imported, "staged": self.staged, "restored": self.restored,
                "skipped_existing": self.skipped_existing, "batches": self.batches}


def import_file(ctx: AppContext, *, tenant_id: str, path: str | Path, fmt: str = "auto",
                default_agent: str | None = None, actor: dict[str, str], batch_size: int = DEFAULT_BATCH,
                progress: Progress | None = None, remap_ids: bool = False) -> ImportReport:
    """Import one file into a tenant (see the module docstring). Raises FileError for an unusable file."""
    data = Path(path).read_bytes()
    return import_bytes(ctx, tenant_id=tenant_id, data=data, fmt=fmt, default_agent=default_agent, actor=actor,
                        batch_size=batch_size, progress=progress, remap_ids=remap_ids)


def import_bytes(ctx: AppContext, *, tenant_id: str, data: bytes, fmt: str = "auto", default_agent: str | None = None,
                 actor: dict[str, str], batch_size: int = DEFAULT_BATCH,
                 progress: Progress | None = None, remap_ids: bool = False) -> ImportReport:
    """Import a file's bytes; `remap_ids` gives `mem_…` ids (and links to them) ids derived for this
    tenant, so another tenant's export imports on the same server (app.core.importformats)."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise FileError(f"not UTF-8: invalid byte at offset {exc.start}") from None
    fmt = formats.detect_format(text) if fmt == "auto" else fmt
    if fmt not in formats.FORMATS:
        raise FileError(f"unknown format {fmt!r}; one of auto, {', '.join(formats.FORMATS)}")
    report = ImportReport(format=fmt, file_sha256=formats.file_digest(data))
    principal = operator_principal(tenant_id, actor)
    source = formats.Source(tenant_id=tenant_id, fmt=fmt, digest=report.file_sha256, default_agent=default_agent,
                            remap_ids=remap_ids)
    records = _parse(source, text, report, progress)
    prepared = _check(ctx, principal, records, report, progress)
    if report.problems:
        return report
    _write(ctx, principal, prepared, report, batch_size, progress)
    return report


# --- phase 1: check everything -------------------------------------------------------------------

def _parse(source: formats.Source, text: str, report: ImportReport, progress: Progress | None) -> list[ImportRecord]:
    contracts = default_contracts()
    records: list[ImportRecord] = []
    first_line: dict[str, int] = {}
    multi = source.fmt != "jsonl"  # JSON documents may hold many records per line: name them by position too
    for line, raw in formats.raw_records(text, source.fmt):
        report.records += 1
        ordinal = report.records
        at = ordinal if multi else None
        unstorable = unstorable_problems(raw)  # before anything encodes the text (ids, digests)
        if unstorable:
            report.problems.extend(Problem(line, p["message"], p["path"], at) for p in unstorable)
            continue
        try:
            record = formats.to_record(source, line, raw, ordinal)
        except ValueError as exc:
            report.problems.append(Problem(line, str(exc), record=at))
            continue
        try:
            contracts.validate("remember.request", record.body)
        except AppError as exc:
            for detail in exc.details or [{"path": "/", "message": exc.message}]:
                reason = detail["message"]
                if detail.get("path") in ("", "/") and "agent_id" in reason:
                    reason += " (pass --agent-id for records without one)"
                report.problems.append(Problem(line, reason, detail.get("path", "/"), at))
            continue
        if record.id in first_line:
            report.problems.append(Problem(line, f"duplicate id {record.id} (first on line {first_line[record.id]})",
                                           record=at))
            continue
        first_line[record.id] = line
        record.extra["ordinal"] = at
        records.append(record)
    return records


def _check(ctx: AppContext, principal: Principal, records: list[ImportRecord], report: ImportReport,
           progress: Progress | None) -> list[tuple[ImportRecord, remembering.PreparedWrite]]:
    """Skip ids already imported; run the rules of `remember` on the rest (nothing is written)."""
    prepared = []
    advance = progress("checking", len(records)) if progress else None
    with ctx.db.sessions() as session:
        owners = _existing(session, [r.id for r in records])
        rules = tenant_config.load_rules(ctx, session, principal.tenant_id)
        for record in records:
            owner = owners.get(record.id)
            if owner == principal.tenant_id:
                report.skipped_existing += 1
            elif owner is not None:
                report.problems.append(Problem(record.line, f"id {record.id} is already used outside this tenant "
                                               "(--remap-ids imports it under an id derived for this tenant)",
                                               record=record.extra.get("ordinal")))
            else:
                try:
                    prepared.append((record, remembering.prepare_remember(
                        ctx, principal, record.body, rules, memory_id=record.id,
                        created_at=record.created_at, updated_at=record.updated_at, status=record.status,
                        ended_at=record.ended_at, merged_into=record.merged_into,
                        superseded_by=record.superseded_by)))
                except AppError as exc:
                    report.problems.append(_problem(record.line, exc, record.extra.get("ordinal")))
            if advance:
                advance(1)
    return prepared


def _problem(line: int, exc: AppError, ordinal: int | None = None) -> Problem:
    details = exc.details if isinstance(exc.details, list) and exc.details else [{}]
    first = details[0] if isinstance(details[0], dict) else {}
    reason = f"{exc.code}: {exc.message}"
    if first.get("message") and first["message"] not in exc.message:
        reason += f" ({first['message']})"
    return Problem(line, reason, first.get("path") or first.get("field") or "/", ordinal)


def _existing(session, ids: list[str]) -> dict[str, str]:
    """id → tenant of every id already stored (any tenant, any status)."""
    found: dict[str, str] = {}
    for start in range(0, len(ids), 10_000):
        found.update(memories_repo.tenants_holding(session, ids=ids[start:start + 10_000]))
    return found


# --- phase 2: write in batches ---------------------------------------------------------------------

def _write(ctx: AppContext, principal: Principal, prepared: list[tuple[ImportRecord, remembering.PreparedWrite]],
           report: ImportReport, batch_size: int, progress: Progress | None) -> None:
    advance = progress("importing", len(prepared)) if progress else None
    batches = [prepared[i:i + batch_size] for i in range(0, len(prepared), batch_size)] or [[]]
    report.batches = len(batches)

    def embed(batch):
        return ctx.embedder.embed([w.memory.content for _, w in batch]) if batch else []

    # The next batch is embedded (CPU, GIL released by the model) while this one is written
    # (mostly waiting on PostgreSQL), so the two phases overlap instead of adding up.
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="import-embed") as embedder:
        upcoming = embedder.submit(embed, batches[0])
        for number, batch in enumerate(batches, start=1):
            vectors = upcoming.result()
            if number < len(batches):
                upcoming = embedder.submit(embed, batches[number])
            if not _write_batch(ctx, principal, batch, vectors, report, last=number == len(batches)):
                return
            if advance:
                advance(len(batch))


def _link(session, tenant_id: str, rows: list) -> None:
    """The file's lineage: a row it says was merged into, or superseded by, another is a source of
    that one (`app.services.memory.derivations`), as the merge or approval that ended it recorded."""
    for memory in rows:
        for target, kind in ((memory.merged_into, "merge"), (memory.superseded_by, "supersede")):
            if target and target != memory.id:
                derivations.record(session, tenant_id=tenant_id, derived_id=target, source_ids=[memory.id],
                                   kind=kind, via="import", at=memory.ended_at or memory.updated_at)


def _write_batch(ctx: AppContext, principal: Principal, batch: list[tuple[ImportRecord, remembering.PreparedWrite]],
                 vectors, report: ImportReport, *, last: bool) -> bool:
    """One batch in one transaction; False (and the problem recorded) when a policy refused it."""
    try:
        with ctx.db.sessions.begin() as session:
            # Another import of the same file may have committed these meanwhile: skip, don't fail.
            taken = _existing(session, [w.memory.id for _, w in batch])
            fresh = [i for i, (_, w) in enumerate(batch) if w.memory.id not in taken]
            outcomes = remembering.write_prepared(
                ctx, session, principal, [batch[i][1] for i in fresh], [vectors[i].tolist() for i in fresh],
                via="import", import_sha256=report.file_sha256)
            report.skipped_existing += len(batch) - len(fresh)
            _link(session, principal.tenant_id, [batch[i][1].memory for i in fresh])
            for outcome in outcomes:
                key = {201: "imported", 202: "staged"}.get(outcome.status, "restored")
                setattr(report, key, getattr(report, key) + 1)
            if last:
                ctx.audit.append(session, tenant_id=principal.tenant_id, event_type="memory.imported",
                                 actor=principal.actor,
                                 subject={"type": "import", "id": report.file_sha256},
                                 data=report.audit_data())
    except Forbidden as exc:
        record = next((r for r, w in batch if w.memory.id == getattr(exc, "memory_id", None)), batch[0][0])
        report.problems.append(_problem(record.line, exc, record.extra.get("ordinal")))
        report.stopped_at_line = batch[0][0].line
        return False
    return True

