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

from goatherd.cli.output import emit_json
from goatherd.demo import (
    DemoOptions,
    default_demo_dir,
    render_summary,
    run_demo,
    summary_json,
)

__all__ = ["cmd_demo"]


def cmd_demo(args: argparse.Namespace) -> int:
    """Run (or resume) the demo and print its summary."""
    directory = Path(args.dir) if args.dir is not None else default_demo_dir()
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
