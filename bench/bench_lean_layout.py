"""A prototype of a leaner SQLite trace layout, measured against raw sqlite3 (ADR 0080).

Not wired into the store: this module only replays, with plain ``sqlite3`` and
precomputed values, the statements an append would issue under a layout with
fewer B-trees per commit, next to the same replay of today's layout
(``store_sql_floor`` of ``bench_throughput``) and the raw baseline, in
interleaved rounds. It then reads the prototype back the ways the store must
(the log after a position, an owner's path prefix, one record by id, the
commit chain recomputed) to show that each read still has its access path.

The lean layout (``_LEAN_SCHEMA``):

- ``commits``: one row per commit, its rowid the commit's first log position
  (positions are gap-free and in commit order, so the rowid orders the log),
  holding what today sits in ``append_intents``, ``contexts``, ``meta`` and
  ``path_entries``: the intent, batch digest, receipt, commit time, commit and
  head digests, the new contexts and the path entries (JSON, one array per
  commit).
- ``intent_index`` (intent id -> position) and ``context_index`` (context id
  -> position): the two lookups by a random key, without rowid.
- ``records``: content-addressed rows keyed by record id, without rowid (one
  B-tree instead of a rowid table and its primary-key index).
- ``path_index``: (owner, ordinal) -> position, without rowid; an owner's
  head is its last key, so no ``owner_ordinals`` row is written.
- The counters and the head are the last commit row's: no ``meta`` write.

Per single-record append that is 5 B-trees (today 9 plus ``meta``:
``append_intents``, ``contexts``, ``records`` and its two indexes,
``path_entries`` and its two indexes, ``owner_ordinals``). Dropped: the
``schema_ref`` index (a log read filtered by schema scans the log instead).

Knobs: ``GOATHERD_BENCH_SCALE`` (counts), ``GOATHERD_BENCH_REPEAT`` (rounds, 5).
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import statistics
import tempfile
from pathlib import Path

from bench.bench_throughput import (
    Rates,
    _Clock,
    _raw_row,
    raw_sqlite_batches,
    raw_sqlite_singles,
    store_batches,
    store_singles,
    store_sql_floor,
)

_LEAN_SCHEMA = (
    "CREATE TABLE commits (position INTEGER PRIMARY KEY, commit_seq INTEGER NOT "
    "NULL, append_intent_id TEXT NOT NULL, batch_digest TEXT NOT NULL, "
    "receipt_json TEXT NOT NULL, committed_at TEXT NOT NULL, commit_digest TEXT "
    "NOT NULL, head_digest TEXT NOT NULL, contexts_json TEXT NOT NULL, "
    "entries_json TEXT NOT NULL)",
    "CREATE TABLE intent_index (append_intent_id TEXT PRIMARY KEY, position "
    "INTEGER NOT NULL) WITHOUT ROWID",
    "CREATE TABLE context_index (context_id TEXT PRIMARY KEY, position INTEGER "
    "NOT NULL) WITHOUT ROWID",
    "CREATE TABLE records (record_id TEXT PRIMARY KEY, schema_ref TEXT NOT NULL, "
    "mode TEXT NOT NULL, witness_ref TEXT NOT NULL, caused_by_json TEXT NOT NULL, "
    "body_json TEXT NOT NULL, position INTEGER NOT NULL) WITHOUT ROWID",
    "CREATE TABLE path_index (path_ref TEXT NOT NULL, ordinal INTEGER NOT NULL, "
    "position INTEGER NOT NULL, PRIMARY KEY (path_ref, ordinal)) WITHOUT ROWID",
)
_OPEN = (
    "SELECT 0, position, commit_seq, head_digest FROM "
    "(SELECT position, commit_seq, head_digest FROM commits ORDER BY position DESC "
    "LIMIT 1) UNION ALL SELECT 1, position, NULL, NULL FROM intent_index WHERE "
    "append_intent_id = ? UNION ALL SELECT 2, max(ordinal), NULL, NULL FROM "
    "path_index WHERE path_ref = ?"
)
_COMMIT = "INSERT INTO commits VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
_INTENT = "INSERT INTO intent_index VALUES (?, ?)"
_CONTEXT = "INSERT INTO context_index VALUES (?, ?)"
_RECORD = (
    "INSERT INTO records VALUES (?, 'bench.tool.bash.v1', 'capture', ?, '[]', ?, ?) "
    "ON CONFLICT (record_id) DO NOTHING"
)
_PATH = "INSERT INTO path_index VALUES (?, ?, ?)"
_CONTEXT_JSON = (
    '[["{}","[]","[]","[\\"shepherd2-slice-a\\"]","[]","sqlite.local.v1","contained"]]'
)


def _lean(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    for statement in _LEAN_SCHEMA:
        conn.execute(statement)
    return conn


def _commit_values(
    n: int, position: int, records: list[str]
) -> tuple[tuple[object, ...], str]:
    intent = f"lean:{n}"
    context = "context:" + hashlib.sha256(intent.encode()).hexdigest()[:32]
    entries = json.dumps(
        [
            ["agent:l", position - 1 + k, rid, context, "bash"]
            for k, rid in enumerate(records)
        ]
    )
    digest = hashlib.sha256(entries.encode()).hexdigest()
    values = (
        position,
        n,
        intent,
        "0" * 64,
        '{"append_intent_id":"' + intent + '"}',
        "2026-12-02 12:00:00",
        digest,
        digest,
        _CONTEXT_JSON.format(context),
        entries,
    )
    return values, context


def lean_singles(path: Path, count: int) -> Rates:
    """Appends per second of single-record commits in the lean layout."""
    conn = _lean(path)
    witness = "sha256:" + "1" * 64
    prepared = []
    for n in range(count):
        record_id, body = _raw_row("lean", n)
        values, context = _commit_values(n, n + 1, [record_id])
        prepared.append((values, context, record_id, '{"payload":' + body + "}"))
    clock = _Clock()
    for values, context, record_id, body in prepared:
        position, intent = int(str(values[0])), values[2]
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(_OPEN, (intent, "agent:l")).fetchall()
        conn.execute(_COMMIT, values)
        conn.execute(_INTENT, (intent, position))
        conn.execute(_CONTEXT, (context, position))
        conn.execute(_RECORD, (record_id, witness, body, position))
        conn.execute(_PATH, ("agent:l", position - 1, position))
        conn.execute("COMMIT")
    rates = clock.rates(count)
    conn.close()
    return rates


def lean_batches(path: Path, batches: int, size: int) -> Rates:
    """Records per second of ``size``-record commits in the lean layout."""
    conn = _lean(path)
    witness = "sha256:" + "1" * 64
    prepared = []
    for b in range(batches):
        rows = [_raw_row("lean", b * size + i) for i in range(size)]
        position = b * size + 1
        values, context = _commit_values(b, position, [r for r, _ in rows])
        records = [
            (r, witness, '{"payload":' + body + "}", position + k)
            for k, (r, body) in enumerate(rows)
        ]
        paths = [("agent:l", position - 1 + k, position + k) for k in range(size)]
        prepared.append((values, context, records, paths))
    clock = _Clock()
    for values, context, records, paths in prepared:
        intent = values[2]
        position = int(str(values[0]))
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(_OPEN, (intent, "agent:l")).fetchall()
        conn.execute(_COMMIT, values)
        conn.execute(_INTENT, (intent, position))
        conn.execute(_CONTEXT, (context, position))
        conn.executemany(_RECORD, records)
        conn.executemany(_PATH, paths)
        conn.execute("COMMIT")
    rates = clock.rates(batches * size)
    conn.close()
    return rates


def read_back(path: Path, records: int) -> str:
    """Read the lean trace the ways the store must; return what each read found."""
    conn = sqlite3.connect(path)
    try:
        log = conn.execute(
            "SELECT c.position, c.entries_json FROM commits c WHERE c.position > ? "
            "ORDER BY c.position",
            (records // 2,),
        ).fetchall()
        after = sum(len(json.loads(text)) for _, text in log)
        prefix = conn.execute(
            "SELECT p.ordinal, r.record_id FROM path_index p JOIN records r ON "
            "r.position = p.position WHERE p.path_ref = ? AND p.ordinal < ? "
            "ORDER BY p.ordinal",
            ("agent:l", 100),
        ).fetchall()
        one = conn.execute(
            "SELECT body_json FROM records WHERE record_id = ?", (prefix[-1][1],)
        ).fetchone()
        head = "0" * 64
        chained = 0
        for digest, _stored in conn.execute(
            "SELECT commit_digest, head_digest FROM commits ORDER BY position"
        ):
            head = hashlib.sha256(f"{head}\n{digest}".encode()).hexdigest()
            chained += 1
        intent = conn.execute(
            "SELECT position FROM intent_index WHERE append_intent_id = 'lean:7'"
        ).fetchone()
    finally:
        conn.close()
    return (
        f"log after {records // 2}: {after} entries; owner prefix: {len(prefix)} "
        f"records; record by id: {'found' if one else 'missing'}; chain walked over "
        f"{chained} commits; intent lookup: {'found' if intent else 'missing'}"
    )


def _median_ratio(ours: list[Rates], raws: list[Rates], index: int) -> float:
    return statistics.median(
        o[index] / r[index] for o, r in zip(ours, raws, strict=True)
    )


def _projected(
    store: Rates, floor: Rates, lean: Rates, raw: Rates, index: int
) -> float:
    """The ratio to raw of a lean-layout append that keeps today's Python.

    Per operation: today's append costs its SQL (the floor) plus its Python
    (the rest); a lean-layout store would cost the lean SQL plus that same
    Python. All four figures come from one round.
    """
    python = max(1 / store[index] - 1 / floor[index], 0.0)
    return (1 / raw[index]) / (1 / lean[index] + python)


def run() -> None:
    scale = float(os.environ.get("GOATHERD_BENCH_SCALE", "1"))
    rounds = max(1, int(os.environ.get("GOATHERD_BENCH_REPEAT", "5")))
    count, batches = max(1, int(2000 * scale)), max(1, int(100 * scale))
    print(f"load average at start: {os.getloadavg()}", flush=True)
    raw, floor, lean, store = [], [], [], []
    raw_b, lean_b, store_b = [], [], []
    for k in range(rounds):
        with tempfile.TemporaryDirectory(prefix="goatherd-lean-") as tmp:
            base = Path(tmp)
            raw.append(raw_sqlite_singles(base / "raw.sqlite", count))
            floor.append(store_sql_floor(base / f"f{k}.sqlite", count))
            lean.append(lean_singles(base / f"l{k}.sqlite", count))
            store.append(store_singles(str(base / f"s{k}.sqlite"), count))
            raw_b.append(raw_sqlite_batches(base / "rawb.sqlite", batches, 100))
            lean_b.append(lean_batches(base / f"lb{k}.sqlite", batches, 100))
            store_b.append(store_batches(str(base / f"sb{k}.sqlite"), batches, 100))
            if k == 0:
                print("lean read-back:", read_back(base / f"l{k}.sqlite", count))
    for name, ours, baseline in (
        ("single, the store", store, raw),
        ("single, today's layout SQL", floor, raw),
        ("single, lean layout SQL", lean, raw),
        ("100-record batch, the store", store_b, raw_b),
        ("100-record batch, lean layout SQL", lean_b, raw_b),
    ):
        cpu = _median_ratio(ours, baseline, 1)
        wall = _median_ratio(ours, baseline, 0)
        print(
            f"{name:<36} of raw: CPU {cpu:.2f}, wall {wall:.2f} "
            f"(median of {rounds} interleaved rounds)"
        )
    python_us = statistics.median(
        1e6 / s[1] - 1e6 / f[1] for s, f in zip(store, floor, strict=True)
    )
    raw_us = statistics.median(1e6 / r[1] for r in raw)
    print(
        f"single append's CPU outside its SQL: {python_us:.0f} us, "
        f"{python_us / raw_us:.1f} raw inserts (a raw insert + commit: {raw_us:.0f} us)"
    )
    projected = [
        min(_projected(s, f, le, r, 0), _projected(s, f, le, r, 1))
        for s, f, le, r in zip(store, floor, lean, raw, strict=True)
    ]
    ratio = statistics.median(projected)
    verdict = "PASS" if ratio >= 0.40 else "MISS"
    print(
        f"{verdict} a lean-layout single append >= 0.40 of raw (its SQL plus this "
        f"store's Python outside SQL, per round; CPU and wall): {ratio:.2f}"
    )
    print(f"load average at end: {os.getloadavg()}", flush=True)
