"""`memwarden audit …`: export a chain, verify an export offline or the database chain (contract §6).

Exit codes: 0 intact, 1 tampered or truncated (prints the first bad sequence number and a
reason code), 2 unusable input. `verify --witness FILE` also holds the chain to the last
checkpoint in the audit witness file; `export` of a chain that does not verify exits 1.
`verify --tenant` of a chain that does not verify also opens its alarm (writes refused);
`clear-alarm` closes it once the repaired chain verifies. `verify --tenant T --state` also holds
every stored memory to its last audited state (exit 1 on a mismatch); `baseline-state` records the
state of memories written before state digests existed, once. `export --receipts FILE` and
`verify --receipts FILE` carry the tenant's erasure receipts beside the chain (`app.cli.receipts`).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from app.cli import reads as cli_reads, receipts as cli_receipts
from app.cli.common import open_context
from app.config import Settings

EXIT = {"intact": 0, "tampered": 1, "unusable": 2}


def _read_key(value: str) -> str:
    path = Path(value)
    if path.exists():
        return path.read_text(encoding="utf-8").strip()
    return value.strip()


def _report(report, as_json: bool, extra: dict | None = None) -> int:
    payload = {**report.to_json(), **(extra or {})}
    if as_json:
        print(json.dumps(payload, sort_keys=True))
    elif report.ok:
        print(f"intact: {report.entries} entries, {report.checkpoints_verified} signed checkpoint(s) verified")
    else:
        seq = report.first_bad_seq if report.first_bad_seq is not None else "-"
        print(f"{report.status}: first bad seq {seq}: {report.reason}: {report.detail}")
    return EXIT[report.status]


def cmd_export(args: argparse.Namespace, settings: Settings) -> int:
    from app.errors import AuditChainBroken
    from app.services.audit.audit import SYSTEM_CHAIN, chain_for
    from app.services.tenancy.tenants import resolve_tenant

    ctx = open_context(settings)
    chain_id = SYSTEM_CHAIN if args.tenant == SYSTEM_CHAIN else chain_for(resolve_tenant(ctx, args.tenant).id)
    out = Path(args.out)
    tmp = out.with_name(out.name + ".part")
    count = 0
    if args.receipts:  # first: the chain exported next covers every seq they cite
        if chain_id == SYSTEM_CHAIN:
            print("error: --receipts needs a tenant's chain (the system chain has none)", file=sys.stderr)
            return 2
        written = cli_receipts.write_receipts(ctx, chain_id.removeprefix("tenant:"), args.receipts, args.from_seq,
                                              args.to_seq)
        print(f"exported {written} erasure receipt(s) to {args.receipts}")
    try:
        lines = ctx.audit.export(ctx.db.sessions, chain_id, from_seq=args.from_seq, to_seq=args.to_seq)
    except AuditChainBroken as exc:  # verified before the first line: nothing was written
        d = exc.details
        print(f"tampered: first bad seq {d['first_bad_seq']}: {d['reason']}: {d['detail']}; "
              f"nothing exported ({exc.code})", file=sys.stderr)
        return 1
    with tmp.open("w", encoding="utf-8") as fh:
        for line in lines:
            fh.write(line + "\n")
            count += 1
    tmp.replace(out)
    print(f"exported {chain_id} to {out} ({count} lines); verifier key: {ctx.audit.vkey}")
    return 0


def cmd_verify(args: argparse.Namespace, settings: Settings) -> int:
    if args.tenant and args.receipts:
        print("error: --receipts checks receipts against an export FILE, not the database chain", file=sys.stderr)
        return 2
    if args.tenant:
        return _verify_database(args, settings)
    if args.state:
        print("error: --state needs --tenant T (it checks the database's memories)", file=sys.stderr)
        return 2
    if not args.file:
        print("error: give an export FILE or --tenant T", file=sys.stderr)
        return 2
    from app.core.auditchain import AuditChainError, read_export, verify_export_file

    try:
        vkeys = [_read_key(k) for k in args.public_key] or None
        trusted = [Path(p).read_text(encoding="utf-8") for p in args.checkpoint]
        if args.witness:
            with open(args.file, encoding="utf-8") as fh:
                try:
                    origin = next(read_export(fh)).origin
                except (AuditChainError, StopIteration):
                    origin = None  # the verifier below reports the file as unusable
            if origin is not None:
                witnessed = _witnessed(args, origin, vkeys)
                if isinstance(witnessed, int):
                    return witnessed
                trusted.append(witnessed)
        report = verify_export_file(args.file, vkeys=vkeys, trusted_checkpoints=trusted)
    except (OSError, UnicodeDecodeError) as exc:
        print(f"unusable: cannot read input: {exc}", file=sys.stderr)
        return 2
    if not vkeys and not args.json:
        print("warning: no --public-key given; checkpoints were checked against the key inside the file, "
              "which proves integrity only if you trust that file's origin", file=sys.stderr)
    if not args.receipts:
        return _report(report, args.json, {"key_pinned": bool(vkeys)})
    if not report.ok:  # receipts cite a chain that must verify first
        return _report(report, args.json, {"key_pinned": bool(vkeys), "receipts": None})
    code, receipts = cli_receipts.verify_receipts(args.file, args.receipts, vkeys, args.json)
    if code == 2:
        return 2
    return max(_report(report, args.json, {"key_pinned": bool(vkeys), "receipts": receipts}), code)


def _verify_database(args: argparse.Namespace, settings: Settings) -> int:
    from app.core.auditchain import CheckpointError, parse_checkpoint
    from app.services.audit.audit import SYSTEM_CHAIN, chain_for
    from app.services.tenancy.tenants import resolve_tenant

    try:
        held = [Path(p).read_text(encoding="utf-8") for p in args.checkpoint]
        for note in held:
            parse_checkpoint(note)
    except (OSError, UnicodeDecodeError, CheckpointError) as exc:
        print(f"unusable: --checkpoint: {exc}", file=sys.stderr)
        return 2
    ctx = open_context(settings)
    chain_id = SYSTEM_CHAIN if args.tenant == SYSTEM_CHAIN else chain_for(resolve_tenant(ctx, args.tenant).id)
    if args.witness:
        witnessed = _witnessed(args, ctx.audit.checkpoint_origin(chain_id), [ctx.audit.vkey])
        if isinstance(witnessed, int):
            return witnessed
        held.append(witnessed)
    report = ctx.audit.verify_and_alarm(ctx.db.sessions, chain_id, "verification", held)
    if not args.state:
        return _report(report, args.json, {"chain_id": chain_id})
    if chain_id == SYSTEM_CHAIN:
        print("unusable: --state checks a tenant's memories; the system chain has none", file=sys.stderr)
        return 2
    return _state_report(ctx, report, chain_id, args.json)


def _state_report(ctx, chain_report, chain_id: str, as_json: bool) -> int:
    """`verify --tenant T --state`: the chain verified, then every memory held to its last audited
    state. Exit 1 when either fails (a state check over a tampered chain proves nothing)."""
    from app.services.audit import state_check
    from app.services.audit.audit import tenant_of

    state = state_check.run_check(ctx, tenant_of(chain_id), {"kind": "cli", "id": "audit-verify-state"}, "cli")
    code = max(EXIT[chain_report.status], 0 if state.ok else 1)
    if as_json:
        print(json.dumps({**chain_report.to_json(), "chain_id": chain_id, "state": state.to_json()}, sort_keys=True))
        return code
    _report(chain_report, False)
    if state.ok:
        print(f"state intact: {state.checked} memories match their last audited state "
              f"({state.to_json()['rows_per_second']} rows/s)")
    else:
        print(f"state mismatch: {state.mismatch_count} of {state.checked} memories differ from their last audited state")
        for m in state.mismatches:
            print(f"  {m.memory_id}: expected seq {m.expected_seq if m.expected_seq is not None else '-'}: {m.reason} "
                  f"(audited {m.audited_status or '-'}, row {m.status or 'missing'})")
    return code


def cmd_baseline_state(args: argparse.Namespace, settings: Settings) -> int:
    """Vouch once for memories written before state digests existed (`state_check.baseline`)."""
    from app.services.audit import state_check
    from app.services.tenancy.tenants import resolve_tenant

    ctx = open_context(settings)
    tenant = resolve_tenant(ctx, args.tenant)
    done = state_check.baseline(ctx, tenant.id, actor={"kind": "cli", "id": "audit-baseline-state"})
    print(f"baselined {done} memories of {args.tenant}: their current state is now their audited state")
    return 0


def _witnessed(args: argparse.Namespace, origin: str, vkeys: list[str] | None) -> str | int:
    """The note of the last checkpoint of `origin` in the --witness file (its records checked
    against each other and, given keys, their signatures), or the exit code when there is none."""
    from app.core.auditchain import (
        ChainError,
        CheckpointError,
        ExportFormatError,
        KeyFormatError,
        read_witness,
    )

    try:
        with open(args.witness, encoding="utf-8") as fh:
            record = read_witness(fh, origin, vkeys)
    except ChainError as exc:
        print(json.dumps({"ok": False, "status": "tampered", "reason": exc.reason, "first_bad_seq": exc.seq,
                          "detail": f"witness file: {exc.detail}"}) if args.json
              else f"tampered: first bad seq {exc.seq}: {exc.reason}: witness file: {exc.detail}")
        return 1
    except (OSError, UnicodeDecodeError, ExportFormatError, CheckpointError, KeyFormatError) as exc:
        print(f"unusable: --witness {args.witness}: {exc}", file=sys.stderr)
        return 2
    if record is None:
        print(f"unusable: --witness {args.witness} holds no checkpoint of {origin}", file=sys.stderr)
        return 2
    return record.note


def cmd_clear_alarm(args: argparse.Namespace, settings: Settings) -> int:
    """Clear a chain's alarm once the repaired chain verifies in full: exit 0 cleared, 1 still
    broken (the alarm stays, writes stay refused), 2 no open alarm."""
    from app.services.audit import audit_alarms
    from app.services.tenancy.tenants import resolve_tenant

    ctx = open_context(settings)
    tenant_id = None if args.tenant == "system" else resolve_tenant(ctx, args.tenant).id
    cleared, report = audit_alarms.clear(ctx, tenant_id, actor={"kind": "cli", "id": "audit-clear-alarm"})
    if report is None:
        print(f"no open alarm on the chain of {args.tenant}", file=sys.stderr)
        return 2
    if not cleared:
        print(f"alarm kept: the chain still does not verify: first bad seq {report.first_bad_seq}: "
              f"{report.reason}: {report.detail}", file=sys.stderr)
        return 1
    print(f"alarm cleared: the chain verifies ({report.entries} entries); writes are accepted again")
    return 0


def cmd_public_key(args: argparse.Namespace, settings: Settings) -> int:
    from app.services.audit.audit import AuditLog

    print(AuditLog.from_settings(settings).vkey)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    audit = sub.add_parser("audit", help="export and verify the audit log").add_subparsers(
        dest="audit_command", required=True)
    export = audit.add_parser("export", help="write a tenant's chain (or `system`) as one JSONL file")
    export.add_argument("--tenant", required=True, help="tenant name or id, or `system`")
    export.add_argument("--out", required=True)
    export.add_argument("--from-seq", type=int, default=1)
    export.add_argument("--to-seq", type=int)
    export.add_argument("--receipts", metavar="FILE", help="also write the tenant's signed erasure receipts (JSONL)")
    export.set_defaults(func=cmd_export)

    verify = audit.add_parser("verify", help="verify an export offline, or the database chain with --tenant")
    verify.add_argument("file", nargs="?")
    verify.add_argument("--public-key", action="append", default=[], help="verifier key (vkey text or a file)")
    verify.add_argument("--checkpoint", action="append", default=[],
                        help="a signed checkpoint you hold (file); the export or database chain must cover it")
    verify.add_argument("--witness", metavar="WITNESSFILE",
                        help="the audit witness file (MEMWARDEN_AUDIT_WITNESS_FILE): the chain must extend the "
                             "last checkpoint witnessed there (catches rewrites and truncation below it)")
    verify.add_argument("--tenant", help="verify this tenant's chain in the database instead")
    verify.add_argument("--state", action="store_true",
                        help="with --tenant: also hold every stored memory to its last audited state "
                             "(exit 1 on any edited, flipped, inserted or deleted row)")
    verify.add_argument("--receipts", metavar="FILE",
                        help="with an export FILE: also check these erasure receipts (signature, and that each "
                             "cites an event of the export that ended its memory)")
    verify.add_argument("--json", action="store_true", help="machine-readable report")
    verify.set_defaults(func=cmd_verify)

    clear = audit.add_parser("clear-alarm", help="after a repair: re-verify a chain in full and, if it verifies, "
                                                  "clear its alarm so its tenant accepts writes again")
    clear.add_argument("--tenant", required=True, help="tenant name or id, or `system`")
    clear.set_defaults(func=cmd_clear_alarm)

    baseline = audit.add_parser("baseline-state", help="once, after upgrading: record the current state of "
                                                        "memories written before state digests existed")
    baseline.add_argument("--tenant", required=True, help="tenant name or id")
    baseline.set_defaults(func=cmd_baseline_state)

    audit.add_parser("public-key", help="print the checkpoint verifier key").set_defaults(func=cmd_public_key)
    cli_reads.register(audit)
    cli_receipts.register(audit)
