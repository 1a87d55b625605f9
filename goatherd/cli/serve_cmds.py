"""``goatherd traceui`` and ``goatherd projections``."""

from __future__ import annotations

import argparse
import sys

from goatherd.cli.common import Subparsers, add_json_flag, open_read_only, open_writable
from goatherd.cli.output import ProgressBar, emit_json
from goatherd.infrastructure.projection_runner import (
    ProjectionRunner,
    builtin_projections,
    list_projections,
    rebuild_projection,
)
from goatherd.infrastructure.traceui.server import DEFAULT_ADDR, parse_addr, serve

__all__ = ["register"]


def register(sub: Subparsers[argparse.ArgumentParser]) -> None:
    """Register the trace UI and projection subcommands."""
    ui = sub.add_parser("traceui", help="serve the read-only trace UI for a trace file")
    ui.add_argument(
        "--db", required=True, help="trace database: a path or an SQLAlchemy URL"
    )
    ui.add_argument(
        "--addr",
        default=DEFAULT_ADDR,
        help=f"HOST:PORT to bind (default {DEFAULT_ADDR})",
    )
    ui.set_defaults(func=cmd_traceui)

    proj = sub.add_parser(
        "projections", help="list, catch up or rebuild the read models"
    )
    proj_sub = proj.add_subparsers(dest="action", metavar="ACTION", required=True)
    listing = proj_sub.add_parser("list", help="each read model's position and lag")
    _db(listing)
    add_json_flag(listing)
    listing.set_defaults(func=cmd_projections_list)
    catch_up = proj_sub.add_parser(
        "catch-up", help="fold every new record into the views"
    )
    _db(catch_up)
    catch_up.set_defaults(func=cmd_projections_catch_up)
    rebuild = proj_sub.add_parser(
        "rebuild", help="drop one read model and replay the log"
    )
    rebuild.add_argument("name", metavar="NAME", help="the read model's name")
    _db(rebuild)
    rebuild.set_defaults(func=cmd_projections_rebuild)


def _db(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--db", required=True, help="trace database: a path or an SQLAlchemy URL"
    )


def cmd_traceui(args: argparse.Namespace) -> int:
    """Serve an existing trace, opened read-only, until interrupted."""
    parse_addr(args.addr)
    store = open_read_only(args.db)
    print(f"goatherd trace UI for {args.db} on http://{args.addr}/ (Ctrl-C to stop)")
    sys.stdout.flush()
    try:
        serve(store, None, args.addr)
    finally:
        store.close()
    return 0


def cmd_projections_list(args: argparse.Namespace) -> int:
    """Print each built-in read model's version, position and lag."""
    with open_writable(args.db) as store:
        statuses = list_projections(store)
    if args.json:
        emit_json(
            [
                {
                    "name": s.name,
                    "version": s.version,
                    "position": s.position,
                    "head": s.head,
                    "lag": s.lag,
                }
                for s in statuses
            ]
        )
        return 0
    for status in statuses:
        print(
            f"{status.name:<32} v{status.version}  position {status.position}"
            f"  lag {status.lag}"
        )
    return 0


def cmd_projections_catch_up(args: argparse.Namespace) -> int:
    """Fold every record the read models have not seen yet."""
    bar = ProgressBar()
    with open_writable(args.db) as store:
        runner = ProjectionRunner(store, builtin_projections())
        folded = runner.catch_up(progress=bar)
    bar.finish()
    print(f"folded {folded} records")
    return 0


def cmd_projections_rebuild(args: argparse.Namespace) -> int:
    """Drop one read model and replay the whole log into it."""
    bar = ProgressBar()
    with open_writable(args.db) as store:
        folded = rebuild_projection(store, args.name, progress=bar)
    bar.finish()
    print(f"rebuilt {args.name}: folded {folded} records")
    return 0
