"""materialize_vectors_v0.json through the real orchestrator and store.

Procedure of the conformance README: the declarations are appended with the
vector context, materialized through ``materialize`` with the recorded
request, and the receipt, the produced capture and its witness must equal the
reference's byte for byte. The replay sequence runs across a store restart.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from goatherd.application import EchoSubstrate, SubstrateRegistry
from goatherd.application.materialize import materialize
from goatherd.domain import (
    AppendBatch,
    AppendContext,
    AppendGroup,
    MaterializationOutcome,
    MaterializationReceipt,
    MaterializationRequest,
    MaterializationResult,
    Record,
    RecordDraft,
    RetainedContextDraft,
)
from goatherd.infrastructure.store import SQLiteTraceStore
from goatherd.infrastructure.substrates import SQLiteKVSubstrate
from tests.conformance.vectors import load_vectors

VECTORS = load_vectors("materialize_vectors_v0.json")
APPEND_CONTEXT = AppendContext(
    actor_ref="runtime:vector",
    presented_witness_refs=("trusted:internal",),
    schema_version_set="shepherd2-slice-a",
    trust_mode="internal",
)
MATERIALIZE_CONTEXT = APPEND_CONTEXT.to_operation_context("materialize")
READ = APPEND_CONTEXT  # reads need no authority for payloads


def declare(
    store: SQLiteTraceStore,
    intent: str,
    owner: str,
    substrate_ref: str,
    drafts: Sequence[dict[str, Any]],
) -> tuple[str, ...]:
    group = AppendGroup(
        trace_owner_id=owner,
        retained_context=RetainedContextDraft(
            substrate_ref=substrate_ref, containment="contained"
        ),
        fact_drafts=tuple(
            RecordDraft(
                mode=d["mode"],
                schema_ref=d["schema_ref"],
                payload=d["payload"],
                kind_label=d["kind_label"],
            )
            for d in drafts
        ),
    )
    return store.append(APPEND_CONTEXT, AppendBatch(intent, (group,))).fact_ids


def request_for(raw: dict[str, Any], targets: Sequence[str]) -> MaterializationRequest:
    return MaterializationRequest(
        append_intent_id=raw["append_intent_id"],
        target_trace_owner_id=raw["target_trace_owner_id"],
        target_record_ids=tuple(targets),
        target_through_owner_ordinal=raw["target_through_owner_ordinal"],
        capture_trace_owner_id=raw["capture_trace_owner_id"],
    )


def check_capture_and_witness(store: SQLiteTraceStore, seq: dict[str, Any]) -> None:
    expected = seq["capture"]
    capture = store.read_fact(READ.to_operation_context("read"), expected["record_id"])
    assert isinstance(capture, Record)
    envelope = capture.envelope
    assert envelope.record_id == expected["record_id"]
    assert envelope.digest == expected["digest"]
    assert envelope.schema_ref == expected["schema_ref"]
    assert envelope.mode == expected["mode"]
    assert capture.fact_kind == expected["kind_label"]
    assert capture.payload == expected["payload"]
    assert list(envelope.caused_by_record_ids) == expected["caused_by"]
    assert envelope.witness_ref == expected["witness_ref"]
    witness = store.read_fact(
        READ.to_operation_context("read"), seq["witness"]["record_id"]
    )
    assert isinstance(witness, Record)
    assert witness.payload["substrate_ref"] == seq["witness"]["substrate_ref"]
    assert witness.payload["containment"] == seq["witness"]["containment"]


@pytest.mark.parametrize("name", ["echo_sequence", "kv_sequence"])
def test_a_sequence_materializes_exactly_as_the_reference(
    name: str, tmp_path: Path
) -> None:
    seq = VECTORS[name]
    decl = seq["declaration"]
    registry = SubstrateRegistry()
    kv = SQLiteKVSubstrate(tmp_path / "world.sqlite")
    if name == "echo_sequence":
        registry.register(EchoSubstrate("vector.echo.v1", ["vector.write.v1"]))
    else:
        registry.register(kv)
    with SQLiteTraceStore() as store, kv:
        ids = declare(
            store, decl["intent"], decl["owner"], decl["substrate_ref"], decl["drafts"]
        )
        assert list(ids) == decl["fact_ids"]
        result = materialize(
            store, MATERIALIZE_CONTEXT, request_for(seq["request"], ids), registry
        )
        receipt = result.unwrap()
        assert receipt.to_dict() == seq["receipt"]
        check_capture_and_witness(store, seq)
        if name == "kv_sequence":
            assert kv.get("answer") == seq["world_value"]


class CountingSubstrate:
    """The replay vector's substrate: one capture ``{"call": n}`` per call."""

    substrate_ref = "vector.count.v1"
    declaration_schemas = frozenset({"vector.write.v1"})
    capture_schemas = frozenset({"vector.write.applied.v1"})
    containment = "contained"

    def __init__(self) -> None:
        self.calls = 0

    def materialize(self, records: Sequence[Record]) -> MaterializationResult:
        self.calls += 1
        draft = RecordDraft(
            mode="capture",
            schema_ref="vector.write.applied.v1",
            payload={"call": self.calls},
            kind_label="write_applied",
            caused_by_fact_ids=(records[0].record_id,),
        )
        return MaterializationResult(MaterializationOutcome.SUCCESS, (draft,))


def test_a_completed_intent_replays_its_receipt_across_a_restart(
    tmp_path: Path,
) -> None:
    seq = VECTORS["replay_sequence"]
    path = tmp_path / "trace.sqlite"
    substrate = CountingSubstrate()
    registry = SubstrateRegistry()
    registry.register(substrate)
    draft = {
        "mode": "declaration",
        "schema_ref": "vector.write.v1",
        "payload": {"value": 1},
        "kind_label": "write",
    }
    request = None
    with SQLiteTraceStore(path) as store:
        ids = declare(
            store,
            "vector:replay:declare",
            "owner:vector-replay",
            "vector.count.v1",
            [draft],
        )
        assert list(ids) == seq["declaration_fact_ids"]
        request = MaterializationRequest(
            "vector:replay:apply", "owner:vector-replay", ids
        )
        first = materialize(store, MATERIALIZE_CONTEXT, request, registry).unwrap()
    with SQLiteTraceStore(path) as reopened:
        count = reopened.fact_count()
        second = materialize(reopened, MATERIALIZE_CONTEXT, request, registry).unwrap()
        assert reopened.fact_count() == count
    assert first.to_dict() == seq["first_receipt"]
    assert second.to_dict() == seq["second_receipt"]
    assert second == first == MaterializationReceipt.from_dict(seq["first_receipt"])
    assert substrate.calls == seq["substrate_calls"] == 1
