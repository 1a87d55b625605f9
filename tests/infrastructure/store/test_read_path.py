"""read_path: an owner's path entries after an ordinal, for aggregate fast-forward."""

from __future__ import annotations

import pytest

from goatherd import TRUSTED_APPEND_CONTEXT
from goatherd.infrastructure.store import SQLiteTraceStore
from tests.infrastructure.store.helpers import batch, draft


@pytest.fixture
def store(tmp_path):
    with SQLiteTraceStore(tmp_path / "trace.db") as s:
        s.append(TRUSTED_APPEND_CONTEXT, batch("i1", "a", draft(1), draft(2)))
        s.append(TRUSTED_APPEND_CONTEXT, batch("i2", "b", draft(3)))
        s.append(TRUSTED_APPEND_CONTEXT, batch("i3", "a", draft(4)))
        yield s


def payloads(entries):
    return [e.record.payload["value"] for e in entries]


def test_the_whole_path_comes_back_in_ordinal_order(store):
    entries = store.read_path("a")
    assert [e.record.view.owner_ordinal for e in entries] == [0, 1, 2]
    assert payloads(entries) == [1, 2, 4]
    assert [e.append_intent_id for e in entries] == ["i1", "i1", "i3"]


def test_only_entries_after_the_given_ordinal_come_back(store):
    assert payloads(store.read_path("a", after_ordinal=0)) == [2, 4]
    assert payloads(store.read_path("a", after_ordinal=2)) == []


def test_the_limit_bounds_the_page(store):
    assert payloads(store.read_path("a", limit=2)) == [1, 2]
    assert payloads(store.read_path("a", after_ordinal=1, limit=5)) == [4]


def test_positions_match_the_global_log(store):
    by_record = {
        (e.record.trace_owner_id, e.record.owner_ordinal): e.position
        for e in store.read_log()
    }
    for entry in store.read_path("a"):
        key = (entry.record.trace_owner_id, entry.record.owner_ordinal)
        assert entry.position == by_record[key]


def test_an_unknown_owner_has_an_empty_path(store):
    assert store.read_path("nobody") == ()
