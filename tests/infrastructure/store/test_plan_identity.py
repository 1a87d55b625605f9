"""The append plan's one-pass identities equal the kernel's reference functions.

``plan.py`` writes the record input around the payload's canonical text and
splices the payloads' storage JSON into the batch digest. These properties
compare both with the plain definitions (kernel-spec 3.1 and 5.2): the record
id from ``record_digest`` over the parsed payload, and the batch digest from
one storage-JSON encoding of the whole batch.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from goatherd.domain import (
    TRUSTED_APPEND_CONTEXT,
    AppendBatch,
    AppendGroup,
    BatchShapeError,
    RecordDraft,
    RecordInputError,
    RetainedContext,
    RetainedContextDraft,
    record_digest,
    root_witness_record_id,
    sha256_hex,
)
from goatherd.domain.canonical import canonical_json_text
from goatherd.infrastructure.store.authority import append_context
from goatherd.infrastructure.store.codec import storage_json
from goatherd.infrastructure.store.limits import DEFAULT_LIMITS
from goatherd.infrastructure.store.plan import (
    NormalizedDraft,
    _batch_digest_input,
    _record_id,
    _validate_group,
    batch_digest,
    validate_batch,
)

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
)
values = st.recursive(
    scalars,
    lambda children: (
        st.lists(children, max_size=4)
        | st.tuples(children, children)
        | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)
payloads = st.dictionaries(st.text(max_size=8), values, max_size=6)
# Identifier text the store accepts (no NUL, no lone surrogate: ADR 0039).
texts = st.text(
    alphabet=st.characters(exclude_characters="\x00", exclude_categories=["Cs"]),
    min_size=1,
    max_size=12,
)
ids = st.lists(
    st.text(alphabet="0123456789abcdef", min_size=8, max_size=8).map(
        lambda h: "sha256:" + h * 8
    ),
    max_size=3,
    unique=True,
)


def _batch(
    payload: dict[str, Any], schema: str, label: str, parents: list[str]
) -> AppendBatch:
    drafts = (
        RecordDraft(
            mode="capture",
            schema_ref=schema,
            payload=payload,
            kind_label=label,
            caused_by_fact_ids=tuple(parents),
        ),
        RecordDraft(mode="declaration", schema_ref="s", payload={"payload": None}),
    )
    group = AppendGroup(trace_owner_id=label, fact_drafts=drafts)
    return AppendBatch(append_intent_id=f"intent {label}", groups=(group,))


@given(payloads, texts, ids)
def test_the_record_id_equals_record_digest_of_the_parsed_payload(
    payload: dict[str, Any], schema: str, parents: list[str]
) -> None:
    ((item, _),) = validate_batch(_batch(payload, schema, "x", parents))
    witness = root_witness_record_id()
    expected = record_digest(
        schema, "capture", json.loads(item.payload_json), tuple(parents), witness
    )
    assert item.payload == json.loads(storage_json(payload))
    assert _record_id(item, tuple(parents), witness) == expected


@given(payloads, texts, texts, ids)
def test_the_spliced_batch_digest_equals_one_whole_encoding(
    payload: dict[str, Any], schema: str, label: str, parents: list[str]
) -> None:
    context = append_context(TRUSTED_APPEND_CONTEXT)
    batch = _batch(payload, schema, label, parents)
    groups = validate_batch(batch)
    whole = _batch_digest_input(context, batch, groups, with_payloads=True)
    assert batch_digest(context, batch, groups) == sha256_hex(
        storage_json(whole, root="batch")
    )


def test_a_batch_field_that_spells_a_payload_slot_still_digests_exactly() -> None:
    # A dict where a parent id belongs spells the slot; the append refuses
    # such a batch at the door (ADR 0039), but the digest must stay exact for
    # any batch it is given, so the groups are normalized without the checks.
    context = append_context(TRUSTED_APPEND_CONTEXT)
    batch = _batch({"a": 1}, "s", 'x"payload', ["sha256:" + "0" * 64])
    odd = RecordDraft(
        mode="capture",
        schema_ref="s",
        payload={"b": 2},
        kind_label='"payload":null',
        caused_by_fact_ids=({"payload": None},),  # type: ignore[arg-type]
    )
    group = AppendGroup(trace_owner_id="o", fact_drafts=(odd,))
    batch = AppendBatch(append_intent_id="i", groups=(*batch.groups, group))
    with pytest.raises(BatchShapeError, match="caused_by_fact_ids"):
        validate_batch(batch)
    groups = tuple(
        _validate_group(g, set(), f"groups[{n}]", DEFAULT_LIMITS, False)
        for n, g in enumerate(batch.groups)
    )
    whole = _batch_digest_input(context, batch, groups, with_payloads=True)
    assert batch_digest(context, batch, groups) == sha256_hex(
        storage_json(whole, root="batch")
    )


def test_a_draft_using_the_root_witness_schema_keeps_the_reference_error() -> None:
    ((item, _),) = validate_batch(_batch({}, "kernel.witness.root.v1", "x", []))
    with pytest.raises(RecordInputError, match="empty witness sentinel"):
        _record_id(item, (), root_witness_record_id())


refs = st.lists(texts, max_size=2).map(tuple)
contexts = (
    st.none()
    | texts
    | st.builds(
        RetainedContextDraft,
        active_binding_refs=refs,
        capability_witness_refs=refs,
        semantic_environment_refs=refs,
        visibility_policy_refs=refs,
        substrate_ref=texts,
        containment=texts,
        reuse_context_id=st.none() | texts,
    )
    | st.builds(RetainedContext, context_id=texts, semantic_environment_refs=refs)
)
drafts = st.builds(
    RecordDraft,
    mode=texts,
    schema_ref=texts,
    payload=payloads,
    kind_label=texts,
    append_local_id=st.none() | texts,
    caused_by_fact_ids=ids.map(tuple),
    caused_by_local_refs=st.lists(texts, max_size=2).map(tuple),
)
groups_ = st.builds(
    AppendGroup,
    trace_owner_id=texts,
    retained_context=contexts,
    causal_parents=ids.map(tuple),
    fact_drafts=st.lists(drafts, max_size=3).map(tuple),
)


@settings(max_examples=60)
@given(texts, st.lists(groups_, max_size=3).map(tuple), texts, texts)
def test_the_directly_written_batch_digest_equals_one_whole_encoding(
    intent: str, groups: tuple[AppendGroup, ...], actor: str, environment: str
) -> None:
    # Any groups, contexts (new, reused by id or by value, default) and drafts,
    # under any actor and environment: the text written field by field is the
    # storage JSON of the whole batch digest input.
    context = dataclasses.replace(
        append_context(TRUSTED_APPEND_CONTEXT),
        actor_ref=actor,
        schema_environment_ref=environment,
    )
    batch = AppendBatch(append_intent_id=intent, groups=groups)
    normalized = tuple(
        tuple(
            NormalizedDraft(d, storage_json(d.payload), canonical_json_text(d.payload))
            for d in group.fact_drafts
        )
        for group in groups
    )
    whole = _batch_digest_input(context, batch, normalized, with_payloads=True)
    assert batch_digest(context, batch, normalized) == sha256_hex(
        storage_json(whole, root="batch")
    )
