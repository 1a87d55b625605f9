"""Eight writer PROCESSES on one trace: nothing lost, ordinals and positions exact.

Each scenario runs on a SQLite file and on a PostgreSQL database. The writers
are separate processes (multiprocessing ``spawn``), each with its own store,
released together by a barrier. A follower process polls ``read_log`` the whole
time and must only ever see contiguous runs starting right after the last
position it saw: a reader never sees position k+1 before k, so it never passes
a position that commits later (on PostgreSQL, writers commit in any order and
readers stop at the safe high-water mark, ADR 0036).
"""

from __future__ import annotations

import itertools
import multiprocessing
import queue
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from goatherd.domain import TRUSTED_APPEND_CONTEXT, TRUSTED_READ_CONTEXT
from goatherd.domain.log import LogEntry
from goatherd.domain.store import TraceStore
from goatherd.infrastructure.store import open_trace_store
from tests.infrastructure.concurrency import workers
from tests.infrastructure.concurrency.workers import SHARED_OWNER, own_owner

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

WRITES_PER_WRITER = 50
COUNTS_PER_COUNTER = 20
WRITERS = tuple(f"w{n}" for n in range(1, 9))
N = len(WRITERS)
THROUGH_ALL = 2**63 - 1

BACKENDS = [
    pytest.param("sqlite_url", id="sqlite"),
    pytest.param("postgres_url", id="postgresql", marks=pytest.mark.postgres),
]


@pytest.fixture(params=BACKENDS)
def trace_url(request: pytest.FixtureRequest) -> str:
    url = request.getfixturevalue(request.param)
    assert isinstance(url, str)
    # create the schema once up front, as a deployed trace already has it
    open_trace_store(url).close()
    return url


def run_processes(
    targets: dict[str, tuple[Callable[..., None], tuple[Any, ...]]],
    *,
    stop_after: tuple[str, ...] = (),
) -> dict[str, Any]:
    """Start every target in its own spawned process; return name -> result.

    Targets get ``(*args, barrier, [stop,] results)``; the ``stop`` event is set
    once every process NOT named in ``stop_after`` has reported.
    """
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(len(targets))
    stop = ctx.Event()
    results = ctx.Queue()
    procs = []
    for name, (target, args) in targets.items():
        extra = (barrier, stop, results) if name in stop_after else (barrier, results)
        proc = ctx.Process(target=target, args=(*args, *extra), name=name)
        proc.start()
        procs.append(proc)
    outcomes: dict[str, Any] = {}
    deadline = time.monotonic() + 90
    try:
        while len(outcomes) < len(targets):
            try:
                status, name, value = results.get(timeout=0.5)
            except queue.Empty:
                check_alive(procs, outcomes, deadline)
                continue
            if status != "ok":
                pytest.fail(f"process {name} failed:\n{value}")
            outcomes[name] = value
            if all(n in outcomes for n in targets if n not in stop_after):
                stop.set()
    finally:
        stop.set()
        for proc in procs:
            proc.join(timeout=30)
            if proc.is_alive():
                proc.kill()
    return outcomes


def check_alive(procs: list[Any], outcomes: dict[str, Any], deadline: float) -> None:
    """Fail at once when a process died without reporting (e.g. an import error)."""
    for proc in procs:
        if proc.name not in outcomes and proc.exitcode is not None:
            pytest.fail(f"process {proc.name} exited with {proc.exitcode} unreported")
    if time.monotonic() > deadline:
        pytest.fail(f"processes still running after 90 s: {sorted(outcomes)} reported")


def whole_log(store: TraceStore) -> list[LogEntry]:
    entries: list[LogEntry] = []
    while True:
        page = store.read_log(after=entries[-1].position if entries else -1, limit=500)
        if not page:
            return entries
        entries.extend(page)


@pytest.fixture
def reopen(trace_url: str) -> Iterator[Callable[[], TraceStore]]:
    opened: list[TraceStore] = []

    def open_() -> TraceStore:
        opened.append(open_trace_store(trace_url))
        return opened[-1]

    yield open_
    for store in opened:
        store.close()


def assert_prefix_reads(reads: list[tuple[int, ...]], total: int) -> None:
    """Each read is a contiguous run starting right after the last seen position."""
    last = -1
    for positions in reads:
        expected = tuple(range(last + 1, last + 1 + len(positions)))
        assert positions == expected, f"after {last} the follower saw {positions[:5]}"
        last = positions[-1]
    assert last == total - 1


class TestEightWriterProcesses:
    def test_eight_writers_lose_nothing_and_keep_ordinals_and_positions_exact(
        self, trace_url: str, reopen: Callable[[], TraceStore]
    ) -> None:
        # act: eight writers append two-owner batches while a follower tails the log
        targets: dict[str, tuple[Callable[..., None], tuple[Any, ...]]] = {
            name: (workers.writer, (trace_url, name, WRITES_PER_WRITER))
            for name in WRITERS
        }
        targets["follower"] = (workers.follower, (trace_url, "follower"))
        outcomes = run_processes(targets, stop_after=("follower",))
        total = 2 * WRITES_PER_WRITER * N

        # every receipt names two fresh records and two distinct commit numbers
        receipts = [r for name in WRITERS for r in outcomes[name]]
        assert len(receipts) == WRITES_PER_WRITER * N
        commits = sorted(int(c.split(":")[1]) for _, cs, _ in receipts for c in cs)
        assert commits == list(range(total))

        # the shared path: ordinals 0..8N-1, each writer's own in its append order
        shared = sorted(o for _, _, ranges in receipts for o in ranges[SHARED_OWNER])
        assert shared == [o for o in range(N * WRITES_PER_WRITER) for _ in (0, 1)]
        for name in WRITERS:
            mine = [ranges[SHARED_OWNER][0] for _, _, ranges in outcomes[name]]
            assert mine == sorted(mine)
            own = [ranges[own_owner(name)] for _, _, ranges in outcomes[name]]
            assert own == [(n, n) for n in range(WRITES_PER_WRITER)]

        # the stored trace agrees with the receipts
        store = reopen()
        log = whole_log(store)
        assert [e.position for e in log] == list(range(total))
        assert store.max_position() == total - 1
        by_owner: dict[str, list[int]] = defaultdict(list)
        for entry in log:
            assert entry.record.view is not None
            by_owner[entry.record.view.trace_owner_id].append(
                entry.record.view.owner_ordinal
            )
        assert by_owner[SHARED_OWNER] == list(range(N * WRITES_PER_WRITER))
        for name in WRITERS:
            assert by_owner[own_owner(name)] == list(range(WRITES_PER_WRITER))
        assert store.head(SHARED_OWNER) == N * WRITES_PER_WRITER
        written = {fid for ids, _, _ in receipts for fid in ids}
        assert len(written) == total
        assert {e.record.record_id for e in log} == written
        shared_slice = store.read_owner_prefix(
            TRUSTED_READ_CONTEXT, SHARED_OWNER, THROUGH_ALL
        )
        assert len(shared_slice.owner_paths[SHARED_OWNER]) == N * WRITES_PER_WRITER

        # the writers really overlapped: their records interleave on the shared path
        shared_writers = [
            e.record.payload["writer"]
            for e in log
            if e.record.view is not None
            and e.record.view.trace_owner_id == SHARED_OWNER
        ]
        switches = sum(a != b for a, b in itertools.pairwise(shared_writers))
        assert switches >= 2

        # the follower only ever saw gap-free runs, and finally everything; it
        # read while the writers ran (many reads, none holding everything)
        assert_prefix_reads(outcomes["follower"], total)
        assert len(outcomes["follower"]) > 2

    def test_optimistic_writers_on_one_owner_never_share_an_ordinal(
        self, trace_url: str, reopen: Callable[[], TraceStore]
    ) -> None:
        # act: both writers read the head and append expecting it, retrying
        targets = {
            name: (workers.counter, (trace_url, name, COUNTS_PER_COUNTER))
            for name in WRITERS
        }
        outcomes = run_processes(targets)

        # the race was real: some appends lost it and retried
        assert sum(outcomes[name][1] for name in WRITERS) > 0

        # every record got its own ordinal; together they fill 0..8N-1
        ordinals = [o for name in WRITERS for o in outcomes[name][0]]
        assert sorted(ordinals) == list(range(N * COUNTS_PER_COUNTER))
        for name in WRITERS:
            assert outcomes[name][0] == sorted(outcomes[name][0])
        store = reopen()
        assert store.head(SHARED_OWNER) == N * COUNTS_PER_COUNTER
        log = whole_log(store)
        assert [e.position for e in log] == list(range(N * COUNTS_PER_COUNTER))
        payloads = sorted(
            (str(e.record.payload["writer"]), str(e.record.payload["n"])) for e in log
        )
        assert payloads == sorted(
            (w, str(n)) for w in WRITERS for n in range(COUNTS_PER_COUNTER)
        )


class TestEightWriterThreads:
    def test_threads_sharing_one_store_group_commit_without_loss_or_reorder(
        self, trace_url: str, reopen: Callable[[], TraceStore]
    ) -> None:
        # act: eight threads append through ONE store (group commit) while a
        # follower with its own store tails the log
        store = reopen()
        follower_store = reopen()
        barrier = threading.Barrier(N + 1)
        done = threading.Event()
        receipts: dict[str, list[Any]] = {name: [] for name in WRITERS}
        reads: list[tuple[int, ...]] = []

        def write(name: str) -> None:
            barrier.wait()
            for n in range(WRITES_PER_WRITER):
                receipts[name].append(
                    store.append(TRUSTED_APPEND_CONTEXT, workers.step_batch(name, n))
                )

        def follow() -> None:
            barrier.wait()
            last = -1
            while True:
                finished = done.is_set()
                entries = follower_store.read_log(after=last, limit=1000)
                if entries:
                    reads.append(tuple(e.position for e in entries))
                    last = entries[-1].position
                elif finished:
                    return

        threads = [threading.Thread(target=write, args=(n,)) for n in WRITERS]
        follower = threading.Thread(target=follow)
        for thread in [*threads, follower]:
            thread.start()
        for thread in threads:
            thread.join(90)
        done.set()
        follower.join(90)

        total = 2 * WRITES_PER_WRITER * N
        commits = sorted(
            int(c.split(":")[1])
            for rs in receipts.values()
            for r in rs
            for c in r.commit_receipts
        )
        assert commits == list(range(total))
        for name in WRITERS:
            own = [r.owner_ordinal_ranges[own_owner(name)] for r in receipts[name]]
            assert own == [(n, n) for n in range(WRITES_PER_WRITER)]
            mine = [r.owner_ordinal_ranges[SHARED_OWNER][0] for r in receipts[name]]
            assert mine == sorted(mine)
        assert [e.position for e in whole_log(store)] == list(range(total))
        assert_prefix_reads(reads, total)
