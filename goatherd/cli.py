"""The ``goatherd`` command line.

Each subcommand lives in its own function; errors are one clear line on stderr
(a traceback only with ``--debug``). Exit codes: 0 success, 1 a command failed
(bad input, a failed check), 2 usage error.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

import goatherd

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="goatherd",
        description=(
            "Reversible, auditable AI-agent work: an append-only, content-addressed "
            "trace with scopes, checkpoints and settlement on top."
        ),
    )
    parser.add_argument(
        "--version", action="version", version=f"goatherd {goatherd.__version__}"
    )
    parser.add_argument(
        "--debug", action="store_true", help="show tracebacks on errors"
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    demo = sub.add_parser("demo", help="run the best-of-n demo on embedded defaults")
    demo.set_defaults(func=_cmd_demo)
    return parser


def _cmd_demo(args: argparse.Namespace) -> int:
    print(f"goatherd {goatherd.__version__} ({goatherd.ABI_VERSION})")
    print("root witness:", goatherd.root_witness_record_id())
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return EXIT_OK
    try:
        result: int = args.func(args)
    except Exception as exc:
        if args.debug:
            raise
        print(f"goatherd: error: {exc}", file=sys.stderr)
        return EXIT_FAILED
    return result
