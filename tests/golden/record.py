"""Write the recorded traces (run once per NEW fixture; committed files never change).

``python -m tests.golden.record NAME`` writes ``tests/golden/NAME.json`` and
refuses to overwrite one. The hand-written traces spell out older writers'
layouts record by record; ``current_runtime`` and ``goatherd_0_1`` record a
session of a runtime (``goatherd_0_1`` runs the code of commit a1ccf92, the
last one before the runtime folded the whole log; it needs
``GOATHERD_0_1=<checkout of a1ccf92>``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from goatherd.domain.workspace import WorkspaceState

HERE = Path(__file__).resolve().parent
GIT_STATE = {"backend": "git", "revision": "1" * 40, "data": {"head": "1" * 40}}


def rec(
    mode: str,
    schema: str,
    payload: dict[str, Any],
    *,
    kind: str = "",
    name: str = "",
    caused_by: tuple[str, ...] = (),
) -> dict[str, Any]:
    out: dict[str, Any] = {"mode": mode, "schema": schema, "payload": payload}
    if kind:
        out["kind"] = kind
    if name:
        out["name"] = name
    if caused_by:
        out["caused_by"] = list(caused_by)
    return out


def batch(intent: str, *groups: tuple[str, list[dict[str, Any]]]) -> dict[str, Any]:
    return {
        "intent": intent,
        "groups": [{"owner": owner, "records": records} for owner, records in groups],
    }


def seed_layout() -> dict[str, Any]:
    """The Go seed's layout: lifecycle records on ONE path, no parent_owner."""
    fork = "goatherd.scope.forked.v1"

    def forked(child: str, **extra: Any) -> dict[str, Any]:
        return rec("declaration", fork, {"child_owner": child, **extra}, name=child)

    def ended(schema: str, child: str) -> dict[str, Any]:
        payload = {"child_owner": child, "child_scope": f"scope:{child}"}
        return rec("capture", schema, payload, caused_by=(f"@{child}",))

    state = {"backend": "git", "revision": "2" * 40, "data": {"head": "2" * 40}}
    # The seed records real digests (a record must agree with itself).
    state_digest = WorkspaceState("git", "3" * 40, {"head": "3" * 40}).digest()
    baseline_digest = WorkspaceState("git", "2" * 40, {"head": "2" * 40}).digest()
    sealed = {
        "scope": "scope:agent:main:d",
        "backend": "git",
        "revision": "3" * 40,
        "state_digest": state_digest,
        "baseline_digest": baseline_digest,
        "change_count": 1,
        "state": {"backend": "git", "revision": "3" * 40, "data": {"head": "3" * 40}},
        "baseline": state,
        "changes": [{"path": "answer.txt", "kind": "create"}],
    }
    return {
        "description": (
            "The Go seed's record layout: forks, merges and discards sit on the"
            " PARENT's path only and name no parent; the root never wrote a"
            " record; checkpoints and outputs sit on their scope's path only; the"
            " checkpoint table holds the restorable halves."
        ),
        "batches": [
            batch(
                "agent:main:fork:agent:main:a:1",
                ("agent:main", [forked("agent:main:a")]),
            ),
            batch(
                "agent:main:fork:agent:main:b:2",
                (
                    "agent:main",
                    [
                        forked(
                            "agent:main:b",
                            isolated=True,
                            sandbox_backend="git",
                            sandbox_path="/work/wt/agent-main-b",
                        )
                    ],
                ),
            ),
            batch(
                "agent:main:a:fork:agent:main:a:x:3",
                ("agent:main:a", [forked("agent:main:a:x")]),
            ),
            batch(
                "agent:main:a:merge:agent:main:a:x:4",
                ("agent:main:a", [ended("goatherd.scope.merged.v1", "agent:main:a:x")]),
            ),
            batch(
                "agent:main:discard:agent:main:b:5",
                ("agent:main", [ended("goatherd.scope.discarded.v1", "agent:main:b")]),
            ),
            batch(
                "agent:main:fork:agent:main:c:6",
                ("agent:main", [forked("agent:main:c")]),
            ),
            batch(
                "agent:main:c:halt:7",
                (
                    "agent:main:c",
                    [rec("declaration", "goatherd.supervisor.halt.v1", {})],
                ),
            ),
            batch(
                "agent:main:fork:agent:main:d:8",
                (
                    "agent:main",
                    [
                        forked(
                            "agent:main:d",
                            isolated=True,
                            sandbox_backend="git",
                            sandbox_path="/work/wt/agent-main-d",
                            baseline_digest=baseline_digest,
                            baseline=state,
                        )
                    ],
                ),
            ),
            batch(
                "agent:main:checkpoint:9",
                (
                    "agent:main",
                    [
                        rec(
                            "declaration",
                            "goatherd.checkpoint.created.v2",
                            {
                                "checkpoint_id": "cp:agent:main:9",
                                "backend": "git",
                                "revision": GIT_STATE["revision"],
                                "state_digest": _digest(GIT_STATE),
                                "has_snapshot": False,
                            },
                        )
                    ],
                ),
            ),
            batch(
                "agent:main:checkpoint:10",
                (
                    "agent:main",
                    [
                        rec(
                            "declaration",
                            "goatherd.checkpoint.created.v2",
                            {
                                "checkpoint_id": "cp:agent:main:10",
                                "backend": "git",
                                "revision": GIT_STATE["revision"],
                                "state_digest": _digest(GIT_STATE),
                                "has_snapshot": True,
                            },
                        )
                    ],
                ),
            ),
            batch(
                "agent:main:d:seal:11",
                (
                    "agent:main:d",
                    [
                        rec(
                            "declaration",
                            "goatherd.run_output.sealed.v1",
                            {"output_id": "out:agent:main:d:11", **sealed},
                            name="sealed-11",
                        )
                    ],
                ),
            ),
            batch(
                "agent:main:d:settle:released:12",
                (
                    "agent:main:d",
                    [
                        rec(
                            "capture",
                            "goatherd.run_output.settled.v1",
                            {
                                "output_id": "out:agent:main:d:11",
                                "action": "released",
                                "state_digest": state_digest,
                            },
                            caused_by=("@sealed-11",),
                        )
                    ],
                ),
            ),
            batch(
                "agent:main:d:seal:13",
                (
                    "agent:main:d",
                    [
                        rec(
                            "declaration",
                            "goatherd.run_output.sealed.v1",
                            {"output_id": "out:agent:main:d:13", **sealed},
                        )
                    ],
                ),
            ),
        ],
        "legacy_checkpoints": [
            _legacy_row("cp:agent:main:9", "scope:agent:main", 9, b""),
            _legacy_row("cp:agent:main:10", "scope:agent:main", 10, b"chat so far"),
        ],
        "expected": {
            "recover": "ok",
            "scopes": [
                _scope(
                    "agent:main",
                    None,
                    "active",
                    ["agent:main:a", "agent:main:b", "agent:main:c", "agent:main:d"],
                ),
                _scope("agent:main:a", "agent:main", "active", ["agent:main:a:x"]),
                _scope("agent:main:b", "agent:main", "discarded", []),
                _scope("agent:main:a:x", "agent:main:a", "merged", []),
                _scope("agent:main:c", "agent:main", "discarded", []),
                _scope("agent:main:d", "agent:main", "active", []),
            ],
            "checkpoints": [
                {"id": "cp:agent:main:9", "state": "valid", "restorable": True},
                {"id": "cp:agent:main:10", "state": "valid", "restorable": False},
            ],
            "outputs": [
                {"id": "out:agent:main:d:11", "state": "released"},
                {"id": "out:agent:main:d:13", "state": "unconsumed"},
            ],
        },
    }


def v1_payloads() -> dict[str, Any]:
    """Retired refs: shepherd.* names, git-specific v1 checkpoint and tree records."""
    return {
        "description": (
            "Records under retired refs: shepherd.* names of runtime records,"
            " goatherd.checkpoint.created/restored.v1 and goatherd.tree.*.v1 with"
            " git's stash_sha/head_sha instead of a backend-neutral state."
        ),
        "batches": [
            batch(
                "root:fork:root:a:1",
                (
                    "root",
                    [
                        rec(
                            "declaration",
                            "shepherd.scope.forked.v1",
                            {"child_owner": "root:a"},
                            name="fork-a",
                        )
                    ],
                ),
            ),
            batch(
                "root:fork:root:b:2",
                (
                    "root",
                    [
                        rec(
                            "declaration",
                            "shepherd.scope.forked.v1",
                            {"child_owner": "root:b"},
                            name="fork-b",
                        )
                    ],
                ),
            ),
            batch(
                "root:tree:3",
                (
                    "root",
                    [
                        rec(
                            "declaration",
                            "goatherd.tree.captured.v1",
                            {"head_sha": "a" * 40, "stash_sha": "b" * 40},
                        )
                    ],
                ),
            ),
            batch(
                "root:checkpoint:4",
                (
                    "root",
                    [
                        rec(
                            "declaration",
                            "goatherd.checkpoint.created.v1",
                            {
                                "checkpoint_id": "cp:root:4",
                                "stash_sha": "b" * 40,
                                "head_sha": "a" * 40,
                                "has_snapshot": True,
                            },
                        )
                    ],
                ),
            ),
            batch(
                "root:checkpoint:5",
                (
                    "root",
                    [
                        rec(
                            "declaration",
                            "shepherd.checkpoint.created.v1",
                            {
                                "checkpoint_id": "cp:root:5",
                                "stash_sha": "c" * 40,
                                "head_sha": "a" * 40,
                                "has_snapshot": False,
                            },
                        )
                    ],
                ),
            ),
            batch(
                "root:restore:5",
                (
                    "root",
                    [
                        rec(
                            "capture",
                            "goatherd.checkpoint.restored.v1",
                            {
                                "checkpoint_id": "cp:root:5",
                                "stash_sha": "c" * 40,
                                "head_sha": "a" * 40,
                            },
                        )
                    ],
                ),
            ),
            batch(
                "root:merge:root:a:6",
                (
                    "root",
                    [
                        rec(
                            "capture",
                            "shepherd.scope.merged.v1",
                            {"child_owner": "root:a", "child_scope": "scope:root:a"},
                            caused_by=("@fork-a",),
                        )
                    ],
                ),
            ),
            batch(
                "root:b:halt:7",
                ("root:b", [rec("declaration", "shepherd.supervisor.halt.v1", {})]),
            ),
        ],
        "expected": {
            "recover": "ok",
            "scopes": [
                _scope("root", None, "active", ["root:a", "root:b"]),
                _scope("root:a", "root", "merged", []),
                _scope("root:b", "root", "discarded", []),
            ],
            "checkpoints": [
                {"id": "cp:root:4", "state": "valid", "restorable": False},
                {"id": "cp:root:5", "state": "used", "restorable": False},
            ],
            "outputs": [],
        },
    }


def inconsistent() -> dict[str, Any]:
    """A trace that contradicts itself: one child both merged and discarded."""
    fork = rec(
        "declaration", "goatherd.scope.forked.v1", {"child_owner": "r:c"}, name="fork"
    )
    end = {"child_owner": "r:c", "child_scope": "scope:r:c"}
    return {
        "description": (
            "Deliberately contradictory: the same child is recorded merged and"
            " discarded. Every reader must refuse it, naming the owner."
        ),
        "batches": [
            batch("r:fork:r:c:1", ("r", [fork])),
            batch(
                "r:merge:r:c:2",
                (
                    "r",
                    [
                        rec(
                            "capture",
                            "goatherd.scope.merged.v1",
                            end,
                            caused_by=("@fork",),
                        )
                    ],
                ),
            ),
            batch(
                "r:discard:r:c:3",
                (
                    "r",
                    [
                        rec(
                            "capture",
                            "goatherd.scope.discarded.v1",
                            end,
                            caused_by=("@fork",),
                        )
                    ],
                ),
            ),
        ],
        "expected": {
            "recover": "error: owner r:c is recorded both merged and discarded",
            "scopes": [
                _scope("r", None, "active", ["r:c"]),
                _scope("r:c", "r", "merged", [], inconsistent=True),
            ],
            "checkpoints": [],
            "outputs": [],
        },
    }


def _scope(
    owner: str,
    parent: str | None,
    state: str,
    children: list[str],
    *,
    inconsistent: bool = False,
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "owner": owner,
        "parent": parent,
        "state": state,
        "children": children,
    }
    if inconsistent:
        out["inconsistent"] = True
    return out


def _digest(state: dict[str, Any]) -> str:
    from goatherd.domain import WorkspaceState

    return WorkspaceState.from_json(state).digest()


def _legacy_row(cp_id: str, scope_id: str, seq: int, snapshot: bytes) -> dict[str, Any]:
    return {
        "checkpoint_id": cp_id,
        "scope_id": scope_id,
        "seq": seq,
        "state": GIT_STATE,
        "snapshot_hex": snapshot.hex(),
        "created_at_unixnano": 1_764_547_200_000_000_000 + seq,
    }


BUILDERS = {
    "seed_layout": seed_layout,
    "v1_payloads": v1_payloads,
    "inconsistent": inconsistent,
}


def main(argv: list[str]) -> None:
    for name in argv:
        target = HERE / f"{name}.json"
        if target.exists():
            raise SystemExit(f"{target} exists: fixtures never change; add a new one")
        data = BUILDERS[name]() if name in BUILDERS else _recorded(name)
        target.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
        print(f"wrote {target}")


def _recorded(name: str) -> dict[str, Any]:
    """Run a session script (``sessions.py``) under some code; return its trace."""
    env = dict(os.environ)
    if name == "goatherd_0_1":
        env["PYTHONPATH"] = env["GOATHERD_0_1"]
    done = subprocess.run(
        [sys.executable, str(HERE / "sessions.py"), name],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    data: dict[str, Any] = json.loads(done.stdout)
    return data


if __name__ == "__main__":
    main(sys.argv[1:])
