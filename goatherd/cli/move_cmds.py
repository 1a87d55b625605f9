"""``goatherd export`` and ``goatherd import``: move a trace as JSON lines."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from goatherd.cli.common import (
    Subparsers,
    add_db_argument,
    open_read_only,
    open_writable,
)
from goatherd.cli.output import ProgressBar
from goatherd.infrastructure.portability import export_trace, import_trace

__all__ = ["register"]


def register(sub: Subparsers[argparse.ArgumentParser]) -> None:
    """Register the export and import subcommands."""
    export = sub.add_parser(
        "export", help="write the trace as JSON lines (stdout by default)"
    )
    add_db_argument(export)
    export.add_argument("-o", "--output", help="write to this file instead of stdout")
    export.set_defaults(func=cmd_export)

    imp = sub.add_parser(
        "import", help="prove a JSON-lines export and load it into a new DB"
    )
    imp.add_argument("source", metavar="FILE", help="an export file ('-' for stdin)")
    imp.add_argument(
        "target", metavar="NEWDB", help="a new database: a path or SQLAlchemy URL"
    )
    imp.set_defaults(func=cmd_import)


def cmd_export(args: argparse.Namespace) -> int:
    """Export the trace."""
    bar = ProgressBar()
    with open_read_only(args.db) as store:
        if args.output:
            with open(args.output, "w", encoding="utf-8", newline="\n") as out:
                lines = export_trace(store, out, progress=bar)
        else:
            lines = export_trace(store, sys.stdout, progress=bar)
    bar.finish()
    if args.output:
        print(f"exported {lines} lines to {args.output}", file=sys.stderr)
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    """Prove every line of the export, then write it in one transaction."""
    bar = ProgressBar()
    target = args.target
    if "://" not in target and Path(target).exists() and Path(target).stat().st_size:
        raise ValueError(f"{target} already exists: import into a new database")
    if args.source == "-":
        lines = sys.stdin.readlines()
    else:
        lines = Path(args.source).read_text(encoding="utf-8").splitlines(keepends=True)
    with open_writable(target) as store:
        summary = import_trace(lines, store, progress=bar)
    bar.finish()
    print(
        f"imported {summary.intents} intents, {summary.records} records, "
        f"{summary.path_entries} path entries into {target}"
    )
    return 0
