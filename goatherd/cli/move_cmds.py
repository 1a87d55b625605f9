"""``goatherd export`` and ``goatherd import``: move a trace as JSON lines."""

from __future__ import annotations

import argparse
import io
import sys
from pathlib import Path

from goatherd.cli.common import open_read_only
from goatherd.cli.output import ProgressBar
from goatherd.cli.text import clean, redact_url
from goatherd.infrastructure.portability import export_trace, import_trace
from goatherd.infrastructure.store import open_trace_store

__all__ = ["cmd_export", "cmd_import"]


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
        print(clean(f"exported {lines} lines to {args.output}"), file=sys.stderr)
    return 0


def _export_lines(source: str) -> list[str]:
    """Read an export's lines, split at line feeds only.

    ``str.splitlines`` and universal newlines also split at U+0085, U+2028,
    U+2029 and other separators, which JSON strings may hold unescaped.
    """
    if source == "-":
        stream = io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8", newline="\n")
        return list(stream)
    with open(source, encoding="utf-8", newline="\n") as file:
        return list(file)


def cmd_import(args: argparse.Namespace) -> int:
    """Prove every line of the export, then write it in one transaction."""
    bar = ProgressBar()
    target = args.db
    if "://" not in target and Path(target).exists() and Path(target).stat().st_size:
        raise ValueError(f"{clean(target)} already exists: import into a new database")
    lines = _export_lines(args.source)
    with open_trace_store(target) as store:
        summary = import_trace(lines, store, progress=bar)
    bar.finish()
    print(
        f"imported {summary.intents} intents, {summary.records} records, "
        f"{summary.path_entries} path entries into {clean(redact_url(target))}"
    )
    return 0
