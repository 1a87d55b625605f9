"""``goatherd mcp``: serve reversible, audited environments to an MCP coding agent.

The MCP client (Claude Code, Cursor, Codex, Goose...) starts
``goatherd mcp --repo PATH`` and talks to it over stdio; ``--http`` serves
streamable HTTP on a loopback address instead. It needs the ``mcp`` extra
(``pip install goatherd[mcp]``); nothing here imports it until the command
runs, so the rest of the command line works without it.

The trace defaults to ``$GOATHERD_DB``, else ``goatherd/trace.sqlite`` in the
repository's git directory (where ``goatherd scopes``, ``diff``, ``settle``
and ``traceui`` find it with ``--db``); worktrees go under
``$XDG_STATE_HOME/goatherd/worktrees`` (default ``~/.local/state``).
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = [
    "cmd_mcp",
    "default_trace",
    "default_worktrees",
    "repository_top",
]

_DB_ENV = "GOATHERD_DB"
_EXTRA = "goatherd mcp needs the mcp extra: pip install 'goatherd[mcp]'"


def _git(cwd: Path, *args: str) -> str:
    from goatherd.application.errors import GitError, SandboxError
    from goatherd.infrastructure.sandbox.gitrunner import GitRunner

    try:  # goatherd's safe git configuration (ADR 0067)
        return GitRunner(cwd).text(*args).strip()
    except (GitError, SandboxError) as exc:
        stderr = exc.stderr if isinstance(exc, GitError) else str(exc)
        detail = stderr.strip().splitlines()[-1:] or ["git failed"]
        raise ValueError(f"{cwd} is not a git repository ({detail[0]})") from exc


def repository_top(path: str) -> Path:
    """Return the top-level directory of the repository ``path`` is in."""
    start = Path(path).expanduser()
    if not start.is_dir():
        raise ValueError(f"--repo {path}: no such directory")
    return Path(_git(start.resolve(), "rev-parse", "--show-toplevel"))


def default_trace(repo: Path) -> str:
    """Return ``$GOATHERD_DB``, else the trace in the repository's git directory."""
    named = os.environ.get(_DB_ENV)
    if named:
        return named
    common = _git(repo, "rev-parse", "--path-format=absolute", "--git-common-dir")
    directory = Path(common) / "goatherd"
    directory.mkdir(exist_ok=True)
    return str(directory / "trace.sqlite")


def default_worktrees(repo: Path) -> Path:
    """Return the default worktrees directory of ``repo`` (outside it)."""
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    digest = hashlib.sha256(str(repo).encode()).hexdigest()[:8]
    return Path(state) / "goatherd" / "worktrees" / f"{repo.name}-{digest}"


def _http_address(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep:
        host, port = "127.0.0.1", text
    try:
        number = int(port)
    except ValueError:
        raise ValueError(f"--http {text}: the port is not a number") from None
    if not 0 <= number <= 65535:
        raise ValueError(f"--http {text}: the port must be 0 to 65535")
    return host or "127.0.0.1", number


def _crash_tap(after: int) -> Callable[[object], None] | None:
    if after <= 0:
        return None
    seen = [0]

    def tap(_event: object) -> None:
        seen[0] += 1
        if seen[0] >= after:
            os.kill(os.getpid(), signal.SIGKILL)

    return tap


def _announce(message: str) -> None:
    print(f"goatherd mcp: {message}", file=sys.stderr, flush=True)


def cmd_mcp(args: argparse.Namespace) -> int:
    """Serve until the client disconnects (stdio) or the process is stopped."""
    # The SDK's imports build thousands of models and no garbage: a collector
    # pass in the middle of them is wasted (about 0.1 s of every start), and
    # so is every later pass over them (they are frozen out of its sight once
    # imported, with the trace's and the tools' modules, ADR 0089).
    gc.disable()
    try:
        try:
            from goatherd.integrations import mcp as integration
        except ImportError as error:
            raise RuntimeError(f"{_EXTRA} ({error})") from error
        from goatherd.application import NetworkMode
        from goatherd.infrastructure import open_runtime
    finally:
        gc.freeze()
        gc.enable()

    if not 0 < args.timeout <= integration.MAX_TIMEOUT:
        raise ValueError(
            f"--timeout must be above 0 and at most {integration.MAX_TIMEOUT:g}"
        )
    address = None if args.http is None else _http_address(args.http)
    if address is not None:
        integration.require_loopback(address[0])
    repo = repository_top(args.repo)
    db = args.db or default_trace(repo)
    worktrees = (
        Path(args.worktrees).resolve() if args.worktrees else default_worktrees(repo)
    )
    settings = integration.McpSettings(
        repo=repo,
        db=db,
        worktrees=worktrees,
        network=NetworkMode(args.network),
        accept_gaps=frozenset(args.accept_gap),
        default_timeout=args.timeout,
        pass_env=tuple(args.pass_env),
    )
    tap: Any = _crash_tap(args.crash_after)
    runtime = open_runtime(db, bus=False, tap=tap)
    try:
        tools = integration.WorkspaceTools(runtime, settings)
        server = integration.build_server(tools, version=_version())
        _announce(f"serving {repo} (trace {db}, worktrees {worktrees})")
        if address is None:
            integration.serve(server)
        else:
            host, port = address
            integration.serve_http(
                server, host, port, lambda url: _announce(f"listening on {url}")
            )
    finally:
        runtime.close()
    return 0


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("goatherd")
    except PackageNotFoundError:
        return ""
