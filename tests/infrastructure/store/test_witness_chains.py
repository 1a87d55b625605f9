"""Witness support validation over stored rows (kernel-spec 7.8 step 3).

Each test corrupts a committed row directly, then reads through a freshly
opened store (a new process would have no cache of the old content).
"""

from __future__ import annotations

import pytest
from sqlalchemy import update

from goatherd import (
    TRUSTED_APPEND_CONTEXT,
    TRUSTED_READ_CONTEXT,
    TraceStoreError,
)
from goatherd.domain import (
    UnknownFactError,
)
from goatherd.infrastructure.store import open_trace_store
from goatherd.infrastructure.store.schema import records
from tests.infrastructure.store.helpers import EVERYTHING, batch, draft


def _corrupt(url: str, *, on_record: bool = False, **values: str) -> None:
    with open_trace_store(url) as store:
        receipt = store.append(TRUSTED_APPEND_CONTEXT, batch("i:1", "exec:a", draft(1)))
        target = receipt.fact_ids[0]
        witness = store.read_fact(TRUSTED_READ_CONTEXT, target).envelope.witness_ref
        with store.engine.begin() as conn:
            conn.execute(
                update(records)
                .where(records.c.record_id == (target if on_record else witness))
                .values(
                    **{
                        k: v.format(target=target, witness=witness)
                        for k, v in values.items()
                    }
                )
            )


def _read(url: str, owner: str = "exec:a") -> None:
    with open_trace_store(url) as store:
        store.read_owner_prefix(TRUSTED_READ_CONTEXT, owner, EVERYTHING)


def test_a_witness_citing_itself_is_a_chain_cycle(durable_store_url: str) -> None:
    _corrupt(durable_store_url, witness_ref="{witness}")
    with pytest.raises(
        TraceStoreError, match="witness chain cycle before root witness"
    ):
        _read(durable_store_url)


def test_a_missing_witness_names_the_ref(durable_store_url: str) -> None:
    missing = "sha256:" + "9" * 64
    _corrupt(durable_store_url, on_record=True, witness_ref=missing)
    with pytest.raises(UnknownFactError, match=missing):
        _read(durable_store_url)


def test_a_witness_ref_to_an_ordinary_record_is_refused(durable_store_url: str) -> None:
    _corrupt(durable_store_url, schema_ref="test.step.v1")
    with pytest.raises(TraceStoreError, match="does not resolve to a witness record"):
        _read(durable_store_url)


def test_a_non_root_witness_with_an_empty_ref_is_refused(
    durable_store_url: str,
) -> None:
    _corrupt(durable_store_url, witness_ref="")
    with pytest.raises(TraceStoreError, match="non-root witness has empty witness_ref"):
        _read(durable_store_url)


def test_a_non_root_record_with_an_empty_witness_ref_is_refused(
    durable_store_url: str,
) -> None:
    _corrupt(durable_store_url, on_record=True, witness_ref="")
    with pytest.raises(TraceStoreError, match="non-root record has empty witness_ref"):
        _read(durable_store_url)
