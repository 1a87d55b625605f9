"""``goatherd demo``: a scripted best-of-n session, resumable after a crash.

With no arguments it creates a small git project in ``<tempdir>/goatherd-demo``,
runs three scripted attempts (denied, failing, passing) through the merge
gate, settles the winner and prints a summary. Running it again finishes an
interrupted session from the trace, or reports a completed one.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from goatherd.cli.common import Subparsers, add_json_flag
from goatherd.cli.output import emit_json
from goatherd.infrastructure.demo import (
    DemoOptions,
    default_demo_dir,
    render_summary,
    run_demo,
    summary_json,
)

__all__ = ["register"]


def register(sub: Subparsers[argparse.ArgumentParser]) -> None:
    """Register the demo subcommand."""
    demo = sub.add_parser(
        "demo",
        help="run the best-of-n demo (no services, no network, no model)",
        description=(
            "Create a sample git project and run three scripted attempts at its"
            " failing test as a best-of-n session: one is denied by the"
            " supervisor, one breaks the tests, one passes and is settled onto"
            " the project. Rerun the same command to resume after a crash."
        ),
    )
    demo.add_argument(
        "--dir",
        type=Path,
        default=None,
        help=f"the demo directory (default {default_demo_dir()})",
    )
    demo.add_argument(
        "--fresh", action="store_true", help="wipe an earlier demo and start over"
    )
    demo.add_argument(
        "--crash-after",
        type=_positive,
        default=0,
        metavar="N",
        help="kill this process (SIGKILL) after N appended records; rerun to resume",
    )
    add_json_flag(demo)
    demo.set_defaults(func=cmd_demo)


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def cmd_demo(args: argparse.Namespace) -> int:
    """Run (or resume) the demo and print its summary."""
    directory = args.dir if args.dir is not None else default_demo_dir()
    stream = sys.stderr if args.json else sys.stdout

    def progress(text: str) -> None:
        print(f"demo: {text}", file=stream, flush=True)

    options = DemoOptions(directory, fresh=args.fresh, crash_after=args.crash_after)
    run = run_demo(options, progress)
    if args.json:
        emit_json(summary_json(run))
    else:
        print()
        print(render_summary(run))
    return 0
