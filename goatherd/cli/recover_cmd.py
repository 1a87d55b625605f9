"""``goatherd recover DB``: scopes, checkpoints and outputs as recovery sees them."""

from __future__ import annotations

import argparse
from typing import Any

from returns.result import Failure

from goatherd.application import (
    RecoverOptions,
    RecoveryStats,
    Scope,
    ScopeManager,
    recover_scopes,
)
from goatherd.cli.common import (
    Subparsers,
    add_db_argument,
    add_json_flag,
    open_read_only,
)
from goatherd.cli.output import emit_json, short_id
from goatherd.infrastructure.bootstrap import runtime_context_for

__all__ = ["register"]


def register(sub: Subparsers[argparse.ArgumentParser]) -> None:
    """Register the recover subcommand."""
    recover = sub.add_parser(
        "recover",
        help="show the scope tree, checkpoints and outputs recovered from a trace",
    )
    add_db_argument(recover)
    add_json_flag(recover)
    recover.set_defaults(func=cmd_recover)


def _scope_json(manager: ScopeManager, scope: Scope) -> dict[str, Any]:
    parent = scope.parent
    return {
        "id": scope.id,
        "state": scope.state.value,
        "parent": None if parent is None else parent.id,
        "fork_point": scope.fork_point,
        "children": [child.id for child in scope.children],
        "outputs": [
            {
                "id": out.id,
                "state": out.state.value,
                "changes": out.changes(),
            }
            for out in manager.outputs_for_scope(scope.id)
        ],
    }


def _checkpoints_json(manager: ScopeManager) -> list[dict[str, Any]]:
    return [
        {
            "id": checkpoint.id,
            "scope_id": checkpoint.scope_id,
            "state": checkpoint.state.value,
            "revision": checkpoint.workspace.revision,
            "snapshot_bytes": len(checkpoint.snapshot),
        }
        for scope in manager.all_scopes()
        for checkpoint in manager.checkpoints_for_scope(scope.id)
    ]


def cmd_recover(args: argparse.Namespace) -> int:
    """Recover the runtime's registry from the trace (causally: no sandboxes)."""
    stats = RecoveryStats()
    with open_read_only(args.db) as store:
        context = runtime_context_for(store)
        result = recover_scopes(context, RecoverOptions(resolver=None, stats=stats))
        if isinstance(result, Failure):
            raise result.failure()
        manager = result.unwrap()
        scopes = [_scope_json(manager, scope) for scope in manager.all_scopes()]
        checkpoints = _checkpoints_json(manager)
    if args.json:
        emit_json(
            {
                "scopes": scopes,
                "checkpoints": checkpoints,
                "stats": {
                    "fork_records": stats.fork_records,
                    "terminal_records": stats.terminal_records,
                    "checkpoint_blobs": stats.checkpoint_blobs,
                    "sealed_outputs": stats.sealed_outputs,
                    "scan_seconds": round(stats.scan_duration, 6),
                },
            }
        )
        return 0
    _print_tree(scopes)
    _print_checkpoints(checkpoints)
    print(
        f"scanned {stats.fork_records} fork, {stats.terminal_records} terminal, "
        f"{stats.sealed_outputs} sealed records and {stats.checkpoint_blobs} "
        f"checkpoint blobs in {stats.scan_duration * 1000:.1f} ms"
    )
    return 0


def _print_tree(scopes: list[dict[str, Any]]) -> None:
    by_id = {scope["id"]: scope for scope in scopes}
    roots = [scope for scope in scopes if scope["parent"] not in by_id]
    print("scopes")
    if not scopes:
        print("  (none: no scope ever forked, checkpointed or sealed in this trace)")

    def show(scope: dict[str, Any], prefix: str, last: bool, top: bool) -> None:
        branch = "" if top else ("└── " if last else "├── ")
        fork = (
            f"  forked at {short_id(scope['fork_point'])}"
            if scope["fork_point"]
            else ""
        )
        print(f"  {prefix}{branch}{scope['id']}  {scope['state']}{fork}")
        for out in scope["outputs"]:
            pad = prefix + ("" if top else ("    " if last else "│   "))
            paths = ", ".join(c["path"] for c in out["changes"]) or "no changes"
            print(f"  {pad}    output {out['id']}  {out['state']}  ({paths})")
        kids = [by_id[c] for c in scope["children"] if c in by_id]
        for index, child in enumerate(kids):
            child_prefix = prefix + ("" if top else ("    " if last else "│   "))
            show(child, child_prefix, index == len(kids) - 1, False)

    for root in roots:
        show(root, "", True, True)


def _print_checkpoints(checkpoints: list[dict[str, Any]]) -> None:
    print("checkpoints")
    if not checkpoints:
        print("  (none restorable)")
    for cp in checkpoints:
        print(
            f"  {cp['id']}  {cp['state']}  scope {cp['scope_id']}"
            f"  revision {cp['revision'][:12] or '-'}"
            f"  snapshot {cp['snapshot_bytes']} bytes"
        )
