"""``goatherd export`` and ``goatherd import``: move a trace as JSON lines."""

from __future__ import annotations

import argparse
import sys
from typing import IO

from goatherd.cli.common import open_read_only
from goatherd.cli.output import ProgressBar
from goatherd.cli.text import clean, redact_url
from goatherd.infrastructure.portability.jsonl import export_trace
from goatherd.infrastructure.portability.trace_import import (
    ImportSummary,
    import_trace_to,
    read_export_lines,
)

__all__ = ["cmd_export", "cmd_import"]


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
    print(
        clean(f"exported {done.lines} lines{where}; head {done.head}"), file=sys.stderr
    )
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
        f"{summary.path_entries} path entries into {clean(redact_url(args.db))}"
    )
    return 0


def _import(source: IO[bytes], args: argparse.Namespace) -> ImportSummary:
    lines = read_export_lines(source, args.max_line_bytes)
    return import_trace_to(
        args.db,
        lines,
        max_line_bytes=args.max_line_bytes,
        accept_headless=args.accept_headless,
    )
