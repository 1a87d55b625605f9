"""Helpers shared by the CLI subcommands: opening stores, common options."""

from __future__ import annotations

import argparse

from goatherd.infrastructure.store import (
    SqlAlchemyTraceStore,
    open_trace_store,
    open_trace_store_read_only,
)

__all__ = [
    "Subparsers",
    "add_db_argument",
    "add_json_flag",
    "open_read_only",
    "open_writable",
]

Subparsers = argparse._SubParsersAction


def add_db_argument(parser: argparse.ArgumentParser) -> None:
    """Add the positional DB argument (a path or an SQLAlchemy URL)."""
    parser.add_argument(
        "db", metavar="DB", help="trace database: a path or an SQLAlchemy URL"
    )


def add_json_flag(parser: argparse.ArgumentParser) -> None:
    """Add ``--json`` (machine-readable output)."""
    parser.add_argument("--json", action="store_true", help="print JSON for scripts")


def open_read_only(db: str) -> SqlAlchemyTraceStore:
    """Open an existing trace without ever writing to it."""
    return open_trace_store_read_only(db)


def open_writable(db: str) -> SqlAlchemyTraceStore:
    """Open (creating if absent) a trace for writing."""
    return open_trace_store(db)
