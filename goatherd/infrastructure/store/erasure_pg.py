"""Erasure on PostgreSQL: do what the role may, then say what remains (ADR 0077).

A redaction's ``UPDATE`` leaves each old row version (with the body) in the
table's pages; the WAL segments in ``pg_wal`` hold the body from its insert;
archives, replicas and backups hold copies the server cannot reach.
:func:`compact` runs after the redaction committed, on a connection of its
own in autocommit mode:

1. ``VACUUM (FULL)`` of every goatherd table that keeps payload bytes
   (``records``, the trace UI's ``traceui_entries``): the table is rewritten
   into new files holding only live row versions. A table counts as
   rewritten only when its file node changed (PostgreSQL skips, with a
   warning only, a table the role does not own).
2. ``CHECKPOINT`` and ``pg_switch_wal()``, when the role may: the segments
   holding the old bytes become eligible for recycling.
3. The checks: the table files (heap and TOAST) and every segment in
   ``pg_wal`` are read back through ``pg_read_binary_file`` and searched for
   pieces of every erased body; archiving, replication slots and standbys
   are looked up.

Everything it did or checked is one line of ``steps``; everything that may
still hold erased bytes is one line of ``remains``; the ids whose pieces were
found are ``bytes_left``. A step the role may not take is a line, never an
exception.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from goatherd.infrastructure.store.erasure import sample_windows

__all__ = ["PgErasure", "compact", "not_compacted"]

PAYLOAD_TABLES: Final = ("records", "traceui_entries")
"""The goatherd tables whose rows keep payload bytes."""
_SEGMENT_BYTES: Final = 1 << 30  # PostgreSQL splits a relation into 1 GiB files
_CHUNK_BYTES: Final = 16 << 20
_MAX_PIECES: Final = 512
_MESSAGE_CHARS: Final = 200
_WAL_SEGMENT_NAME_CHARS: Final = 24
_RETRY_SECONDS: Final = 0.25


@dataclass(slots=True)
class PgErasure:
    """What :func:`compact` did and found (one line per item)."""

    steps: list[str] = field(default_factory=list)
    remains: list[str] = field(default_factory=list)
    bytes_left: set[str] = field(default_factory=set)


def not_compacted() -> PgErasure:
    """The report of a PostgreSQL redaction that was not compacted."""
    report = PgErasure()
    report.remains.append(
        "table files: the old row versions stay until VACUUM (FULL) "
        "(not run: compact was not asked for)"
    )
    report.remains.append("WAL: not checked (compact was not asked for)")
    return report


def compact(
    engine: Any,
    bodies: Mapping[str, str],
    compressed: Sequence[str],
    wait_seconds: float,
) -> PgErasure:
    """Rewrite the payload tables, push the WAL on, and look for the bytes.

    ``bodies``: each erased record's stored body before the redaction;
    ``compressed``: the erased ids PostgreSQL had stored compressed (their
    bytes cannot be searched for); empty for a replay, whose bodies were
    erased when it first committed. Raises only when the server cannot be
    reached at all. ``wait_seconds``: how long to wait for each table's lock
    and for transactions older than the redaction, which keep the old row
    versions alive through a rewrite.
    """
    report = PgErasure()
    conn = engine.raw_connection()
    try:
        conn.rollback()
        raw = conn.driver_connection
        raw.autocommit = True
        lock_ms = max(int(wait_seconds * 1000), 1)
        raw.execute(f"SET lock_timeout = {lock_ms}")
        tables = [t for t in PAYLOAD_TABLES if _oid(raw, t) is not None]
        pieces = _pieces(raw, bodies)
        _rewrite(raw, tables, pieces, report, time.monotonic() + wait_seconds)
        _run(raw, "CHECKPOINT", "CHECKPOINT", report)
        _run(raw, "SELECT pg_switch_wal()", "pg_switch_wal()", report)
        _run(raw, "CHECKPOINT", "CHECKPOINT", report)
        if not bodies:
            report.remains.append(
                "erased bodies: not searched for (a replay of a committed "
                "redaction: the old bodies are no longer known)"
            )
        if compressed:
            report.remains.append(
                f"{_records(len(compressed))} stored compressed: their bytes "
                "cannot be searched for (the WAL may hold them)"
            )
            report.bytes_left.update(compressed)
        _check_wal(raw, pieces, report)
        _check_copies(raw, report)
    finally:
        conn.invalidate()  # its session settings are not the pool's
    return report


def _oid(raw: Any, table: str) -> int | None:
    row = raw.execute("SELECT to_regclass(%s)::oid", (table,)).fetchone()
    return None if row is None or row[0] is None else int(row[0])


def _filenode(raw: Any, table: str) -> int | None:
    row = raw.execute("SELECT pg_relation_filenode(to_regclass(%s))", (table,))
    found = row.fetchone()
    return None if found is None or found[0] is None else int(found[0])


def _rewrite(
    raw: Any,
    tables: Sequence[str],
    pieces: Mapping[bytes, str],
    report: PgErasure,
    deadline: float,
) -> None:
    """Rewrite and check the tables, again while an old snapshot keeps the bytes.

    ``VACUUM (FULL)`` copies a row version that a transaction open since
    before the redaction may still see; once that transaction ends, a new
    rewrite drops it.
    """
    while True:
        attempt = PgErasure()
        for table in tables:
            _vacuum_full(raw, table, attempt)
        _check_tables(raw, tables, pieces, attempt)
        if not attempt.bytes_left or time.monotonic() >= deadline:
            break
        time.sleep(_RETRY_SECONDS)
    report.steps.extend(attempt.steps)
    report.remains.extend(attempt.remains)
    report.bytes_left |= attempt.bytes_left
    if attempt.bytes_left:
        report.remains.extend(_holders(raw))


def _holders(raw: Any) -> list[str]:
    """One line per session of this database whose snapshot keeps old rows."""
    rows = raw.execute(
        "SELECT pid, state, xact_start FROM pg_stat_activity "
        "WHERE datname = current_database() AND pid <> pg_backend_pid() "
        "AND (backend_xmin IS NOT NULL OR backend_xid IS NOT NULL) ORDER BY xact_start"
    ).fetchall()
    return [
        f"session pid {pid} ({state}, transaction since {start}): its snapshot "
        "keeps the old row versions; rerun once it ends"
        for pid, state, start in rows
    ]


def _records(count: int) -> str:
    return f"{count} erased record{'' if count == 1 else 's'}"


def _vacuum_full(raw: Any, table: str, report: PgErasure) -> None:
    before = _filenode(raw, table)
    try:
        raw.execute(f'VACUUM (FULL) "{table}"')
    except raw.Error as exc:
        report.remains.append(
            f"table {table}: not rewritten, VACUUM (FULL) failed ({_message(exc)})"
        )
        return
    if _filenode(raw, table) == before:
        report.remains.append(
            f"table {table}: not rewritten (VACUUM (FULL) skipped it: only the "
            "table's owner or a superuser may)"
        )
        return
    report.steps.append(f"VACUUM (FULL) {table}: rewritten without old row versions")


def _run(raw: Any, sql: str, name: str, report: PgErasure) -> None:
    try:
        raw.execute(sql)
    except raw.Error as exc:
        report.steps.append(f"{name}: not run ({_message(exc)})")
        return
    report.steps.append(f"{name}: done")


def _pieces(raw: Any, bodies: Mapping[str, str]) -> dict[bytes, str]:
    """Map each piece to look for to its record id (at most 512, spread).

    A piece some live record's body holds too proves nothing and is left out.
    """
    windows = sorted({w for body in bodies.values() for w in sample_windows(body)})
    shared: set[str] = set()
    if windows:
        shared = {
            str(piece)
            for (piece,) in raw.execute(
                "SELECT p FROM unnest(%s::text[]) AS p WHERE EXISTS "
                "(SELECT 1 FROM records WHERE strpos(body_json, p) > 0)",
                (windows,),
            ).fetchall()
        }
    per_record = {
        record_id: [w.encode() for w in sample_windows(body) if w not in shared]
        for record_id, body in sorted(bodies.items())
    }
    pieces: dict[bytes, str] = {}
    depth = 0
    while len(pieces) < _MAX_PIECES:
        added = False
        for record_id, own in per_record.items():
            if depth < len(own) and len(pieces) < _MAX_PIECES:
                pieces.setdefault(own[depth], record_id)
                added = True
        if not added:
            break
        depth += 1
    return pieces


def _check_tables(
    raw: Any, tables: Sequence[str], pieces: Mapping[bytes, str], report: PgErasure
) -> None:
    for table in tables:
        relations = raw.execute(
            "SELECT c.oid, c.relname FROM pg_class c WHERE c.oid = to_regclass(%s) "
            "UNION ALL SELECT t.oid, t.relname FROM pg_class c "
            "JOIN pg_class t ON t.oid = c.reltoastrelid WHERE c.oid = to_regclass(%s)",
            (table, table),
        ).fetchall()
        found: set[str] = set()
        files = 0
        try:
            for oid, _ in relations:
                path, size = raw.execute(
                    "SELECT pg_relation_filepath(%s::oid), pg_relation_size(%s::oid)",
                    (oid, oid),
                ).fetchone()
                for number in range(max((int(size) - 1) // _SEGMENT_BYTES + 1, 1)):
                    segment = path if number == 0 else f"{path}.{number}"
                    files += 1
                    found |= _search(raw, segment, pieces)
        except raw.Error as exc:
            report.remains.append(
                f"table {table}: its files were not read ({_message(exc)})"
            )
            continue
        if found:
            report.bytes_left |= found
            report.remains.append(
                f"table {table}: pieces of {_records(len(found))} found in its files"
            )
        else:
            report.steps.append(
                f"table {table}: {files} files (heap and TOAST) read, "
                f"no piece of an erased body found"
            )


def _check_wal(raw: Any, pieces: Mapping[bytes, str], report: PgErasure) -> None:
    if _setting(raw, "wal_compression") not in ("off", None):
        report.remains.append(
            "WAL: wal_compression is on, so page images in pg_wal cannot be "
            "searched; the segments are kept until the server recycles them"
        )
    try:
        names = [
            str(name)
            for (name,) in raw.execute(
                "SELECT name FROM pg_ls_waldir() ORDER BY name"
            ).fetchall()
            if len(str(name)) == _WAL_SEGMENT_NAME_CHARS
        ]
        holding: list[tuple[str, int]] = []
        for name in names:
            found = _search(raw, f"pg_wal/{name}", pieces)
            if found:
                report.bytes_left |= found
                holding.append((name, len(found)))
    except raw.Error as exc:
        report.remains.append(f"WAL: pg_wal was not read ({_message(exc)})")
        return
    for name, count in holding:
        report.remains.append(
            f"WAL segment {name}: pieces of {_records(count)}; it keeps "
            "them until the server recycles and overwrites it (later checkpoints)"
        )
    if not holding:
        report.steps.append(
            f"WAL: {len(names)} segments in pg_wal read, no piece of an erased "
            "body found"
        )


def _check_copies(raw: Any, report: PgErasure) -> None:
    if _setting(raw, "archive_mode") not in ("off", None):
        report.remains.append(
            "WAL archive: archive_mode is on; archived segments keep the erased "
            "bytes until the archive expires them (not reachable from here)"
        )
    for (slot,) in raw.execute("SELECT slot_name FROM pg_replication_slots"):
        report.remains.append(
            f"replication slot {slot}: its consumer received (or will receive) "
            "the WAL with the erased bytes; not reachable from here"
        )
    (standbys,) = raw.execute("SELECT count(*) FROM pg_stat_replication").fetchone()
    if standbys:
        report.remains.append(
            f"replicas: {standbys} standbys stream this server's WAL; their "
            "table files and WAL are not reachable from here"
        )
    report.steps.append(
        f"copies: archive_mode {_setting(raw, 'archive_mode')}, "
        f"{standbys} standbys streaming"
    )


def _setting(raw: Any, name: str) -> str | None:
    row = raw.execute("SELECT current_setting(%s, true)", (name,)).fetchone()
    return None if row is None or row[0] is None else str(row[0])


def _search(raw: Any, path: str, pieces: Mapping[bytes, str]) -> set[str]:
    """Return the record ids whose pieces a server file holds."""
    found: set[str] = set()
    if not pieces:
        return found
    overlap = max(len(p) for p in pieces) - 1
    for chunk in _chunks(raw, path, overlap):
        for piece, record_id in pieces.items():
            if record_id not in found and chunk.find(piece) != -1:
                found.add(record_id)
    return found


def _chunks(raw: Any, path: str, overlap: int) -> Iterator[bytes]:
    offset = 0
    while True:
        (data,) = raw.execute(
            "SELECT pg_read_binary_file(%s, %s, %s, true)",
            (path, offset, _CHUNK_BYTES),
        ).fetchone()
        if not data:
            return
        chunk = bytes(data)
        yield chunk
        if len(chunk) < _CHUNK_BYTES:
            return
        offset += len(chunk) - overlap


def _message(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text if len(text) <= _MESSAGE_CHARS else text[: _MESSAGE_CHARS - 3] + "..."
