"""The argument parser of ``goatherd``: every command, no heavy import.

Each subcommand names its handler as ``"module:function"`` inside
``goatherd.cli``; :func:`goatherd.cli.main` imports that module only when the
command runs, so ``--help`` and ``--version`` start fast.

Global options (``--db``, ``--json``, ``--debug``) are accepted before or
after the subcommand. The trace is always named by ``--db`` (default: the
``GOATHERD_DB`` environment variable); commands that took it positionally
before still accept a leading positional ``DB``. The argument types and the
shared options live in ``arguments``, the subcommands' builders in
``command_groups``; this module assembles them.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from typing import Final

from goatherd.cli.arguments import (
    DB_ENV,
    WORKSPACE_ENV,
    Subparsers,
    _global_options,
    non_negative,
    positive,
)
from goatherd.cli.command_groups import (
    _cuts_and_history,
    _demo,
    _inspection,
    _lifecycle,
    _mcp,
    _moving,
    _serving,
)

__all__ = [
    "DB_ENV",
    "Subparsers",
    "WORKSPACE_ENV",
    "build_parser",
    "non_negative",
    "positive",
]

VERSION: Final = "0.1.0"
_EPILOG: Final = (
    f"The trace is --db DB (a path or an SQLAlchemy URL; default ${DB_ENV}). "
    "Exit codes: 0 ok, 1 failed, 2 usage error, 3 address in use (traceui), "
    "4 erased bytes may remain (redact), 130 interrupted."
)


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """Return the argument parser: every subcommand, or what ``argv`` runs.

    With ``argv``, a command line that names a known command (after the
    global options) gets a parser with that command's group of subcommands
    only: building every subcommand's parser is most of the parser's start-up
    and one command needs one. Any other command line (``--help``, no
    command, an unknown one, an abbreviated option) gets every subcommand, so
    help, usage and errors read as they always did.
    """
    parser = _top_parser()
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    chosen = _group_of(argv)
    for group in _GROUPS if chosen is None else (chosen,):
        group(sub)
    return parser


def _group_of(
    argv: Sequence[str] | None,
) -> Callable[[Subparsers[argparse.ArgumentParser]], None] | None:
    """Return the group of the command ``argv`` names, if it names one plainly."""
    if argv is None:
        return None
    args = iter(argv)
    for arg in args:
        if arg == "--db":
            if next(args, None) is None:
                return None
        elif arg.startswith("--db=") or arg in ("--json", "--debug"):
            continue
        elif arg.startswith("-"):
            return None
        else:
            return _COMMAND_GROUPS.get(arg)
    return None


def _top_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="goatherd",
        description=(
            "Reversible, auditable AI-agent work: an append-only, content-addressed "
            "trace with scopes, checkpoints and settlement on top."
        ),
        epilog=_EPILOG,
    )
    parser.add_argument("--version", action="version", version=f"goatherd {VERSION}")
    _global_options(parser, top=True)
    return parser


_Group = Callable[["Subparsers[argparse.ArgumentParser]"], None]
_GROUPS: Final[tuple[_Group, ...]] = (
    _demo,
    _inspection,
    _lifecycle,
    _cuts_and_history,
    _moving,
    _serving,
    _mcp,
)
"""The subcommand groups, in ``--help`` order."""
_COMMAND_GROUPS: Final[dict[str, _Group]] = {
    **dict.fromkeys(("demo",), _demo),
    **dict.fromkeys(("log", "show", "stats", "verify", "recover"), _inspection),
    **dict.fromkeys(
        ("scopes", "diff", "checkout", "settle", "discard", "restore"), _lifecycle
    ),
    **dict.fromkeys(("cut", "history"), _cuts_and_history),
    **dict.fromkeys(("export", "redact", "import"), _moving),
    **dict.fromkeys(("traceui", "projections"), _serving),
    **dict.fromkeys(("mcp",), _mcp),
}
"""Each top-level command's group (``tests/cli`` checks it against the parser)."""
