"""Replay store_vectors_v0.json: the ids the reference STORE allocates.

Procedure of ``/work/shared/conformance/README.md``: one fresh store per
fixture and backend; append each batch with the vector's context, compare the
receipt field by field (and the stored batch digest), publish the frontiers,
then read every owner path and compare ids and kind labels.
"""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import select

from goatherd import (
    TRUSTED_READ_CONTEXT,
    AppendBatch,
    AppendGroup,
    CutSpec,
    RecordDraft,
    RetainedContextDraft,
)
from goatherd.domain import (
    AppendContext,
)
from goatherd.infrastructure.store import open_trace_store
from goatherd.infrastructure.store.schema import append_intents
from tests.conformance.vectors import load_vectors
from tests.infrastructure.backends import store_url

__all__ = ["store_url"]

VECTORS = load_vectors("store_vectors_v0.json")
NAMED_LABELS = {
    "root_witness_auto_plan",
    "ordinary_witness_non_default_context",
    "retained_context_reuse_by_id",
    "multi_group_atomic_batch",
    "local_ref_resolution",
    "frontier_publish",
    "non_ascii_payload",
}
EVERYTHING = 2**63 - 1


def test_the_store_vector_file_keeps_its_named_fixtures() -> None:
    labels = {vector["label"] for vector in VECTORS["vectors"]}
    assert labels >= NAMED_LABELS
    assert len(VECTORS["vectors"]) == 9
    for vector in VECTORS["vectors"]:
        for receipt in vector["expected"]["receipts"]:
            for context_id in receipt["context_receipts"]:
                assert context_id.startswith("context:")
                assert not context_id.startswith("ctx:")


def _context(raw: dict[str, Any] | None, receipts: list[Any]) -> object:
    if raw is None:
        return None
    if "reuse_of_batch" in raw:
        return receipts[raw["reuse_of_batch"]].context_receipts[raw["reuse_of_group"]]
    return RetainedContextDraft(
        active_binding_refs=tuple(raw["active_binding_refs"]),
        capability_witness_refs=tuple(raw["capability_witness_refs"]),
        semantic_environment_refs=tuple(raw["semantic_environment_refs"]),
        visibility_policy_refs=tuple(raw["visibility_policy_refs"]),
        substrate_ref=raw["substrate_ref"],
        containment=raw["containment"],
        reuse_context_id=raw["reuse_context_id"],
    )


def _batch(raw: dict[str, Any], receipts: list[Any]) -> AppendBatch:
    groups = tuple(
        AppendGroup(
            trace_owner_id=group["trace_owner_id"],
            retained_context=_context(group["retained_context"], receipts),  # type: ignore[arg-type]
            causal_parents=tuple(group["causal_parents"]),
            fact_drafts=tuple(
                RecordDraft(
                    mode=draft["mode"],
                    schema_ref=draft["schema_ref"],
                    payload=draft["payload"],
                    kind_label=draft["kind_label"],
                    append_local_id=draft["append_local_id"],
                    caused_by_fact_ids=tuple(draft["caused_by_fact_ids"]),
                    caused_by_local_refs=tuple(draft["caused_by_local_refs"]),
                )
                for draft in group["fact_drafts"]
            ),
        )
        for group in raw["groups"]
    )
    return AppendBatch(append_intent_id=raw["append_intent_id"], groups=groups)


def _compare(receipt: Any, expected: dict[str, Any]) -> None:
    assert receipt.append_intent_id == expected["append_intent_id"]
    assert list(receipt.fact_ids) == expected["fact_ids"]
    assert list(receipt.commit_receipts) == expected["commit_receipts"]
    assert list(receipt.context_receipts) == expected["context_receipts"]
    assert {
        owner: list(pair) for owner, pair in receipt.owner_ordinal_ranges.items()
    } == expected["owner_ordinal_ranges"]
    assert [list(edge) for edge in receipt.causal_edges] == expected["causal_edges"]


@pytest.mark.parametrize(
    "vector", VECTORS["vectors"], ids=[v["label"] for v in VECTORS["vectors"]]
)
def test_the_store_allocates_the_reference_ids(
    vector: dict[str, Any], store_url: str
) -> None:
    raw_context = vector["append_context"]
    context = AppendContext(
        actor_ref=raw_context["actor_ref"],
        presented_witness_refs=tuple(raw_context["presented_witness_refs"]),
        schema_version_set=raw_context["schema_version_set"],
        trust_mode=raw_context["trust_mode"],
    )
    expected = vector["expected"]
    with open_trace_store(store_url) as store:
        receipts: list[Any] = []
        frontier_ids = []
        for index, raw_batch in enumerate(vector["batches"]):
            receipt = store.append(context, _batch(raw_batch, receipts))
            _compare(receipt, expected["receipts"][index])
            with store.engine.connect() as conn:
                digest = conn.execute(
                    select(append_intents.c.batch_digest).where(
                        append_intents.c.append_intent_id == receipt.append_intent_id
                    )
                ).scalar_one()
            assert digest == expected["receipts"][index]["batch_digest"]
            receipts.append(receipt)
            for frontier in vector.get("frontiers", []):
                if frontier["after_batch"] == index:
                    cut = store.publish_cut(
                        context,
                        CutSpec(
                            frontier_id=frontier["frontier_id"],
                            target_trace_owner_id=frontier["target_trace_owner_id"],
                            through_fact_id=receipt.fact_ids[
                                frontier["through_last_fact_of"]
                            ],
                        ),
                    )
                    frontier_ids.append(cut.frontier_id)
        assert frontier_ids == expected["frontier_ids"]
        labels = expected["owner_paths"]["_kind_labels"]
        for owner, ids in expected["owner_paths"].items():
            if owner == "_kind_labels":
                continue
            trace_slice = store.read_owner_prefix(
                TRUSTED_READ_CONTEXT, owner, EVERYTHING
            )
            assert list(trace_slice.owner_paths.get(owner, ())) == ids
            for record_id in ids:
                assert trace_slice.facts_by_id[record_id].fact_kind == labels[record_id]
