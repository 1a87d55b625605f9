"""``scopes``, ``diff``, ``checkout``, ``settle``, ``discard`` and ``restore``.

Each goes through the application layer exactly as the Python API does:
recovery rebuilds the scope manager from the trace, then the command calls
the manager (same checks, same records, same consume-once claims). Sandboxes
are re-adopted the way recovery does it (see ``goatherd.cli.common``).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from returns.result import Failure

from goatherd.application.errors import NoSandboxError
from goatherd.cli.common import recovered, repository_of, unwrap
from goatherd.cli.exits import EXIT_USAGE, CommandError
from goatherd.cli.ids import CHECKPOINT, OUTPUT, SCOPE, candidates, resolve
from goatherd.cli.output import emit_json
from goatherd.cli.recover_cmd import (
    checkpoints_json,
    print_checkpoints,
    print_tree,
    scope_json,
)
from goatherd.cli.text import clean

if TYPE_CHECKING:
    from goatherd.application import Scope, ScopeManager
    from goatherd.domain import SnapshotReleasedError, WorkspaceState
    from goatherd.infrastructure import GitSandbox, Runtime

__all__ = [
    "cmd_checkout",
    "cmd_diff",
    "cmd_discard",
    "cmd_restore",
    "cmd_scopes",
    "cmd_settle",
]

_NO_WORKSPACE = (
    "its workspace cannot be re-adopted here (no git directory the trace"
    " records for it exists on this machine); name the root's repository"
    " with --workspace DIR (or $GOATHERD_WORKSPACE)"
)
_VERBS = {
    "select": "SELECT",
    "apply": "APPLY",
    "release": "RELEASE",
    "discard": "DISCARD",
    "selected": "SELECT",
    "applied": "APPLY",
    "released": "RELEASE",
    "discarded": "DISCARD",
}
_COLORS = {"+": "\x1b[32m", "-": "\x1b[31m", "@": "\x1b[36m"}


@contextmanager
def _needs_workspace() -> Iterator[None]:
    """Turn a missing sandbox into one line that says how to name it."""
    try:
        yield
    except NoSandboxError as error:
        raise CommandError(f"{error}: {_NO_WORKSPACE}") from error


# ---------------------------------------------------------------- scopes


def cmd_scopes(args: argparse.Namespace) -> int:
    """Print the scope tree, each scope's outputs, and the checkpoints."""
    with recovered(args) as (_, manager, _store):
        scopes = [scope_json(manager, scope) for scope in manager.all_scopes()]
        checkpoints = checkpoints_json(manager)
    if args.json:
        emit_json({"scopes": scopes, "checkpoints": checkpoints})
        return 0
    print_tree(scopes)
    print_checkpoints(checkpoints)
    return 0


# ---------------------------------------------------------------- diff


def _scope(manager: ScopeManager, scope_id: str) -> Scope:
    scope = manager.get(scope_id)
    if scope is None:
        known = ", ".join(s.id for s in manager.all_scopes()) or "none"
        raise CommandError(f"unknown scope {scope_id!r} (known: {known})")
    return scope


def _resolved(runtime: Runtime, text: str, *kinds: str) -> tuple[str, str]:
    """Return ``(kind, id)`` of what ``text`` names (see ``goatherd.cli.ids``)."""
    runtime.model.refresh()
    found = resolve(text, candidates(runtime.model), kinds)
    return found.kind, found.id


def _repository(scope: Scope | None) -> Path:
    """Return a git repository that holds the objects of ``scope``'s states."""
    from goatherd.infrastructure.sandbox import GitSandbox

    target = scope.id if scope is not None else "it"
    while scope is not None:
        sandbox = scope.sandbox
        if isinstance(sandbox, GitSandbox):
            return repository_of(sandbox.workdir)
        scope = scope.parent
    raise CommandError(
        f"no git repository holds the files of {target}: {_NO_WORKSPACE}"
    )


@contextmanager
def _scratch(repository: Path) -> Iterator[GitSandbox]:
    """Yield a throwaway worktree of ``repository`` to materialize states in."""
    from goatherd.application.ports import SandboxSpec
    from goatherd.infrastructure.sandbox import new_worktree_sandbox

    with tempfile.TemporaryDirectory(prefix="goatherd-checkout-") as tmp:
        sandbox = new_worktree_sandbox(repository, Path(tmp) / "tree")
        sandbox.create(SandboxSpec())
        try:
            yield sandbox
        finally:
            sandbox.destroy()


def _check_git(state: WorkspaceState, what: str) -> None:
    if state.backend != "git":
        raise CommandError(
            f"{what} is a {state.backend!r} workspace: only git workspaces can be"
            " rebuilt outside the process that recorded them"
        )


def _output_diff(runtime: Runtime, manager: ScopeManager, output_id: str) -> str:
    """Return the output's stored diff, rebuilt from git when it was cut short."""
    output = manager.output(output_id)
    if output is None:
        raise CommandError(f"unknown output {output_id!r}")
    stored = output.diff()
    if stored and not runtime.model.output(output_id).diff_truncated:
        return stored
    try:
        _check_git(output.workspace(), output_id)
        with _scratch(_repository(manager.get(output.scope_id))) as sandbox:
            sandbox.apply(output.workspace())
            text, _files = sandbox.diff(output.baseline(), 0)
    except CommandError as error:
        if not stored:
            raise
        note = f"the stored diff was cut at the blob limit; not rebuilt: {error}"
        print(clean(f"goatherd: {note}"), file=sys.stderr)
        return stored
    return text


def _scope_diff(manager: ScopeManager, scope_id: str) -> str:
    scope = _scope(manager, scope_id)
    baseline = scope.baseline()
    if baseline is None:
        raise CommandError(
            f"{scope_id} is a root scope: it has no base to diff against"
        )
    with _needs_workspace():
        text, _files = unwrap(scope.diff_workspace(baseline))
    return text


def _colored(text: str, mode: str) -> str:
    on = mode == "always" or (
        mode == "auto" and sys.stdout.isatty() and not os.environ.get("NO_COLOR")
    )
    lines = [clean(line) for line in text.splitlines()]
    if on:
        lines = [
            _COLORS[line[0]] + line + "\x1b[0m"
            if line[:1] in _COLORS and not line.startswith(("+++", "---"))
            else line
            for line in lines
        ]
    return "\n".join(lines)


def cmd_diff(args: argparse.Namespace) -> int:
    """Print a unified diff of a scope (live) or an output (sealed)."""
    with recovered(args, sandboxes=True) as (runtime, manager, _store):
        kind, args.target = _resolved(runtime, args.target, SCOPE, OUTPUT)
        if kind == OUTPUT:
            text = _output_diff(runtime, manager, args.target)
        else:
            text = _scope_diff(manager, args.target)
    if args.json:
        emit_json({"target": args.target, "diff": text})
    elif text:
        print(_colored(text, args.color))
    return 0


# ---------------------------------------------------------------- checkout


def _state_of(
    manager: ScopeManager, kind: str, target: str
) -> tuple[WorkspaceState, Scope | None]:
    if kind == OUTPUT:
        output = manager.output(target)
        if output is None:
            raise CommandError(f"unknown output {target!r}")
        return output.workspace(), manager.get(output.scope_id)
    if kind == CHECKPOINT:
        checkpoint = manager.checkpoint(target)
        if checkpoint is None:
            raise CommandError(f"unknown checkpoint {target!r}")
        return checkpoint.workspace, manager.get(checkpoint.scope_id)
    scope = _scope(manager, target)
    with _needs_workspace():
        return unwrap(scope.capture_workspace()), scope


def _copy_tree(source: Path, target: Path) -> int:
    count = 0
    for path in sorted(source.rglob("*")):
        relative = path.relative_to(source)
        if relative.parts[0] == ".git" or path.is_dir():
            continue
        destination = target / relative
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, destination, follow_symlinks=False)
        count += 1
    return count


def _empty_directory(directory: Path) -> None:
    if directory.exists() and (not directory.is_dir() or any(directory.iterdir())):
        raise CommandError(f"{directory} exists and is not an empty directory")
    directory.mkdir(parents=True, exist_ok=True)


def cmd_checkout(args: argparse.Namespace) -> int:
    """Write the files of a scope, output or checkpoint into a new directory."""
    directory = Path(args.directory)
    with recovered(args, sandboxes=True) as (runtime, manager, _store):
        kind, args.target = _resolved(runtime, args.target, SCOPE, OUTPUT, CHECKPOINT)
        state, scope = _state_of(manager, kind, args.target)
        _check_git(state, args.target)
        repository = _repository(scope)
        _empty_directory(directory)
        with _scratch(repository) as sandbox:
            sandbox.apply(state)
            files = _copy_tree(sandbox.workdir, directory)
    summary: dict[str, Any] = {
        "target": args.target,
        "directory": str(directory),
        "files": files,
        "revision": state.revision,
    }
    if args.json:
        emit_json(summary)
    else:
        print(clean(f"checked out {args.target} into {directory} ({files} files)"))
    return 0


# ---------------------------------------------------------------- settle


def cmd_settle(args: argparse.Namespace) -> int:
    """Settle an output with one of the four actions, exactly once."""
    from goatherd.domain.settlement import SettlementAction

    if not args.commit and (args.message is not None or args.author is not None):
        raise CommandError(
            "settle: --message and --author go with --commit (they describe the"
            " commit it makes)",
            EXIT_USAGE,
        )
    with recovered(args, writable=True, sandboxes=True) as (runtime, manager, _store):
        _, args.output = _resolved(runtime, args.output, OUTPUT)
        action = SettlementAction[_VERBS[args.action]].value
        with _needs_workspace():
            unwrap(
                manager.settle(
                    args.output,
                    action,
                    seq=args.resume,
                    commit=args.commit,
                    message=args.message,
                    author=args.author,
                )
            )
        output = manager.output(args.output)
        assert output is not None
        summary: dict[str, Any] = {
            "output": output.id,
            "scope": output.scope_id,
            "state": output.state.value,
        }
        if args.commit:
            summary["commit"] = output.commit()
    if args.json:
        emit_json(summary)
    elif args.commit:
        state, sha = summary["state"], summary["commit"]
        print(clean(f"settled {args.output}: {state}; committed {sha}"))
    else:
        print(clean(f"settled {args.output}: {summary['state']}"))
    return 0


def cmd_discard(args: argparse.Namespace) -> int:
    """Discard an active child scope (its worktree, if any, is removed)."""
    with recovered(args, writable=True, sandboxes=True) as (runtime, manager, _store):
        _, args.scope = _resolved(runtime, args.scope, SCOPE)
        scope = _scope(manager, args.scope)
        with _needs_workspace():
            unwrap(manager.discard(scope.id))
        state = scope.state.value
    if args.json:
        emit_json({"scope": args.scope, "state": state})
    else:
        print(clean(f"discarded {args.scope}"))
    return 0


def _restored_already(
    args: argparse.Namespace, scope_id: str, released: SnapshotReleasedError
) -> int:
    """Report a resumed restore that committed already (its snapshot is gone)."""
    if args.json:
        emit_json(
            {
                "checkpoint": args.checkpoint,
                "scope": scope_id,
                "already": True,
                "snapshot_digest": released.digest,
            }
        )
    else:
        print(
            clean(
                f"restored {args.checkpoint} onto {scope_id} already (attempt"
                f" {args.resume}); its snapshot {released.digest} was released"
            )
        )
    return 0


def cmd_restore(args: argparse.Namespace) -> int:
    """Restore a checkpoint onto its scope's workspace (single use).

    ``--resume SEQ`` is the attempt that claimed it: it re-applies the
    recorded state and records the restore once, or returns the recorded
    outcome when that attempt's restore committed already.
    """
    from goatherd.domain.runtime_errors import SnapshotReleasedError

    with recovered(args, writable=True, sandboxes=True) as (runtime, manager, _store):
        _, args.checkpoint = _resolved(runtime, args.checkpoint, CHECKPOINT)
        checkpoint = manager.checkpoint(args.checkpoint)
        if checkpoint is None:
            raise CommandError(f"unknown checkpoint {args.checkpoint!r}")
        with _needs_workspace():
            restored = manager.restore_checkpoint(args.checkpoint, seq=args.resume)
            failure = restored.failure() if isinstance(restored, Failure) else None
            if (
                isinstance(failure, SnapshotReleasedError)
                and args.resume is not None
                and not args.snapshot_to
            ):
                return _restored_already(args, checkpoint.scope_id, failure)
            snapshot = unwrap(restored)
    if args.snapshot_to:
        Path(args.snapshot_to).write_bytes(snapshot)
    result = {
        "checkpoint": args.checkpoint,
        "scope": checkpoint.scope_id,
        "snapshot_bytes": len(snapshot),
    }
    if args.json:
        emit_json(result)
    else:
        print(
            clean(
                f"restored {args.checkpoint} onto {checkpoint.scope_id}"
                f" (snapshot {len(snapshot)} bytes)"
            )
        )
    return 0
