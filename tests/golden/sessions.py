"""Run one scripted runtime session and print its trace as a golden fixture.

Runs against whichever goatherd is importable (``record.py`` points
PYTHONPATH at an older checkout for ``goatherd_0_1``), so the same script
records what each version of the runtime writes. Deterministic: memory
sandboxes and a fixed intent sequence.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from sqlalchemy import select

from goatherd.application import IntentSequence, SandboxSpec
from goatherd.infrastructure.sandbox.memory import MemorySandbox, MemorySandboxConfig
from goatherd.infrastructure.store import SQLiteTraceStore
from goatherd.infrastructure.store.schema import checkpoint_snapshots

START = 1_000


def _manager(store: SQLiteTraceStore) -> Any:
    sequence = IntentSequence(START)
    try:
        from goatherd.infrastructure.bootstrap import scope_manager_for
    except ImportError:  # goatherd 0.1: a manager over per-path event streams
        # The names of that version, which this version no longer has.
        from goatherd.application import ScopeManager
        from goatherd.infrastructure.eventstore import (  # type: ignore[attr-defined]
            TraceEventStore,
        )

        return ScopeManager(TraceEventStore(store), sequence=sequence)  # type: ignore[call-arg]
    return scope_manager_for(store, sequence=sequence)


def _sandbox(repository: Any = None) -> MemorySandbox:
    if repository is not None:
        sb = MemorySandbox(MemorySandboxConfig(repository=repository))
    else:
        sb = MemorySandbox(MemorySandboxConfig(files={"readme.txt": b"hello\n"}))
    sb.create(SandboxSpec())
    return sb


def session(mgr: Any) -> dict[str, Any]:
    main = _sandbox()
    root = mgr.create("agent:main", main).unwrap()
    note = mgr.fork(root.id, "agent:main:note").unwrap()
    main.write_file("notes.txt", b"from the shared child\n")
    mgr.merge(note.id).unwrap()
    outs = []
    for index in range(2):
        wt = _sandbox(main.repository)
        wt.apply(main.capture())
        child = mgr.fork_isolated(root.id, f"agent:main:try-{index}", None, wt).unwrap()
        wt.write_file(f"answer-{index}.txt", f"{index}\n".encode())
        outs.append(mgr.seal(child.id).unwrap())
    mgr.settle(outs[1].id, "selected").unwrap()
    mgr.settle(outs[0].id, "discarded").unwrap()
    chat = mgr.create_checkpoint(root.id, b"the conversation").unwrap()
    bare = mgr.create_checkpoint(root.id, b"").unwrap()
    main.write_file("readme.txt", b"changed\n")
    mgr.restore_checkpoint(bare.id).unwrap()
    stray = mgr.fork(root.id, "agent:main:stray").unwrap()
    mgr.halt(stray.id).unwrap()
    return {"outputs": outs, "checkpoints": [chat, bare]}


def export(store: SQLiteTraceStore) -> tuple[list[dict[str, Any]], dict[str, str]]:
    batches: list[dict[str, Any]] = []
    names: dict[str, str] = {}
    for entry in store.read_log(-1, 100_000):
        record = entry.record
        if not batches or batches[-1]["intent"] != entry.append_intent_id:
            batches.append({"intent": entry.append_intent_id, "groups": []})
        groups = batches[-1]["groups"]
        owner = record.trace_owner_id
        if not groups or groups[-1]["owner"] != owner:
            groups.append({"owner": owner, "records": []})
        record_id = record.record_id
        name = names.setdefault(record_id, f"r{len(names)}")
        out: dict[str, Any] = {
            "mode": record.envelope.mode,
            "schema": record.envelope.schema_ref,
            "payload": record.payload,
            "kind": record.view.kind_label if record.view else "",
            "name": name,
        }
        parents = record.envelope.caused_by_record_ids
        if parents:
            out["caused_by"] = [f"@{names[p]}" for p in parents]
        groups[-1]["records"].append(out)
    return batches, names


def legacy_rows(store: SQLiteTraceStore) -> list[dict[str, Any]]:
    rows = []
    with store.engine.connect() as conn:
        for row in conn.execute(select(checkpoint_snapshots)):
            rows.append(
                {
                    "checkpoint_id": row.checkpoint_id,
                    "scope_id": row.scope_id,
                    "seq": row.seq,
                    "state": json.loads(row.state_json),
                    "snapshot_hex": bytes(row.snapshot).hex(),
                    "created_at_unixnano": row.created_at_unixnano,
                }
            )
    return rows


def expected(mgr: Any, made: dict[str, Any], legacy: bool) -> dict[str, Any]:
    scopes = [
        {
            "owner": s.owner_id,
            "parent": None if s.parent is None else s.parent.owner_id,
            "state": s.state.value,
            "children": [c.owner_id for c in s.children],
        }
        for s in mgr.all_scopes()
    ]
    checkpoints = []
    for cp in made["checkpoints"]:
        view = mgr.checkpoint(cp.id)
        state = view.state.value if view is not None else "used"
        restorable = state == "valid" and (not legacy or not cp.snapshot)
        checkpoints.append({"id": cp.id, "state": state, "restorable": restorable})
    outputs = [{"id": o.id, "state": o.state.value} for o in made["outputs"]]
    return {
        "recover": "ok",
        "scopes": scopes,
        "checkpoints": checkpoints,
        "outputs": outputs,
    }


def main(name: str) -> None:
    with (
        tempfile.TemporaryDirectory() as tmp,
        SQLiteTraceStore(Path(tmp) / "t.db") as store,
    ):
        mgr = _manager(store)
        made = session(mgr)
        legacy = name == "goatherd_0_1"
        batches, _ = export(store)
        fixture = {
            "description": (
                "A session recorded by goatherd 0.1 (the code of a1ccf92): roots"
                " leave no record, claims sit on the output's path only,"
                " checkpoint records carry no state or snapshot digest (the"
                " checkpoint table holds them), sealed outputs no diff."
                if legacy
                else "A session recorded by the runtime that folds the whole log."
            ),
            "batches": batches,
            "legacy_checkpoints": legacy_rows(store) if legacy else [],
            "expected": expected(mgr, made, legacy),
        }
    print(json.dumps(fixture))


if __name__ == "__main__":
    main(sys.argv[1])
