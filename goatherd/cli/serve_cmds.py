"""``goatherd traceui`` and ``goatherd projections``.

``--module pkg.mod:NAME`` adds your own projection (a ``Projection``
subclass taking no arguments, an instance, or a factory returning one) to
the built-ins, for ``projections list|catch-up|rebuild`` and for the trace
UI's index (``/api/projections``).
"""

from __future__ import annotations

import argparse
import errno
import importlib
import socket
from typing import Any

from goatherd.cli.common import open_read_only, open_writable
from goatherd.cli.exits import EXIT_ADDRESS_IN_USE, CommandError
from goatherd.cli.output import ProgressBar, emit_json
from goatherd.cli.text import clean, redact_url
from goatherd.infrastructure.bus.effect_bus import EffectBus
from goatherd.infrastructure.projections.runner import (
    ProjectionRunner,
    builtin_projections,
)
from goatherd.infrastructure.traceui.server import listen, parse_addr, serve, url_of
from goatherd.infrastructure.traceui.tail import LogTailer
from goatherd.projections import Projection

__all__ = [
    "cmd_projections_catch_up",
    "cmd_projections_list",
    "cmd_projections_rebuild",
    "cmd_traceui",
    "load_projection",
]


def load_projection(spec: str) -> Projection[Any]:
    """Import ``pkg.mod:NAME`` and return the projection it names.

    Raises:
        ValueError: a malformed spec, a missing module or name, or an object
            that is not (and does not make) a projection.
    """
    module_name, sep, name = spec.partition(":")
    if not sep or not module_name or not name:
        raise ValueError(f"--module must be PKG.MOD:NAME, got {spec!r}")
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        message = f"--module {spec}: cannot import {module_name}: {error}"
        raise ValueError(message) from error
    target = getattr(module, name, None)
    if target is None:
        raise ValueError(f"--module {spec}: {module_name} has no {name!r}")
    not_one = (
        f"--module {spec}: {name} is not a Projection, a Projection class"
        " or a factory returning one"
    )
    if isinstance(target, Projection):
        return target
    if not callable(target):
        raise ValueError(not_one)
    try:
        value = target()
    except Exception as error:  # the user's code: report it, in one line
        raise ValueError(f"--module {spec}: {name}() failed: {error}") from error
    if not isinstance(value, Projection):
        raise ValueError(not_one)
    return value


def _projections(args: argparse.Namespace) -> list[Projection[Any]]:
    return [*builtin_projections(), *(load_projection(m) for m in args.module)]


def _listen(addr: str) -> socket.socket:
    """Bind the UI's socket, or fail in one line (exit code 3: address in use)."""
    try:
        return listen(addr)
    except OSError as error:
        if error.errno == errno.EADDRINUSE:
            raise CommandError(
                f"address {addr} is already in use (another trace UI?);"
                " pick another with --addr HOST:PORT",
                EXIT_ADDRESS_IN_USE,
            ) from error
        raise CommandError(f"cannot listen on {addr}: {error.strerror}") from error


def cmd_traceui(args: argparse.Namespace) -> int:
    """Serve an existing trace, opened read-only, following new commits."""
    parse_addr(args.addr)
    extra = [load_projection(m) for m in args.module]
    store = open_read_only(args.db, live=True)
    try:
        sock = _listen(args.addr)
    except BaseException:
        store.close()
        raise
    bus = EffectBus()
    tailer = LogTailer(store, bus, interval=args.interval).start()
    print(
        clean(
            f"goatherd trace UI for {redact_url(args.db)} on {url_of(sock)}/"
            " (Ctrl-C to stop)"
        ),
        flush=True,
    )
    try:
        serve(
            store,
            bus,
            args.addr,
            allowed_hosts=tuple(args.allow_host),
            projections=tuple(extra),
            sock=sock,
        )
    finally:
        sock.close()
        tailer.stop()
        bus.close()
        store.close()
    return 0


def cmd_projections_list(args: argparse.Namespace) -> int:
    """Print each read model's version, position and lag."""
    projections = _projections(args)
    with open_writable(args.db) as store:
        statuses = ProjectionRunner(store, projections).status()
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
            clean(
                f"{status.name:<32} v{status.version}  position {status.position}"
                f"  lag {status.lag}"
            )
        )
    return 0


def cmd_projections_catch_up(args: argparse.Namespace) -> int:
    """Fold every log entry the read models have not seen yet."""
    bar = ProgressBar()
    projections = _projections(args)
    with open_writable(args.db) as store:
        runner = ProjectionRunner(store, projections)
        runner.catch_up(progress=bar)
        head = store.max_position()
    bar.finish()
    result = {"read_models": len(projections), "position": head}
    if args.json:
        emit_json(result)
    else:
        print(f"caught up {len(projections)} read models to log position {head}")
    return 0


def cmd_projections_rebuild(args: argparse.Namespace) -> int:
    """Drop one read model and replay the whole log into it."""
    bar = ProgressBar()
    projections = _projections(args)
    with open_writable(args.db) as store:
        folded = ProjectionRunner(store, projections).rebuild(args.name, progress=bar)
    bar.finish()
    if args.json:
        emit_json({"name": args.name, "log_entries": folded})
    else:
        print(clean(f"rebuilt {args.name}: replayed {folded} log entries"))
    return 0
