"""The parser's building blocks: argument types, shared options, one subcommand.

The environment variables that default ``--db`` and ``--workspace``, the
argparse types (``positive``, ``non_negative``, seconds, a trace head), the
global options every command accepts before or after its name, and
``_command``, which adds one subcommand naming its handler as
``"module:function"``. Imports only argparse (the trace-head parser on use).
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from goatherd.infrastructure.store.chain import TraceHead

__all__ = [
    "DB_ENV",
    "Subparsers",
    "WORKSPACE_ENV",
    "non_negative",
    "positive",
]


DB_ENV: Final = "GOATHERD_DB"
WORKSPACE_ENV: Final = "GOATHERD_WORKSPACE"


Subparsers = argparse._SubParsersAction


def positive(text: str) -> int:
    """Parse an integer of at least 1 (argparse type)."""
    value = _integer(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def non_negative(text: str) -> int:
    """Parse an integer of at least 0 (argparse type)."""
    value = _integer(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {value}")
    return value


def _integer(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value > 2**63 - 1:
        raise argparse.ArgumentTypeError(f"too large: {text}")
    return value


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0.01 <= value <= 3600:
        raise argparse.ArgumentTypeError(f"must be 0.01 to 3600 seconds, got {text}")
    return value


def _trace_head(text: str) -> TraceHead:
    """Parse a noted trace head (argparse type; loads the store only when given)."""
    from goatherd.infrastructure.store.chain import parse_head

    try:
        return parse_head(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _global_options(parser: argparse.ArgumentParser, *, top: bool) -> None:
    """Add --db, --json and --debug (sub-parsers leave unset values alone)."""
    default: object = None if top else argparse.SUPPRESS
    parser.add_argument(
        "--db",
        default=default,
        metavar="DB",
        help=f"the trace: a path or an SQLAlchemy URL (default ${DB_ENV})",
    )
    parser.add_argument(
        "--json",
        action="store_true",
        default=False if top else argparse.SUPPRESS,
        help="print JSON for scripts",
    )
    parser.add_argument(
        "--debug",
        action="store_true",
        default=False if top else argparse.SUPPRESS,
        help="show tracebacks on errors",
    )


def _command(
    sub: Subparsers[argparse.ArgumentParser],
    name: str,
    handler: str,
    help_text: str,
    *,
    trace: str = "read",
    legacy_db: bool = False,
    description: str | None = None,
) -> argparse.ArgumentParser:
    """Add one subcommand; ``trace`` is how it opens the trace (read/write/none)."""
    parser = sub.add_parser(name, help=help_text, description=description or help_text)
    _global_options(parser, top=False)
    if legacy_db:
        parser.add_argument("legacy_db", nargs="?", help=argparse.SUPPRESS)
    parser.set_defaults(handler=handler, trace=trace)
    return parser


def _workspace_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--workspace",
        action="append",
        default=[],
        metavar="[SCOPE=]DIR",
        help=(
            "where a root scope's workspace (a git repository) lives, when not"
            f" where its record says (default ${WORKSPACE_ENV}, else the record)"
        ),
    )


def _module_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--module",
        action="append",
        default=[],
        metavar="PKG.MOD:NAME",
        help="also run your projection (a Projection class, instance or factory)",
    )
