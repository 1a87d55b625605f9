"""Store throughput against raw baselines measured in the same run (issue 15).

Every scenario prints its figure, the raw baseline it measured a moment before
on the same machine, the ratio, and PASS or MISS against the issue's target:

======================  ============================================  ========
scenario                what is compared                              target
======================  ============================================  ========
sqlite-single           one caller's single-record appends / raw      >= 0.25
                        sqlite3 single-row inserts (one transaction
                        each, WAL, ``synchronous=NORMAL``)
sqlite-group            8 appenders (threads, then processes),        >= 3.0
                        aggregate / one caller
sqlite-batch            100-record batches / raw 100-row              >= 0.50
                        ``executemany`` transactions
pg-single               single appends per second, one writer         >= 1,500/s
pg-writers              4 writer processes, aggregate / one writer    >= 2.5
pg-batch                records per second in 100-record batches      >= 20,000
pg-allocation           ADR 0076: one writer / raw psycopg, and 4     >= 0.5,
                        writers / one, for the store as it is         >= 2.0
                        (holes recorded by the seal) and for
                        numbers drawn under a row lock held to
                        COMMIT (gap-free); per wall and CPU second
memory                  resident memory of a writer process after     <= 64 MB
                        300,000 records (the figure and its growth
                        over the freshly opened store)
flat                    single-append rate at 10^6 records / at 0     >= 0.80
======================  ============================================  ========

Raw baselines use a two-column table ``(id TEXT PRIMARY KEY, body TEXT)`` and
the same payloads, with the same durability (WAL with ``synchronous=NORMAL``
on SQLite; PostgreSQL's defaults, ``fsync=on``, ``synchronous_commit=on``). A
scenario runs each side ``GOATHERD_BENCH_REPEAT`` times (default 3), side by
side; the SQLite single and batch scenarios report the median over these
interleaved rounds of each round's ratio, per second of wall time and per
second of process CPU time, and pass only when both meet the target; the
others report the best of each (the figure least disturbed by other load).

Knobs: ``GOATHERD_BENCH_ONLY`` (comma-separated scenario names),
``GOATHERD_BENCH_SCALE`` (float, default 1, scales every count),
``GOATHERD_BENCH_DB_URL`` or ``GOATHERD_TEST_DB_URL`` (PostgreSQL; the pg
scenarios are skipped without it).
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import sqlite3
import statistics
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from goatherd.domain import (
    TRUSTED_APPEND_CONTEXT,
    AppendBatch,
    AppendGroup,
    RecordDraft,
)
from goatherd.infrastructure.store import open_trace_store

WRITERS = 8
PG_WRITERS = 4


# ------------------------------------------------------------------ inputs


def _scale(n: int) -> int:
    return max(1, int(n * float(os.environ.get("GOATHERD_BENCH_SCALE", "1"))))


def _repeat() -> int:
    return max(1, int(os.environ.get("GOATHERD_BENCH_REPEAT", "3")))


def payload(owner: str, n: int) -> dict[str, object]:
    """The payload every scenario appends (and the raw baselines insert)."""
    return {
        "tool": "bash",
        "cmd": f"pytest -q tests/unit/test_{n % 97}.py",
        "owner": owner,
        "n": n,
        "ok": n % 7 != 0,
        "elapsed_ms": 100 + n % 1000,
    }


def draft(owner: str, n: int) -> RecordDraft:
    return RecordDraft("capture", "bench.tool.bash.v1", payload(owner, n), "bash")


def single(intent: str, owner: str, n: int) -> AppendBatch:
    return AppendBatch(intent, (AppendGroup(owner, fact_drafts=(draft(owner, n),)),))


def batch_of(intent: str, owner: str, first: int, size: int) -> AppendBatch:
    drafts = tuple(draft(owner, first + i) for i in range(size))
    return AppendBatch(intent, (AppendGroup(owner, fact_drafts=drafts),))


def _raw_row(tag: str, n: int) -> tuple[str, str]:
    body = json.dumps(payload(tag, n), sort_keys=True, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(f"{tag}:{body}".encode()).hexdigest(), body


# ------------------------------------------------------------------ output


def verdict(ok: bool) -> str:
    return "PASS" if ok else "MISS"


def report(name: str, figure: str, ratio: float, target: str, ok: bool) -> None:
    print(f"{name:<15} {figure}  ratio {ratio:.2f} (target {target})  {verdict(ok)}")


def best(samples: list[float]) -> float:
    return max(samples)


def best_of(samples: list[Rates], index: int) -> float:
    return max(sample[index] for sample in samples)


@contextmanager
def tempdir() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="goatherd-bench-") as tmp:
        yield Path(tmp)


# ------------------------------------------------------------------ raw SQLite


def _raw_sqlite(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("CREATE TABLE IF NOT EXISTS t (id TEXT PRIMARY KEY, body TEXT)")
    return conn


Rates = tuple[float, float]
"""Per second of wall time, and per second of process CPU time."""


class _Clock:
    def __init__(self) -> None:
        self.wall = time.perf_counter()
        self.cpu = time.process_time()

    def rates(self, count: int) -> Rates:
        wall = time.perf_counter() - self.wall
        cpu = time.process_time() - self.cpu
        return count / wall, count / max(cpu, 1e-9)


def raw_sqlite_singles(path: Path, count: int, tag: str = "raw") -> Rates:
    """Return rows per second of one-row transactions on a raw sqlite3 table."""
    conn = _raw_sqlite(path)
    clock = _Clock()
    for n in range(count):
        row = _raw_row(tag, n)
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT INTO t VALUES (?, ?)", row)
        conn.execute("COMMIT")
    rates = clock.rates(count)
    conn.close()
    return rates


def raw_sqlite_batches(path: Path, batches: int, size: int) -> Rates:
    """Return rows per second of ``size``-row ``executemany`` transactions."""
    conn = _raw_sqlite(path)
    clock = _Clock()
    for b in range(batches):
        rows = [_raw_row("raw", b * size + i) for i in range(size)]
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany("INSERT INTO t VALUES (?, ?)", rows)
        conn.execute("COMMIT")
    rates = clock.rates(batches * size)
    conn.close()
    return rates


def store_sql_floor(path: Path, count: int) -> Rates:
    """Return appends per second of the store's own statements, without Python.

    A fresh store file (schema and the first witnesses created by the store),
    then the exact statements a single-record append issues (the opening read,
    intent, context, record, path entry, owner head, counters), values
    precomputed: the ceiling the SQL layout sets for ``store_singles``.
    """
    with open_trace_store(str(path)) as store:
        store.append(TRUSTED_APPEND_CONTEXT, single("floor:warm", "agent:f", -1))
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA foreign_keys=ON")
    conn.execute("PRAGMA synchronous=NORMAL")
    rows = []
    for n in range(count):
        record_id, body = _raw_row("floor", n)
        intent = f"floor:{n}"
        context = "context:" + hashlib.sha256(intent.encode()).hexdigest()[:32]
        rows.append((n, intent, context, record_id, '{"payload":' + body + "}"))
    witness = conn.execute(
        "SELECT record_id FROM records WHERE schema_ref = 'kernel.witness.v1'"
    ).fetchone()[0]
    clock = _Clock()
    for n, intent, context, record_id, body in rows:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(
            _FLOOR_STATE,
            ("next_commit_seq", "head", intent, "agent:f", "kernel:witness"),
        ).fetchall()
        conn.execute(_FLOOR_INTENT, (intent, "0" * 64, "{}", n + 1))
        conn.execute(_FLOOR_CONTEXT, (context, intent))
        conn.execute(_FLOOR_RECORD, (record_id, record_id, witness, body, intent))
        conn.execute(
            _FLOOR_ENTRY, (n + 1, record_id, context, intent, f"commit:{n + 1}", n + 1)
        )
        conn.execute(_FLOOR_HEAD, ("agent:f", n + 2))
        conn.executemany(
            _FLOOR_META, [("next_commit_seq", str(n + 2)), ("head", str(n + 2))]
        )
        conn.execute("COMMIT")
    rates = clock.rates(count)
    conn.close()
    return rates


_FLOOR_STATE = (
    "SELECT 0, key, value, NULL FROM meta WHERE key IN (?, ?) UNION ALL "
    "SELECT 1, append_intent_id, batch_digest, receipt_json FROM append_intents "
    "WHERE append_intent_id IN (?) UNION ALL SELECT 2, trace_owner_id, "
    "CAST(next_ordinal AS TEXT), NULL FROM owner_ordinals "
    "WHERE trace_owner_id IN (?, ?)"
)
_FLOOR_INTENT = (
    "INSERT INTO append_intents (append_intent_id, batch_digest, receipt_json, "
    "commit_seq) VALUES (?, ?, ?, ?)"
)
_FLOOR_CONTEXT = (
    "INSERT INTO contexts VALUES (?, '[]', '[]', '[\"shepherd2-slice-a\"]', '[]', "
    "'sqlite.local.v1', 'contained', ?) ON CONFLICT (context_id) DO NOTHING"
)
_FLOOR_RECORD = (
    "INSERT INTO records (record_id, digest, schema_ref, mode, witness_ref, "
    "caused_by_json, body_json, append_intent_id) VALUES (?, ?, 'bench.tool.bash.v1', "
    "'capture', ?, '[]', ?, ?) ON CONFLICT (record_id) DO NOTHING"
)
_FLOOR_ENTRY = (
    "INSERT INTO path_entries (path_ref, path_ordinal, record_id, "
    "retained_context_ref, kind_label, append_intent_id, commit_receipt, position) "
    "VALUES ('agent:f', ?, ?, ?, 'bash', ?, ?, ?)"
)
_FLOOR_HEAD = (
    "INSERT INTO owner_ordinals VALUES (?, ?) ON CONFLICT (trace_owner_id) "
    "DO UPDATE SET next_ordinal = excluded.next_ordinal"
)
_FLOOR_META = (
    "INSERT INTO meta VALUES (?, ?) "
    "ON CONFLICT (key) DO UPDATE SET value = excluded.value"
)


# ------------------------------------------------------------------ store runs


def store_singles(url: str, count: int, owner: str = "agent:a") -> Rates:
    """Return single-record appends per second of one caller on a fresh store."""
    with open_trace_store(url) as store:
        store.append(TRUSTED_APPEND_CONTEXT, single(f"{owner}:warm", owner, -1))
        clock = _Clock()
        for n in range(count):
            store.append(TRUSTED_APPEND_CONTEXT, single(f"{owner}:{n}", owner, n))
        return clock.rates(count)


def store_batches(url: str, batches: int, size: int) -> Rates:
    """Return records per second of ``size``-record batches on a fresh store."""
    with open_trace_store(url) as store:
        store.append(TRUSTED_APPEND_CONTEXT, single("warm", "agent:c", -1))
        clock = _Clock()
        for b in range(batches):
            store.append(
                TRUSTED_APPEND_CONTEXT, batch_of(f"c:{b}", "agent:c", b * size, size)
            )
        return clock.rates(batches * size)


def store_threads(url: str, writers: int, per_writer: int) -> float:
    """Return the aggregate append rate of ``writers`` threads on one store."""
    with open_trace_store(url) as store:
        store.append(TRUSTED_APPEND_CONTEXT, single("warm", "agent:warm", -1))
        barrier = threading.Barrier(writers + 1)

        def work(k: int) -> None:
            owner = f"agent:t{k}"
            barrier.wait()
            for n in range(per_writer):
                store.append(TRUSTED_APPEND_CONTEXT, single(f"{owner}:{n}", owner, n))

        threads = [threading.Thread(target=work, args=(k,)) for k in range(writers)]
        for thread in threads:
            thread.start()
        barrier.wait()
        start = time.perf_counter()
        for thread in threads:
            thread.join()
        return writers * per_writer / (time.perf_counter() - start)


def _process_writer(
    url: str, owner: str, count: int, barrier: Any, out: Any, gapless: bool = False
) -> None:
    if gapless:
        from goatherd.infrastructure.store import postgres as pg

        pg.ALLOCATE_SQL = GAPLESS_ALLOCATE_SQL  # type: ignore[misc]
    with open_trace_store(url) as store:
        store.append(TRUSTED_APPEND_CONTEXT, single(f"{owner}:warm", owner, -1))
        barrier.wait()
        start, cpu = time.perf_counter(), time.process_time()
        for n in range(count):
            store.append(TRUSTED_APPEND_CONTEXT, single(f"{owner}:{n}", owner, n))
        out.put((start, time.perf_counter(), time.process_time() - cpu))


def store_processes(url: str, writers: int, per_writer: int) -> float:
    """Return the aggregate append rate of ``writers`` processes on one trace."""
    return store_process_rates(url, writers, per_writer)[0]


def store_process_rates(
    url: str, writers: int, per_writer: int, *, gapless: bool = False
) -> Rates:
    """Aggregate appends per wall second and per CPU second of the writers."""
    open_trace_store(url).close()
    if gapless:
        install_gapless_allocator(url)
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(writers)
    out = ctx.Queue()
    procs = [
        ctx.Process(
            target=_process_writer,
            args=(url, f"agent:p{k}", per_writer, barrier, out, gapless),
        )
        for k in range(writers)
    ]
    for proc in procs:
        proc.start()
    spans: list[tuple[float, float, float]] = [out.get(timeout=600) for _ in procs]
    for proc in procs:
        proc.join()
        if proc.exitcode != 0:
            raise RuntimeError(f"writer process exited with {proc.exitcode}")
    start = min(s for s, _, _ in spans)
    end = max(e for _, e, _ in spans)
    cpu = sum(c for _, _, c in spans)
    return writers * per_writer / (end - start), writers * per_writer / max(cpu, 1e-9)


# ------------------------------------------------------------------ SQLite


def _ratios(ours: list[Rates], raws: list[Rates]) -> Rates:
    """Median over the interleaved rounds of each round's ratio (wall, CPU)."""
    return (
        statistics.median(o[0] / r[0] for o, r in zip(ours, raws, strict=True)),
        statistics.median(o[1] / r[1] for o, r in zip(ours, raws, strict=True)),
    )


def _median(samples: list[Rates], index: int) -> float:
    return statistics.median(sample[index] for sample in samples)


def sqlite_single() -> None:
    count = _scale(3000)
    ours, raws, floors = [], [], []
    for k in range(_repeat()):
        with tempdir() as tmp:
            raws.append(raw_sqlite_singles(tmp / "raw.sqlite", count))
            ours.append(store_singles(str(tmp / f"s{k}.sqlite"), count))
            floors.append(store_sql_floor(tmp / f"f{k}.sqlite", count))
    wall, cpu = _ratios(ours, raws)
    floor_wall, floor_cpu = _ratios(floors, raws)
    report(
        "sqlite-single",
        f"{_median(ours, 0):,.0f} appends/s vs raw {_median(raws, 0):,.0f}/s, "
        f"per CPU second {_median(ours, 1):,.0f} vs {_median(raws, 1):,.0f} "
        f"(medians of {len(raws)} interleaved rounds; CPU ratio {cpu:.2f}, wall "
        f"{wall:.2f}; the store's SQL alone {floor_cpu:.2f} CPU, "
        f"{floor_wall:.2f} wall)",
        min(wall, cpu),
        ">= 0.25, CPU and wall",
        min(wall, cpu) >= 0.25,
    )


def sqlite_group() -> None:
    per = _scale(500)
    one, threads, procs = [], [], []
    for k in range(_repeat()):
        with tempdir() as tmp:
            one.append(store_singles(str(tmp / f"o{k}.sqlite"), per * 2)[0])
            threads.append(store_threads(str(tmp / f"t{k}.sqlite"), WRITERS, per))
            procs.append(store_processes(str(tmp / f"p{k}.sqlite"), WRITERS, per))
    base = best(one)
    for name, rates in (("threads", threads), ("processes", procs)):
        ratio = best(rates) / base
        report(
            f"sqlite-group/{name[0]}",
            f"{WRITERS} {name}: {best(rates):,.0f} appends/s vs one {base:,.0f}/s",
            ratio,
            ">= 3.0",
            ratio >= 3.0,
        )


def sqlite_batch() -> None:
    batches = _scale(100)
    ours, raws = [], []
    for k in range(_repeat()):
        with tempdir() as tmp:
            raws.append(raw_sqlite_batches(tmp / "raw.sqlite", batches, 100))
            ours.append(store_batches(str(tmp / f"b{k}.sqlite"), batches, 100))
    wall, cpu = _ratios(ours, raws)
    report(
        "sqlite-batch",
        f"{_median(ours, 0):,.0f} records/s vs raw {_median(raws, 0):,.0f}/s, "
        f"per CPU second {_median(ours, 1):,.0f} vs {_median(raws, 1):,.0f} "
        f"(medians of {len(raws)} interleaved rounds; CPU ratio {cpu:.2f}, "
        f"wall {wall:.2f})",
        min(wall, cpu),
        ">= 0.50, CPU and wall",
        min(wall, cpu) >= 0.50,
    )


# ------------------------------------------------------------------ PostgreSQL


def pg_url() -> str | None:
    return os.environ.get("GOATHERD_BENCH_DB_URL") or os.environ.get(
        "GOATHERD_TEST_DB_URL"
    )


def reset_postgres(url: str) -> None:
    """Empty the benchmark database: each run starts from nothing."""
    import sqlalchemy as sa

    engine = sa.create_engine(url)
    try:
        with engine.begin() as conn:
            conn.execute(sa.text("DROP SCHEMA public CASCADE"))
            conn.execute(sa.text("CREATE SCHEMA public"))
    finally:
        engine.dispose()


def _libpq(url: str) -> str:
    from sqlalchemy.engine import make_url

    parsed = make_url(url).set(drivername="postgresql")
    return parsed.render_as_string(hide_password=False)


def _raw_pg_writer(dsn: str, tag: str, count: int, barrier: Any, out: Any) -> None:
    import psycopg

    with psycopg.connect(dsn) as conn:
        barrier.wait()
        start, cpu = time.perf_counter(), time.process_time()
        for n in range(count):
            conn.execute("INSERT INTO t VALUES (%s, %s)", _raw_row(tag, n))
            conn.commit()
        out.put((start, time.perf_counter(), time.process_time() - cpu))


# Option (a) of ADR 0076, measured beside what the store does: positions and
# commit numbers from a counter row, updated under its row lock, which the
# transaction holds until it ends. A writer that dies rolls the update back,
# so nothing is ever abandoned; the price is that every writer waits for the
# one before it to COMMIT (its inserts and its WAL flush) before it draws.
_GAPLESS_DDL = (
    "CREATE TABLE IF NOT EXISTS goatherd_bench_counters "
    "(k integer PRIMARY KEY, next_position bigint NOT NULL, "
    "next_commit bigint NOT NULL)",
    "INSERT INTO goatherd_bench_counters VALUES (0, "
    "(SELECT COALESCE(max(position) + 1, 0) FROM path_entries), "
    "(SELECT COALESCE(max(commit_seq) + 1, 0) FROM append_intents)) "
    "ON CONFLICT (k) DO NOTHING",
    """
CREATE OR REPLACE FUNCTION goatherd_allocate_gapless(positions integer, commits integer)
RETURNS bigint[] LANGUAGE plpgsql AS $fn$
DECLARE
    xid bigint := pg_current_xact_id()::text::bigint;
    p bigint;
    c bigint;
BEGIN
    UPDATE goatherd_bench_counters
       SET next_position = next_position + positions,
           next_commit = next_commit + commits
     WHERE k = 0
    RETURNING next_position - positions, next_commit - commits INTO p, c;
    PERFORM pg_advisory_xact_lock_shared(-1,
        ('goatherd_positions'::regclass::oid::bigint)::bit(32)::integer);
    IF positions > 0 THEN
        PERFORM pg_advisory_xact_lock_shared((p >> 32)::integer,
            (p & 4294967295)::bit(32)::integer);
    END IF;
    IF commits > 0 THEN
        PERFORM pg_advisory_xact_lock_shared(((c >> 32) | 1073741824)::integer,
            (c & 4294967295)::bit(32)::integer);
    END IF;
    RETURN ARRAY[xid, CASE WHEN positions > 0 THEN p ELSE -1 END,
                 CASE WHEN commits > 0 THEN c ELSE -1 END];
END
$fn$""",
)
GAPLESS_ALLOCATE_SQL = "SELECT goatherd_allocate_gapless(?, ?)"


def install_gapless_allocator(url: str) -> None:
    """Create option (a)'s allocator beside the store's (writers opt in)."""
    import sqlalchemy as sa

    engine = sa.create_engine(url)
    try:
        with engine.begin() as conn:
            for statement in _GAPLESS_DDL:
                conn.exec_driver_sql(statement)
    finally:
        engine.dispose()


def raw_pg(url: str, writers: int, per_writer: int) -> float:
    """Return the aggregate commit rate of raw psycopg one-row transactions."""
    return raw_pg_rates(url, writers, per_writer)[0]


def raw_pg_rates(url: str, writers: int, per_writer: int) -> Rates:
    """Raw psycopg one-row transactions: per wall second, per client CPU second."""
    import psycopg

    reset_postgres(url)
    dsn = _libpq(url)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE t (id TEXT PRIMARY KEY, body TEXT)")
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(writers)
    out = ctx.Queue()
    procs = [
        ctx.Process(
            target=_raw_pg_writer, args=(dsn, f"w{k}", per_writer, barrier, out)
        )
        for k in range(writers)
    ]
    for proc in procs:
        proc.start()
    spans: list[tuple[float, float, float]] = [out.get(timeout=600) for _ in procs]
    for proc in procs:
        proc.join()
    wall = max(e for _, e, _ in spans) - min(s for s, _, _ in spans)
    cpu = sum(c for _, _, c in spans)
    return writers * per_writer / wall, writers * per_writer / max(cpu, 1e-9)


def pg_runs(url: str) -> None:
    per = _scale(1000)
    one, many, raw_one, raw_many, batches = [], [], [], [], []
    for _ in range(_repeat()):
        raw_one.append(raw_pg(url, 1, per))
        raw_many.append(raw_pg(url, PG_WRITERS, per))
        reset_postgres(url)
        one.append(store_processes(url, 1, per))
        reset_postgres(url)
        many.append(store_processes(url, PG_WRITERS, per))
        reset_postgres(url)
        batches.append(store_batches(url, _scale(100), 100)[0])
    report(
        "pg-single",
        f"{best(one):,.0f} appends/s (raw psycopg {best(raw_one):,.0f}/s)",
        best(one) / best(raw_one),
        ">= 1,500/s",
        best(one) >= 1500,
    )
    ratio = best(many) / best(one)
    report(
        "pg-writers",
        f"{PG_WRITERS} writers {best(many):,.0f} appends/s vs one {best(one):,.0f}/s"
        f" (raw psycopg {best(raw_many) / best(raw_one):.2f}x)",
        ratio,
        ">= 2.5",
        ratio >= 2.5,
    )
    report(
        "pg-batch",
        f"{best(batches):,.0f} records/s in 100-record batches",
        best(batches) / 20_000,
        ">= 20,000/s",
        best(batches) >= 20_000,
    )


def pg_allocation(url: str) -> None:
    """ADR 0076: holes recorded by the seal (the store) vs numbers drawn at commit.

    Interleaved rounds of raw psycopg, the store as it is (``recorded``: the
    sequences, holes recorded later) and the store with option (a)'s
    allocator (``gapless``), 1 and 4 writer processes each; best of each.
    Targets: one writer >= 0.5 of raw psycopg, 4 writers >= 2x one.
    """
    per = _scale(1000)
    runs: dict[str, list[Rates]] = {}
    for _ in range(_repeat()):
        for writers in (1, PG_WRITERS):
            runs.setdefault(f"raw/{writers}", []).append(
                raw_pg_rates(url, writers, per)
            )
            for name, gapless in (("recorded", False), ("gapless", True)):
                reset_postgres(url)
                runs.setdefault(f"{name}/{writers}", []).append(
                    store_process_rates(url, writers, per, gapless=gapless)
                )
    reset_postgres(url)
    raw1, raw4 = runs["raw/1"], runs[f"raw/{PG_WRITERS}"]
    print(
        f"pg raw psycopg    1 writer {best_of(raw1, 0):,.0f}/s "
        f"({best_of(raw1, 1):,.0f} per CPU s), {PG_WRITERS} writers "
        f"{best_of(raw4, 0):,.0f}/s ({best_of(raw4, 1):,.0f} per CPU s)"
    )
    for name in ("recorded", "gapless"):
        one, many = runs[f"{name}/1"], runs[f"{name}/{PG_WRITERS}"]
        print(
            f"pg {name:<14} 1 writer {best_of(one, 0):,.0f}/s "
            f"({best_of(one, 1):,.0f} per CPU s), {PG_WRITERS} writers "
            f"{best_of(many, 0):,.0f}/s ({best_of(many, 1):,.0f} per CPU s)"
        )
        vs_raw = best_of(one, 0) / best_of(raw1, 0)
        report(
            f"pg-{name}-raw",
            f"one writer {best_of(one, 0):,.0f}/s vs raw psycopg "
            f"{best_of(raw1, 0):,.0f}/s",
            vs_raw,
            ">= 0.5",
            vs_raw >= 0.5,
        )
        scale = best_of(many, 0) / best_of(one, 0)
        report(
            f"pg-{name}-4w",
            f"{PG_WRITERS} writers {best_of(many, 0):,.0f}/s vs one "
            f"{best_of(one, 0):,.0f}/s",
            scale,
            ">= 2.0",
            scale >= 2.0,
        )


# ------------------------------------------------------------------ memory


def _rss_mb() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _memory_writer(path: str, records: int, out: Any) -> None:
    with open_trace_store(path) as store:
        store.append(TRUSTED_APPEND_CONTEXT, single("warm", "agent:m0", -1))
        opened = _rss_mb()
        size = 100
        for b in range(records // size):
            owner = f"agent:m{b % 50}"
            store.append(
                TRUSTED_APPEND_CONTEXT, batch_of(f"m:{b}", owner, b * size, size)
            )
        out.put((opened, _rss_mb()))


def memory() -> None:
    records = _scale(300_000)
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    with tempdir() as tmp:
        proc = ctx.Process(
            target=_memory_writer, args=(str(tmp / "m.sqlite"), records, out)
        )
        proc.start()
        opened, final = out.get(timeout=1800)
        proc.join()
    report(
        "memory",
        f"writer RSS {final:.0f} MB after {records:,} records "
        f"(opened store: {opened:.0f} MB, growth {final - opened:.0f} MB)",
        final / 64,
        "<= 64 MB",
        final <= 64,
    )


# ------------------------------------------------------------------ flat


def _rate_window(store: Any, tag: str, count: int) -> float:
    start = time.perf_counter()
    for n in range(count):
        owner = f"agent:f{n % 100}"
        store.append(TRUSTED_APPEND_CONTEXT, single(f"{tag}:{n}", owner, n))
    return count / (time.perf_counter() - start)


def flat() -> None:
    total = _scale(1_000_000)
    window = _scale(2000)
    marks = [0, total // 4, total // 2, total]
    rates: dict[int, float] = {}
    with tempdir() as tmp, open_trace_store(str(tmp / "f.sqlite")) as store:
        filled = 0
        size = 1000
        for mark in marks:
            while filled < mark:
                owner = f"agent:f{(filled // size) % 100}"
                store.append(
                    TRUSTED_APPEND_CONTEXT,
                    batch_of(f"fill:{filled}", owner, filled, min(size, mark - filled)),
                )
                filled = min(mark, filled + size)
            rates[mark] = max(
                _rate_window(store, f"w{mark}:{k}", window) for k in range(_repeat())
            )
            filled += window * _repeat()
    figures = ", ".join(f"{m:,}: {r:,.0f}/s" for m, r in rates.items())
    ratio = rates[total] / rates[0]
    report("flat", f"single appends at {figures}", ratio, ">= 0.80", ratio >= 0.80)


# ------------------------------------------------------------------ runner

SCENARIOS: dict[str, Callable[[], None]] = {
    "sqlite-single": sqlite_single,
    "sqlite-group": sqlite_group,
    "sqlite-batch": sqlite_batch,
    "pg": lambda: pg_runs(url) if (url := pg_url()) else print("pg: skipped"),
    "memory": memory,
    "flat": flat,
    "pg-allocation": lambda: (
        pg_allocation(url) if (url := pg_url()) else print("pg-allocation: skipped")
    ),
}


def run() -> None:
    only = [s for s in os.environ.get("GOATHERD_BENCH_ONLY", "").split(",") if s]
    unknown = sorted(set(only) - set(SCENARIOS))
    if unknown:
        raise SystemExit(f"unknown scenario(s): {', '.join(unknown)}")
    print(f"load average at start: {os.getloadavg()}", flush=True)
    for name, scenario in SCENARIOS.items():
        if not only or name in only:
            scenario()
    print(f"load average at end: {os.getloadavg()}", flush=True)
