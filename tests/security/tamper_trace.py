"""A small trace that fills every trace table, for the tamper suite.

Plain appends (a tool call, its result on a child path, a note), a published
frontier, a runtime scope with checkpoints (their records and snapshot blobs)
and a sealed output (its diff blob), a legacy checkpoint row, and a
materialization whose captures were appended under its intent with its
ledger row.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import goatherd
from goatherd.application import SandboxSpec
from goatherd.domain.events.checkpoint import CheckpointCreated
from goatherd.domain.materialization import (
    MaterializationOutcome,
    MaterializationReceipt,
)
from goatherd.domain.records import (
    AppendBatch,
    AppendGroup,
    CutSpec,
    RecordDraft,
    RetainedContextDraft,
)
from goatherd.domain.workspace import WorkspaceState
from goatherd.infrastructure.bootstrap import scope_manager_for
from goatherd.infrastructure.sandbox import MemorySandbox, MemorySandboxConfig
from goatherd.infrastructure.store import SqlAlchemyTraceStore

CTX = goatherd.TRUSTED_APPEND_CONTEXT


@dataclass(frozen=True)
class Ids:
    """The ids the tamper cases aim at."""

    call: str
    result: str
    note: str
    frontier: str
    produced: str
    checkpoint_a: str
    checkpoint_b: str
    call_context: str


def draft(schema: str, payload: dict[str, object], kind: str = "") -> RecordDraft:
    return RecordDraft("capture", schema, payload, kind_label=kind)


def build(store: SqlAlchemyTraceStore) -> Ids:
    """Fill ``store``; return the ids of interest."""
    call = store.append(
        CTX,
        AppendBatch(
            "demo:call:1",
            (
                AppendGroup(
                    "agent:main",
                    fact_drafts=(
                        RecordDraft(
                            "declaration",
                            "yaah.tool.bash.v1",
                            {"cmd": "pytest -q", "n": 1.5},
                            kind_label="bash",
                        ),
                    ),
                ),
            ),
        ),
    )
    result = store.append(
        CTX,
        AppendBatch(
            "demo:result:1",
            (
                AppendGroup(
                    "agent:main:sub",
                    causal_parents=call.fact_ids,
                    fact_drafts=(
                        draft("yaah.tool.bash.applied.v1", {"success": True}),
                    ),
                ),
                AppendGroup("other", fact_drafts=(draft("note.v1", {"text": "hi"}),)),
            ),
        ),
    )
    cut = store.publish_cut(
        CTX, CutSpec("frontier:demo", "agent:main", call.fact_ids[0])
    )
    produced = store.append(
        CTX,
        AppendBatch(
            "mat:1",
            (
                AppendGroup(
                    "agent:main:effects",
                    retained_context=RetainedContextDraft(substrate_ref="files.v1"),
                    causal_parents=call.fact_ids,
                    fact_drafts=(draft("files.written.v1", {"path": "a.txt"}),),
                ),
            ),
        ),
    )
    receipt = MaterializationReceipt(
        outcome=MaterializationOutcome.SUCCESS,
        substrate_ref="files.v1",
        target_record_ids=call.fact_ids,
        produced_record_ids=produced.fact_ids,
    )
    store.record_completed_materialization("mat:1", "ab" * 32, receipt.to_json())
    _runtime(store)
    a, b = _legacy_checkpoints(store)
    return Ids(
        call=call.fact_ids[0],
        result=result.fact_ids[0],
        note=result.fact_ids[1],
        frontier=str(cut.created_by_fact_id),
        produced=produced.fact_ids[0],
        checkpoint_a=a,
        checkpoint_b=b,
        call_context=call.context_receipts[0],
    )


def _legacy_checkpoints(store: SqlAlchemyTraceStore) -> tuple[str, str]:
    """Two checkpoints as runtimes before content-addressed blobs recorded them.

    Their record carries the state digest only; the state and the snapshot
    live in the legacy ``checkpoint_snapshots`` table.
    """
    ids = []
    for seq, text in ((1, "one"), (2, "two")):
        checkpoint_id = f"cp:agent:old:{seq}"
        state = WorkspaceState("memory", f"r{seq}", {"files": {"a.txt": text}})
        store.append(
            CTX,
            AppendBatch(
                f"agent:old:checkpoint:{seq}",
                (
                    AppendGroup(
                        checkpoint_id,
                        fact_drafts=(
                            RecordDraft(
                                "declaration",
                                CheckpointCreated.SCHEMA,
                                {
                                    "checkpoint_id": checkpoint_id,
                                    "backend": state.backend,
                                    "revision": state.revision,
                                    "state_digest": state.digest(),
                                    "has_snapshot": True,
                                },
                                kind_label="checkpoint:created",
                            ),
                        ),
                    ),
                ),
            ),
        )
        store.persist_checkpoint_blob(
            checkpoint_id,
            "scope:agent:old",
            seq,
            state,
            f"conversation-{seq}".encode(),
            time.time_ns(),
        )
        ids.append(checkpoint_id)
    return ids[0], ids[1]


def _runtime(store: SqlAlchemyTraceStore) -> None:
    manager = scope_manager_for(store)
    sandbox = MemorySandbox(MemorySandboxConfig(files={"a.txt": b"1\n"}))
    sandbox.create(SandboxSpec())
    scope = manager.create("agent:rt", sandbox).unwrap()
    first = manager.create_checkpoint(scope.id, b"conversation-1", seq=5).unwrap()
    sandbox.write_file("a.txt", b"2\n")
    second = manager.create_checkpoint(scope.id, b"conversation-2", seq=6).unwrap()
    for seq in range(7, 10):
        sandbox.write_file("a.txt", f"{seq}\n".encode())
        manager.create_checkpoint(scope.id, b"", seq=seq).unwrap()
    child = manager.fork(scope.id, "agent:rt:child", seq=10).unwrap()
    sandbox.write_file("b.txt", b"sealed\n")
    manager.seal(child.id, seq=11).unwrap()
    manager.prune_checkpoints(scope.id)  # releases the snapshots of 5-9
    del first, second
    sandbox.write_file("a.txt", b"12\n")
    manager.create_checkpoint(scope.id, b"kept-12", seq=12).unwrap()
    sandbox.write_file("a.txt", b"13\n")
    manager.create_checkpoint(scope.id, b"kept-13", seq=13).unwrap()
