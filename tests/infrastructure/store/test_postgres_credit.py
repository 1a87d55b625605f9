"""A record two PostgreSQL writers place is credited to the one placing it first.

Positions are drawn in allocation order, commits land in any order (ADR
0036): a writer holding later positions can commit a shared new record
before the writer that places it first. ``verify`` and ``import`` credit a
record to the intent of its first placement in the log, so the row must end
up naming that intent. The 8-writer soak found this about one run in two
under load; here the interleaving is forced: the first writer is held after
drawing its positions, just before it inserts its records.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from goatherd.domain.contexts import TRUSTED_APPEND_CONTEXT
from goatherd.domain.records import AppendBatch, AppendGroup, RecordDraft
from goatherd.infrastructure.audit.verify import verify_trace
from goatherd.infrastructure.store import open_trace_store, writer
from tests.infrastructure.backends import _postgres_url

pytestmark = [pytest.mark.postgres, pytest.mark.timeout(120)]


@pytest.fixture
def url() -> Iterator[str]:
    urls = _postgres_url()
    yield next(urls)
    next(urls, None)


def batch(intent: str, owner: str, n: int = 1) -> AppendBatch:
    """The same record (ids do not cover the owner) placed on ``owner``'s path."""
    draft = RecordDraft(mode="capture", schema_ref="test.shared.v1", payload={"n": n})
    return AppendBatch(intent, (AppendGroup(owner, fact_drafts=(draft,)),))


def test_a_later_writer_committing_first_leaves_the_credit_to_the_first_placement(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    drawn, release = threading.Event(), threading.Event()
    insert = writer._insert_records

    def held(reader, plans, state):
        if any(p.prepared.intent_id == "first" for p in plans):
            drawn.set()  # positions drawn, nothing inserted yet
            assert release.wait(60)
        insert(reader, plans, state)

    monkeypatch.setattr(writer, "_insert_records", held)
    with open_trace_store(url) as first, open_trace_store(url) as second:
        # Their witness exists already: the second writer would otherwise
        # wait for the first's uncommitted witness row.
        first.append(TRUSTED_APPEND_CONTEXT, batch("warm", "agent:c", n=0))
        receipts = {}

        def append_first() -> None:
            receipts["first"] = first.append(
                TRUSTED_APPEND_CONTEXT, batch("first", "agent:a")
            )

        thread = threading.Thread(target=append_first)
        thread.start()
        assert drawn.wait(30)
        receipts["second"] = second.append(
            TRUSTED_APPEND_CONTEXT, batch("second", "agent:b")
        )
        release.set()
        thread.join(60)
        assert not thread.is_alive()
        (record_id,) = set(receipts["first"].fact_ids) | set(
            receipts["second"].fact_ids
        )
        with first.transaction() as conn:
            credited = conn.exec_driver_sql(
                "SELECT append_intent_id FROM records WHERE record_id = %s",
                (record_id,),
            ).scalar_one()
        log = first.read_log(-1, 20)
        placements = [
            e.append_intent_id for e in log if e.record.record_id == record_id
        ]
        assert placements == ["first", "second"]  # the held writer placed it first
        assert credited == "first"
        report = verify_trace(first)
        assert report.ok, [str(p) for p in report.problems]
