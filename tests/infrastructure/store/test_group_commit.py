"""Group commit: appends queued while a commit runs share the next transaction.

Each member of a group gets exactly the outcome it would have had committed
alone, in queue order: its own receipt, its own error (the others commit), a
replay of an intent staged earlier in the same group. The tests build groups
deterministically by holding the store's write lock while appends queue up.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy import update

from goatherd.domain import (
    TRUSTED_APPEND_CONTEXT,
    AppendReceipt,
    OrdinalConflictError,
    TraceStoreError,
    UnknownFactError,
)
from goatherd.infrastructure.audit.verify import verify_trace
from goatherd.infrastructure.store import SqlAlchemyTraceStore, open_trace_store
from goatherd.infrastructure.store.codec import (
    decode_receipt,
    encode_receipt,
    encode_receipt_reference,
)
from goatherd.infrastructure.store.commits import CommitQueue
from goatherd.infrastructure.store.reader import ContentCache, record_size
from goatherd.infrastructure.store.schema import records
from tests.infrastructure.store.helpers import batch, draft

CTX = TRUSTED_APPEND_CONTEXT


class _Item:
    def __init__(self, name: str) -> None:
        self.name = name
        self.done = False

    @property
    def finished(self) -> bool:
        return self.done


class TestTheQueue:
    def test_a_lone_entry_is_committed_alone_by_its_own_thread(self) -> None:
        groups: list[list[str]] = []

        def run(group: list[_Item]) -> None:
            groups.append([i.name for i in group])
            for item in group:
                item.done = True

        CommitQueue(run).submit(_Item("a"))
        assert groups == [["a"]]

    def test_entries_queued_during_a_commit_share_the_next_one(self) -> None:
        groups: list[list[str]] = []
        first_running = threading.Event()
        release = threading.Event()

        def run(group: list[_Item]) -> None:
            groups.append([i.name for i in group])
            if group[0].name == "first":
                first_running.set()
                release.wait(10)
            for item in group:
                item.done = True

        queue: CommitQueue[_Item] = CommitQueue(run)
        threads = [threading.Thread(target=queue.submit, args=(_Item("first"),))]
        threads[0].start()
        assert first_running.wait(10)
        for name in ("b", "c", "d"):
            threads.append(threading.Thread(target=queue.submit, args=(_Item(name),)))
            threads[-1].start()
        _wait_for(lambda: len(queue._pending) == 3)
        release.set()
        for thread in threads:
            thread.join(10)
        assert groups[0] == ["first"]
        assert sorted(groups[1]) == ["b", "c", "d"]
        assert len(groups) == 2

    def test_a_group_larger_than_the_limit_is_split(self) -> None:
        groups: list[int] = []
        gate = threading.Event()

        def run(group: list[_Item]) -> None:
            groups.append(len(group))
            gate.wait(10)
            for item in group:
                item.done = True

        queue: CommitQueue[_Item] = CommitQueue(run, max_group=2)
        threads = [
            threading.Thread(target=queue.submit, args=(_Item(str(n)),))
            for n in range(5)
        ]
        for thread in threads:
            thread.start()
        _wait_for(lambda: len(queue._pending) >= 4)
        gate.set()
        for thread in threads:
            thread.join(10)
        assert sum(groups) == 5
        assert max(groups) == 2


def _wait_for(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 10
    while not condition():
        assert time.monotonic() < deadline, "condition never held"
        time.sleep(0.001)


# ---------------------------------------------------------------- the store


def _grouped(store: SqlAlchemyTraceStore, calls: list[Callable[[], Any]]) -> list[Any]:
    """Run ``calls`` so that all but the first commit as one group, in order.

    The first call's leader takes its group and waits for the store's write
    lock, held here, while the others queue one after the other behind it.
    """
    outcomes: list[Any] = [None] * len(calls)
    queue = store._queue

    def call(index: int) -> None:
        try:
            outcomes[index] = calls[index]()
        except Exception as error:
            outcomes[index] = error

    threads = [threading.Thread(target=call, args=(i,)) for i in range(len(calls))]
    with store._lock:
        threads[0].start()
        _wait_for(lambda: queue._leading and not queue._pending)
        for count, thread in enumerate(threads[1:], start=1):
            thread.start()
            _wait_for(lambda count=count: len(queue._pending) == count)  # type: ignore[misc]
    for thread in threads:
        thread.join(30)
    return outcomes


def test_a_group_gives_each_append_its_own_outcome(store: SqlAlchemyTraceStore) -> None:
    store.append(CTX, batch("i:0", "exec:a", draft(0)))
    outcomes = _grouped(
        store,
        [
            lambda: store.append(CTX, batch("i:1", "exec:a", draft(1))),
            # a broken law: only this member fails
            lambda: store.append(
                CTX, batch("i:bad", "exec:b", draft(2, parents=("sha256:" + "0" * 64,)))
            ),
            lambda: store.append(CTX, batch("i:2", "exec:a", draft(3))),
            # the same intent twice in one group: the second is a replay
            lambda: store.append(CTX, batch("i:2", "exec:a", draft(3))),
            # a head expected before the group's earlier appends: a conflict
            lambda: store.append(
                CTX, batch("i:3", "exec:a", draft(4)), expected_heads={"exec:a": 1}
            ),
            lambda: store.append(
                CTX, batch("i:4", "exec:a", draft(5)), expected_heads={"exec:a": 3}
            ),
        ],
    )
    one, bad, two, again, stale, four = outcomes
    assert isinstance(bad, UnknownFactError)
    assert isinstance(stale, OrdinalConflictError)
    assert isinstance(one, AppendReceipt)
    assert isinstance(two, AppendReceipt)
    assert again == two
    assert isinstance(four, AppendReceipt)
    assert one.owner_ordinal_ranges == {"exec:a": (1, 1)}
    assert two.owner_ordinal_ranges == {"exec:a": (2, 2)}
    assert four.owner_ordinal_ranges == {"exec:a": (3, 3)}
    assert [one.commit_receipts, two.commit_receipts, four.commit_receipts] == [
        ("commit:1",),
        ("commit:2",),
        ("commit:3",),
    ]
    for receipt in (one, two, four):
        assert store.read_append_intent(receipt.append_intent_id) == receipt
    assert store.read_append_intent("i:bad") is None
    assert store.read_append_intent("i:3") is None
    assert verify_trace(store).ok


def test_a_clash_found_while_writing_fails_only_its_own_append(
    durable_store_url: str,
) -> None:
    with open_trace_store(durable_store_url) as first:
        clashing = first.append(CTX, batch("i:1", "exec:a", draft(1)))
        with first.engine.begin() as conn:
            conn.execute(
                update(records)
                .where(records.c.record_id == clashing.fact_ids[0])
                .values(body_json='{"payload":{"value":2}}')
            )
    with open_trace_store(durable_store_url) as store:
        outcomes = _grouped(
            store,
            [
                lambda: store.append(CTX, batch("i:2", "exec:b", draft(5))),
                lambda: store.append(CTX, batch("i:3", "exec:b", draft(6))),
                # the same record again: its stored row was tampered with
                lambda: store.append(CTX, batch("i:4", "exec:b", draft(1))),
                lambda: store.append(CTX, batch("i:5", "exec:b", draft(7))),
            ],
        )
        assert isinstance(outcomes[2], TraceStoreError)
        assert "already names different content" in str(outcomes[2])
        committed = [o for i, o in enumerate(outcomes) if i != 2]
        assert all(isinstance(o, AppendReceipt) for o in committed)
        ordinals = sorted(o.owner_ordinal_ranges["exec:b"][0] for o in committed)
        assert ordinals == [0, 1, 2]
        assert store.read_append_intent("i:4") is None


def test_eight_threads_appending_at_once_lose_nothing_and_keep_order(
    store: SqlAlchemyTraceStore,
) -> None:
    per_thread = 40
    receipts: dict[int, list[AppendReceipt]] = {k: [] for k in range(8)}
    barrier = threading.Barrier(8)

    def work(k: int) -> None:
        barrier.wait()
        for n in range(per_thread):
            receipts[k].append(
                store.append(
                    CTX,
                    batch(f"t{k}:{n}", "exec:shared", draft(f"{k}:{n}")),
                )
            )

    threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    positions = sorted(
        int(c.split(":")[1])
        for rs in receipts.values()
        for r in rs
        for c in r.commit_receipts
    )
    assert positions == list(range(8 * per_thread))
    for rs in receipts.values():
        mine = [r.owner_ordinal_ranges["exec:shared"][0] for r in rs]
        assert mine == sorted(mine)
    log = store.read_log(limit=10_000)
    assert [e.position for e in log] == list(range(8 * per_thread))
    assert store.head("exec:shared") == 8 * per_thread
    assert verify_trace(store).ok


# ---------------------------------------------------------------- pieces

ids = st.text(min_size=1, max_size=12)
receipts = st.builds(
    AppendReceipt,
    append_intent_id=ids,
    fact_ids=st.lists(ids, max_size=4).map(tuple),
    commit_receipts=st.lists(ids, max_size=4).map(tuple),
    owner_ordinal_ranges=st.dictionaries(
        ids, st.tuples(st.integers(0, 2**62), st.integers(0, 2**62)), max_size=4
    ),
    causal_edges=st.lists(st.tuples(ids, ids), max_size=4).map(tuple),
    context_receipts=st.lists(ids, max_size=4).map(tuple),
)


@given(receipts)
def test_the_written_receipt_equals_the_canonical_encoding(
    receipt: AppendReceipt,
) -> None:
    try:
        expected = encode_receipt_reference(receipt)
    except ValueError:
        return  # a lone surrogate: the append refuses it before any receipt
    assert encode_receipt(receipt) == expected
    assert decode_receipt(encode_receipt(receipt)) == receipt


def test_the_content_cache_stays_within_its_budget() -> None:
    cache = ContentCache(budget=200_000)
    body = '{"payload":{"x":"' + "y" * 300 + '"}}'
    for n in range(5000):
        cache.add_records(
            [(f"sha256:{n}", (None, body), record_size(body, decoded=False))]  # type: ignore[list-item]
        )
    assert cache.records.used <= cache.records.budget
    assert 0 < len(cache.records) < 5000
    assert f"sha256:{4999}" in cache.records  # the newest are kept
    assert "sha256:0" not in cache.records


def test_a_store_s_cache_budget_is_configurable(tmp_path) -> None:
    from goatherd.infrastructure.store import SQLiteTraceStore

    with SQLiteTraceStore(tmp_path / "t.sqlite", cache_bytes=64_000) as small:
        for n in range(300):
            small.append(CTX, batch(f"i:{n}", "exec:a", draft("x" * 200)))
        assert small._cache.records.used <= small._cache.records.budget <= 64_000
        assert len(small._cache.records) < 300
        # evicted records still read (from the file)
        log = small.read_log(limit=1000)
        assert len(log) == 300
