"""`memwarden import` and `memwarden export`: move memories in and out of a tenant (app/services/transfer/importer.py,
app/services/transfer/exporter.py). Exit codes: 0 done; 1 records refused (listed by line, nothing written
from the refused batch on); 2 unusable input (file, format, tenant)."""

from __future__ import annotations

import argparse
import sys
from contextlib import ExitStack
from typing import Callable

from app.cli import common as cli_common
from app.config import Settings

MAX_PROBLEMS_SHOWN = 50


def _progress_bars(stack: ExitStack, enabled: bool | None) -> Callable[[str, int], Callable[[int], None]]:
    """tqdm bars with rate and ETA on standard error; `enabled=None` shows them only on a terminal."""
    from tqdm import tqdm

    def bar(phase: str, total: int) -> Callable[[int], None]:
        progress = stack.enter_context(tqdm(total=total, desc=phase, unit=" mem", file=sys.stderr,
                                            disable=None if enabled is None else not enabled,
                                            dynamic_ncols=True, smoothing=0.1))
        return progress.update

    return bar


def cmd_import(args: argparse.Namespace, settings: Settings) -> int:
    from app.core.importformats import FileError
    from app.services.transfer.importer import import_file
    from app.services.tenancy.tenants import resolve_tenant

    if args.batch_size < 1:
        print("error: --batch-size must be at least 1", file=sys.stderr)
        return 2
    ctx, actor = cli_common.open_context(settings), cli_common.cli_actor()
    tenant = resolve_tenant(ctx, args.tenant)
    with ExitStack() as stack:
        try:
            report = import_file(ctx, tenant_id=tenant.id, path=args.file, fmt=args.format,
                                 default_agent=args.agent_id, actor=actor, batch_size=args.batch_size,
                                 remap_ids=args.remap_ids, progress=_progress_bars(stack, True if args.progress else None))
        except (FileError, OSError) as exc:
            print(f"error: {args.file}: {exc}", file=sys.stderr)
            return 2
        except KeyboardInterrupt:
            print("\ninterrupted: the batches already written stay; run the same command again to resume",
                  file=sys.stderr)
            return 130
    for problem in report.problems[:MAX_PROBLEMS_SHOWN]:
        print(f"{args.file}: {problem}", file=sys.stderr)
    if len(report.problems) > MAX_PROBLEMS_SHOWN:
        print(f"… and {len(report.problems) - MAX_PROBLEMS_SHOWN} more", file=sys.stderr)
    if report.problems and report.stopped_at_line is None:
        print(f"error: {len(report.problems)} bad record(s) in {report.records}; nothing was imported",
              file=sys.stderr)
        return 1
    summary = (f"{report.format}: {report.records} record(s): {report.imported} imported live, {report.staged} "
               f"staged for review, {report.restored} restored as history, {report.skipped_existing} already present")
    if report.stopped_at_line is not None:
        print(f"error: stopped at the batch starting on line {report.stopped_at_line}; {summary}. "
              "Fix the record and run the same command again to resume.", file=sys.stderr)
        return 1
    print(summary)
    return 0


def cmd_export(args: argparse.Namespace, settings: Settings) -> int:
    from app.services.transfer.exporter import export_tenant
    from app.services.tenancy.tenants import resolve_tenant

    ctx, actor = cli_common.open_context(settings), cli_common.cli_actor()
    tenant = resolve_tenant(ctx, args.tenant)
    if args.out in (None, "-"):
        count = export_tenant(ctx, tenant_id=tenant.id, out=sys.stdout, actor=actor, agent_id=args.agent_id)
    else:
        with open(args.out, "w", encoding="utf-8", newline="\n") as out:
            count = export_tenant(ctx, tenant_id=tenant.id, out=out, actor=actor, agent_id=args.agent_id)
    print(f"exported {count} memories of {tenant.name}" + (f" to {args.out}" if args.out not in (None, "-") else ""),
          file=sys.stderr)
    return 0


def register(sub) -> None:
    """Add `import` and `export` to the `memwarden` parser."""
    imp = sub.add_parser("import", help="import memories (memorywire JSON, mem0 export, Memwarden JSONL)")
    imp.add_argument("file")
    imp.add_argument("--tenant", required=True)
    imp.add_argument("--format", default="auto", choices=["auto", "memorywire", "mem0", "jsonl"])
    imp.add_argument("--agent-id", help="agent for records that name none (mem0 user memories)")
    imp.add_argument("--batch-size", type=int, default=256, help="memories embedded and committed together")
    imp.add_argument("--progress", action="store_true", help="show the progress bar even when not on a terminal")
    imp.add_argument("--remap-ids", action="store_true",
                     help="give mem_ ids (and merged_into/superseded_by links) ids derived for this tenant, "
                          "to import another tenant's export on the same server")
    imp.set_defaults(func=cmd_import)

    exp = sub.add_parser("export", help="write a tenant's memories as JSONL that `memwarden import` restores")
    exp.add_argument("--tenant", required=True)
    exp.add_argument("--out", help="file to write (default: standard output)")
    exp.add_argument("--agent-id", help="only this agent's memories")
    exp.set_defaults(func=cmd_export)
