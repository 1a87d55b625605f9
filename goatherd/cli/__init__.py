"""The ``goatherd`` command line.

Every subcommand that reads a trace names it with ``--db`` (a path or an
SQLAlchemy URL such as ``postgresql+psycopg://...``; default ``$GOATHERD_DB``)
and opens it read-only; no command creates a trace it was only asked to read.
Global options (``--db``, ``--json``, ``--debug``) go before or after the
subcommand. Errors are one line on stderr with passwords redacted and control
characters escaped; ``--debug`` shows the traceback.

Exit codes:
    0  success
    1  the command failed: bad input, a failed check (``verify``), an error
    2  usage error (unknown command or option, no trace named)
    3  ``traceui``: the address is already in use
    4  ``redact``: the erasure was recorded, but erased bytes may remain
    130 interrupted

Start-up stays light: the parser imports nothing beyond the standard
library, a command's module is imported only when it runs, and that module
imports at the top only what all of its commands need; what one command
needs (sandboxes, git, the integrity checker) it imports itself (ADR 0081).
``tests/cli/test_import_graph.py`` checks which modules each kind of command
loads.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import os
import sys
from collections.abc import Callable, Sequence

from goatherd.cli.exits import (
    EXIT_ADDRESS_IN_USE,
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    CommandError,
)
from goatherd.cli.parser import DB_ENV, build_parser
from goatherd.cli.text import one_line

__all__ = [
    "EXIT_ADDRESS_IN_USE",
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_USAGE",
    "CommandError",
    "build_parser",
    "main",
]

_NO_JSON = frozenset({"serve_cmds:cmd_traceui"})


def _resolve_trace(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Settle ``args.db`` from --db, a legacy positional or ``$GOATHERD_DB``."""
    legacy = getattr(args, "legacy_db", None)
    if legacy is not None and args.db is not None and legacy != args.db:
        parser.error(f"the trace is named twice: --db {args.db} and {legacy}")
    db = args.db if args.db is not None else legacy
    if args.trace == "none":
        if db is not None and args.db is not None:
            parser.error(f"{args.command} does not open a trace: drop --db")
        return
    if db is None:
        db = os.environ.get(DB_ENV) or None
    if db is None and args.trace != "optional":  # mcp: a trace in the repository
        parser.error(f"no trace named: pass --db DB or set {DB_ENV}")
    args.db = db


def _handler(name: str, *, own_process: bool) -> Callable[[argparse.Namespace], int]:
    module, _, function = name.partition(":")
    if own_process:
        # Importing a command's modules makes tens of thousands of objects
        # that live as long as the process, and none of them is garbage: the
        # cyclic collector would walk them again and again on the way (about
        # 6% of a command's start-up). Collect nothing while importing, then
        # move what the imports made out of the collector's sight (ADR 0089).
        gc.disable()
        try:
            loaded = importlib.import_module(f"goatherd.cli.{module}")
        finally:
            gc.freeze()
            gc.enable()
    else:
        loaded = importlib.import_module(f"goatherd.cli.{module}")
    handler: Callable[[argparse.Namespace], int] = getattr(loaded, function)
    return handler


def _quiet_stdout() -> None:
    # The reader went away (``goatherd log | head``): keep Python from
    # complaining while it flushes stdout at exit.
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def _message(exc: BaseException) -> str:
    # KeyError's str() quotes its message; show the message itself.
    text = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
    return one_line(str(text)) or type(exc).__name__


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit code."""
    try:
        return _main(argv)
    finally:
        if argv is None:
            # The process's own command line, and the process ends next: the
            # collector need not walk every object the imports made on the way
            # out (a third of a second of each ``goatherd mcp`` exit).
            gc.freeze()


def _main(argv: Sequence[str] | None) -> int:
    line = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(line)
    args = parser.parse_args(line)
    if args.command is None:
        parser.print_help()
        return EXIT_OK
    if args.json and args.handler in _NO_JSON:
        parser.error(f"{args.command} has no --json output")
    _resolve_trace(parser, args)
    try:
        return _handler(args.handler, own_process=argv is None)(args)
    except KeyboardInterrupt:
        print("goatherd: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        _quiet_stdout()
        return EXIT_OK
    except Exception as exc:
        if args.debug:
            raise
        print(f"goatherd: error: {_message(exc)}", file=sys.stderr)
        return exc.exit_code if isinstance(exc, CommandError) else EXIT_FAILED
