"""``goatherd recover DB``: scopes, checkpoints and outputs as recovery sees them."""

from __future__ import annotations

import argparse
from typing import Any

from goatherd.application import RecoveryStats, Scope, ScopeManager
from goatherd.cli.common import unwrap
from goatherd.cli.output import emit_json, short_id
from goatherd.cli.text import clean
from goatherd.infrastructure import open_runtime

__all__ = [
    "checkpoints_json",
    "cmd_recover",
    "print_checkpoints",
    "print_tree",
    "scope_json",
]


def scope_json(manager: ScopeManager, scope: Scope) -> dict[str, Any]:
    """Return one scope, its children's ids and its outputs as JSON values."""
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


def checkpoints_json(manager: ScopeManager) -> list[dict[str, Any]]:
    """Return every unpruned checkpoint of every listed scope, scope by scope."""
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
    with open_runtime(args.db, bus=False, read_only=True) as runtime:
        manager = unwrap(runtime.recover(None, stats))
        scopes = [scope_json(manager, scope) for scope in manager.all_scopes()]
        checkpoints = checkpoints_json(manager)
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
                "unreadable": list(stats.unreadable),
            }
        )
        return 0
    print_tree(scopes)
    print_checkpoints(checkpoints)
    for line in stats.unreadable:
        print(clean(f"unreadable (skipped; its scope refuses commands): {line}"))
    print(
        f"scanned {stats.fork_records} fork, {stats.terminal_records} terminal, "
        f"{stats.sealed_outputs} sealed records and {stats.checkpoint_blobs} "
        f"checkpoint blobs in {stats.scan_duration * 1000:.1f} ms"
    )
    return 0


def print_tree(scopes: list[dict[str, Any]]) -> None:
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
        print(clean(f"  {prefix}{branch}{scope['id']}  {scope['state']}{fork}"))
        for out in scope["outputs"]:
            pad = prefix + ("" if top else ("    " if last else "│   "))
            paths = ", ".join(c["path"] for c in out["changes"]) or "no changes"
            line = f"  {pad}    output {out['id']}  {out['state']}  ({paths})"
            print(clean(line))
        kids = [by_id[c] for c in scope["children"] if c in by_id]
        for index, child in enumerate(kids):
            child_prefix = prefix + ("" if top else ("    " if last else "│   "))
            show(child, child_prefix, index == len(kids) - 1, False)

    for root in roots:
        show(root, "", True, True)


def print_checkpoints(checkpoints: list[dict[str, Any]]) -> None:
    print("checkpoints")
    if not checkpoints:
        print("  (none restorable)")
    for cp in checkpoints:
        line = (
            f"  {cp['id']}  {cp['state']}  scope {cp['scope_id']}"
            f"  revision {cp['revision'][:12] or '-'}"
            f"  snapshot {cp['snapshot_bytes']} bytes"
        )
        print(clean(line))
