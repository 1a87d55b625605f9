"""The store's door checks a record with the kernel's public validators.

The store's own checks (type, NUL, valid text, size) run first, with their own
messages. Past them, whatever mode or schema ref a draft carries, the store
refuses it exactly when ``validate_mode`` / ``validate_schema_ref`` do, with
their message (the store names the mode a ``fact mode``), as a
``BatchShapeError``, and writes nothing; a draft they accept is appended.
"""

from __future__ import annotations

import itertools

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from goatherd.domain import (
    RECORD_MODES,
    TRUSTED_APPEND_CONTEXT,
    BatchShapeError,
    RecordInputError,
    validate_mode,
    validate_schema_ref,
)
from goatherd.infrastructure.store import SqlAlchemyTraceStore, open_trace_store
from tests.infrastructure.store.helpers import batch, counts, draft

# Text the store keeps; other checks (NUL, lone surrogates) come before these.
TEXT = st.text(
    alphabet=st.characters(exclude_categories=["Cs"], exclude_characters="\0"),
    max_size=12,
)
_INTENTS = itertools.count()


@pytest.fixture(scope="module")
def shared_store() -> SqlAlchemyTraceStore:
    return open_trace_store("sqlite://")


def _store_refusal(store: SqlAlchemyTraceStore, mode: str, schema_ref: str) -> str:
    """Append one draft; return the store's message, or "" if it was appended."""
    before = counts(store)
    intent = f"i:{next(_INTENTS)}"
    try:
        store.append(
            TRUSTED_APPEND_CONTEXT,
            batch(intent, "exec:a", draft(mode=mode, schema=schema_ref)),
        )
    except BatchShapeError as error:
        assert counts(store) == before
        assert store.read_append_intent(intent) is None
        return str(error)
    return ""


def _validator_refusal(mode: object, schema_ref: object) -> str:
    try:
        validate_mode(mode, subject="fact mode")
        validate_schema_ref(schema_ref)
    except RecordInputError as error:
        return str(error)
    return ""


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    mode=st.one_of(st.sampled_from(RECORD_MODES), TEXT),
    schema_ref=st.one_of(st.just(""), st.just("app.step.v1"), TEXT),
)
def test_the_store_refuses_what_the_validators_refuse_with_their_message(
    shared_store: SqlAlchemyTraceStore, mode: str, schema_ref: str
) -> None:
    if schema_ref == "kernel.witness.root.v1":  # the root rule, tested below
        schema_ref = "app.step.v1"
    expected = _validator_refusal(mode, schema_ref)
    assert _store_refusal(shared_store, mode, schema_ref) == expected


def test_the_root_witness_rule_is_the_validators_at_the_store(
    store: SqlAlchemyTraceStore,
) -> None:
    with pytest.raises(RecordInputError) as caught:
        store.append(
            TRUSTED_APPEND_CONTEXT,
            batch("i:root", "exec:a", draft(schema="kernel.witness.root.v1")),
        )
    assert str(caught.value) == (
        "root witness record must use the empty witness sentinel"
    )
    assert store.read_append_intent("i:root") is None


@pytest.mark.parametrize(
    ("mode", "schema_ref", "message"),
    [
        (7, "app.step.v1", "groups[0].fact_drafts[0].mode must be a string, got int"),
        ("capture\0", "app.step.v1", "groups[0].fact_drafts[0].mode contains NUL"),
        ("capture", None, "groups[0].fact_drafts[0].schema_ref must be a string"),
        ("capture", "s" * 1025, "schema_ref is 1025 bytes, over the store's"),
    ],
)
def test_the_stores_own_stricter_checks_run_first_with_their_messages(
    store: SqlAlchemyTraceStore, mode: object, schema_ref: object, message: str
) -> None:
    before = counts(store)
    with pytest.raises(BatchShapeError) as caught:
        store.append(
            TRUSTED_APPEND_CONTEXT,
            batch("i:strict", "exec:a", draft(mode=mode, schema=schema_ref)),  # type: ignore[arg-type]
        )
    assert message in str(caught.value)
    assert counts(store) == before
