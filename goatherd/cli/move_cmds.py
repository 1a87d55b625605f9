"""``goatherd export`` and ``goatherd import``: move a trace as JSON lines."""

from __future__ import annotations

import argparse
import sys
from typing import IO

from sqlalchemy.engine import make_url

from goatherd.cli.common import (
    Subparsers,
    add_db_argument,
    open_read_only,
)
from goatherd.cli.output import ProgressBar
from goatherd.infrastructure.portability import export_trace
from goatherd.infrastructure.trace_import import (
    DEFAULT_MAX_LINE_BYTES,
    ImportSummary,
    import_trace_to,
    read_export_lines,
)

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
    imp.add_argument(
        "--max-line-bytes",
        type=_positive,
        default=DEFAULT_MAX_LINE_BYTES,
        metavar="N",
        help=f"refuse lines longer than N bytes (default {DEFAULT_MAX_LINE_BYTES})",
    )
    imp.set_defaults(func=cmd_import)


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text} is not a positive integer")
    return value


def cmd_export(args: argparse.Namespace) -> int:
    """Export the trace."""
    bar = ProgressBar()
    with open_read_only(args.db) as store:
        if args.output:
            with open(args.output, "w", encoding="utf-8", newline="\n") as out:
                done = export_trace(store, out, progress=bar)
        else:
            done = export_trace(store, sys.stdout, progress=bar)
    bar.finish()
    where = f" to {args.output}" if args.output else ""
    print(f"exported {done.lines} lines{where}; head {done.head}", file=sys.stderr)
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    """Prove every line of the export while writing it in one transaction."""
    bar = ProgressBar()
    if args.source == "-":
        summary = _import(sys.stdin.buffer, args)
    else:
        with open(args.source, "rb") as source:
            summary = _import(source, args)
    bar.finish()
    print(
        f"imported {summary.intents} intents, {summary.records} records, "
        f"{summary.path_entries} path entries into {_shown(args.target)}"
    )
    return 0


def _import(source: IO[bytes], args: argparse.Namespace) -> ImportSummary:
    lines = read_export_lines(source, args.max_line_bytes)
    return import_trace_to(args.target, lines, max_line_bytes=args.max_line_bytes)


def _shown(target: str) -> str:
    if "://" not in target:
        return target
    return make_url(target).render_as_string(hide_password=True)
