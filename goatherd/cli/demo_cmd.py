"""``goatherd demo``: a best-of-n session on embedded defaults."""

from __future__ import annotations

import argparse

import goatherd
from goatherd.cli.common import Subparsers

__all__ = ["register"]


def register(sub: Subparsers[argparse.ArgumentParser]) -> None:
    """Register the demo subcommand."""
    demo = sub.add_parser("demo", help="run the best-of-n demo on embedded defaults")
    demo.set_defaults(func=cmd_demo)


def cmd_demo(args: argparse.Namespace) -> int:
    """Run the demo."""
    print(f"goatherd {goatherd.__version__} ({goatherd.ABI_VERSION})")
    print("root witness:", goatherd.root_witness_record_id())
    return 0
