"""The ``goatherd`` command line.

Every subcommand that reads a trace takes the database as a path or an
SQLAlchemy URL (``sqlite:///trace.sqlite``, ``postgresql+psycopg://...``) and
opens it read-only. Errors are one clear line on stderr; ``--debug`` shows the
traceback. ``--json`` prints machine-readable output.

Exit codes:
    0  success
    1  the command failed: bad input, a failed check (``verify``), an error
    2  usage error (unknown command or option)
    130 interrupted
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

import goatherd
from goatherd.cli import inspect_cmds, mcp_cmd, move_cmds, recover_cmd, serve_cmds

__all__ = ["EXIT_FAILED", "EXIT_OK", "EXIT_USAGE", "build_parser", "main"]

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


def build_parser() -> argparse.ArgumentParser:
    """Return the argument parser with every subcommand registered."""
    parser = argparse.ArgumentParser(
        prog="goatherd",
        description=(
            "Reversible, auditable AI-agent work: an append-only, content-addressed "
            "trace with scopes, checkpoints and settlement on top."
        ),
        epilog="Exit codes: 0 ok, 1 failed, 2 usage error, 130 interrupted.",
    )
    parser.add_argument(
        "--version", action="version", version=f"goatherd {goatherd.__version__}"
    )
    parser.add_argument(
        "--debug", action="store_true", help="show tracebacks on errors"
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    _register_demo(sub)
    inspect_cmds.register(sub)
    move_cmds.register(sub)
    serve_cmds.register(sub)
    recover_cmd.register(sub)
    mcp_cmd.register(sub)
    return parser


def _register_demo(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from goatherd.cli import demo_cmd

    demo_cmd.register(sub)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return EXIT_OK
    try:
        result: int = args.func(args)
    except KeyboardInterrupt:
        print("goatherd: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader went away (``goatherd log DB | head``): stop quietly, and
        # keep Python from complaining while it flushes stdout at exit.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return EXIT_OK
    except Exception as exc:
        if args.debug:
            raise
        # KeyError's str() quotes its message; show the message itself.
        text = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
        message = str(text) or type(exc).__name__
        print(f"goatherd: error: {message}", file=sys.stderr)
        return EXIT_FAILED
    return result
