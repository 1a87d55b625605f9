"""Upgrade a schema v1 or v2 trace to schema v3, in one transaction.

What changes (ADR 0033): ``append_intents`` gains the commit chain columns
(``commit_seq``, ``commit_digest``, ``head_digest``) and ``txid``;
``path_entries`` gains ``txid`` and loses the redundant ``UNIQUE
(commit_receipt)``. On SQLite, ``path_entries``, ``contexts``, ``meta`` and
``owner_ordinals`` are rebuilt as ``WITHOUT ROWID`` tables; ``records`` and
``record_edges``, the bulk of a trace, are left as they are. On PostgreSQL
the position and commit sequences and the allocation function are created.

Every existing intent gets its commit number in commit order: on SQLite the
order v1 inserted the intent rows (their rowids), on PostgreSQL the order of
the intents' first log positions (intents without one, such as empty batches,
by commit time, then id). The chain digests are left empty here; ``chain.py``
fills them (``seal``), so that a file the previous version wrote and one this
version wrote are sealed the same way.

From v2 to v3 (ADR 0064): the ``side_writes`` table is created and every row
the side tables hold gets one step of the commit chain after the last commit
(ordered by table, then key), once; the chain is then sealed (on PostgreSQL
the next ``seal`` links them). A v1 trace goes through both upgrades in the
same transaction.

Either the whole upgrade commits or nothing changes; a second process opening
the file at the same time waits for the first and then finds v3.
"""

from __future__ import annotations

import sqlite3
from typing import Final

from sqlalchemy import Connection
from sqlalchemy.dialects import sqlite as sqlite_dialect
from sqlalchemy.schema import CreateIndex, CreateTable

from goatherd.domain.errors import NotATraceStoreError, TraceStoreError
from goatherd.infrastructure.store import postgres
from goatherd.infrastructure.store.driver import Driver
from goatherd.infrastructure.store.schema import (
    META_HEAD,
    META_NEXT_COMMIT,
    META_SCHEMA,
    SCHEMA_V1,
    SCHEMA_V2,
    SCHEMA_VERSION,
    contexts,
    meta,
    owner_ordinals,
    path_entries,
    side_writes,
)
from goatherd.infrastructure.store.sealing import chain_unchained_side_rows, seal

__all__ = [
    "install_postgres_functions",
    "prepare_postgres",
    "upgrade_postgres",
    "upgrade_sqlite_file",
    "upgrade_v2_postgres",
]

_REBUILT: Final = (meta, owner_ordinals, contexts, path_entries)
_V1_INDEXES: Final = ("idx_path_entries_record", "idx_path_entries_position")
_CHAIN_COLUMNS: Final = (
    ("commit_seq", "BIGINT"),
    ("commit_digest", "TEXT"),
    ("head_digest", "TEXT"),
    ("txid", "BIGINT"),
)


def upgrade_sqlite_file(path: str, busy_timeout_ms: int) -> None:
    """Upgrade the v1 or v2 SQLite trace at ``path`` to v3 (a v3 file is left alone).

    Raises:
        NotATraceStoreError: the file carries another schema marker.
    """
    conn = sqlite3.connect(path, isolation_level=None, timeout=busy_timeout_ms / 1000)
    try:
        # Rebuilding tables needs foreign keys off (they cannot change inside
        # a transaction); foreign_key_check proves them before the commit.
        conn.execute("PRAGMA foreign_keys=OFF")
        conn.execute("PRAGMA legacy_alter_table=ON")
        conn.execute("BEGIN IMMEDIATE")
        try:
            if _marker(conn) == SCHEMA_V1:
                _rebuild_sqlite(conn)
                _number_sqlite_commits(conn)
                _finish(conn)
            if _marker(conn) == SCHEMA_V2:
                _chain_side_tables_sqlite(conn)
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
    finally:
        conn.close()


def _marker(conn: sqlite3.Connection) -> str | None:
    row = conn.execute(
        "SELECT value FROM meta WHERE key = ?", (META_SCHEMA,)
    ).fetchone()
    return None if row is None else str(row[0])


def _rebuild_sqlite(conn: sqlite3.Connection) -> None:
    dialect = sqlite_dialect.dialect()
    for name in _V1_INDEXES:
        conn.execute(f"DROP INDEX IF EXISTS {name}")
    for table in _REBUILT:
        old = f"{table.name}_v1"
        conn.execute(f"ALTER TABLE {table.name} RENAME TO {old}")
        conn.execute(str(CreateTable(table).compile(dialect=dialect)))
        kept = [c.name for c in table.columns if c.name != "txid"]
        columns = ", ".join(f'"{name}"' for name in kept)
        # Table and column names come from the schema, never from input.
        copy = f"INSERT INTO {table.name} ({columns}) SELECT {columns} FROM {old}"  # noqa: S608
        conn.execute(copy)
        conn.execute(f"DROP TABLE {old}")
        for index in sorted(table.indexes, key=lambda i: str(i.name)):
            conn.execute(str(CreateIndex(index).compile(dialect=dialect)))
    for column, kind in _CHAIN_COLUMNS:
        conn.execute(f"ALTER TABLE append_intents ADD COLUMN {column} {kind}")


def _number_sqlite_commits(conn: sqlite3.Connection) -> None:
    # v1 inserted each intent's row first in its (serialized) transaction, so
    # rowid order is commit order.
    rows = conn.execute("SELECT rowid FROM append_intents ORDER BY rowid").fetchall()
    conn.executemany(
        "UPDATE append_intents SET commit_seq = ? WHERE rowid = ?",
        [(seq, rowid) for seq, (rowid,) in enumerate(rows)],
    )


def _finish(conn: sqlite3.Connection) -> None:
    (commits,) = conn.execute("SELECT count(*) FROM append_intents").fetchone()
    conn.executemany(
        "INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)",
        [(META_SCHEMA, SCHEMA_V2), (META_HEAD, str(commits))],
    )
    broken = conn.execute("PRAGMA foreign_key_check").fetchall()
    if broken:
        raise NotATraceStoreError(
            f"cannot upgrade the trace: {len(broken)} rows break a foreign key "
            f"(first: {broken[0]!r}); run goatherd verify"
        )


def _chain_side_tables_sqlite(conn: sqlite3.Connection) -> None:
    dialect = sqlite_dialect.dialect()
    conn.execute(str(CreateTable(side_writes).compile(dialect=dialect)))
    for index in sorted(side_writes.indexes, key=lambda i: str(i.name)):
        conn.execute(str(CreateIndex(index).compile(dialect=dialect)))
    sql = Driver.of(conn, postgres=False)
    try:
        chain_unchained_side_rows(sql)
        seal(sql)
    except TraceStoreError as error:
        raise NotATraceStoreError(
            f"cannot upgrade the trace: {error}; run goatherd verify"
        ) from error
    conn.execute(
        "INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)",
        (META_SCHEMA, SCHEMA_VERSION),
    )


def upgrade_v2_postgres(conn: Connection) -> None:
    """Upgrade a v2 trace on PostgreSQL to v3 inside ``conn``'s transaction.

    The side rows' steps are numbered after the last commit and left for
    the next ``seal`` to link (PostgreSQL links lazily).
    """
    side_writes.create(conn, checkfirst=True)
    prepare_postgres(conn)
    raw = conn.connection.driver_connection
    try:
        chain_unchained_side_rows(Driver.of(raw, postgres=True))
    except TraceStoreError as error:
        raise NotATraceStoreError(
            f"cannot upgrade the trace: {error}; run goatherd verify"
        ) from error
    conn.exec_driver_sql(
        "UPDATE meta SET value = %(value)s WHERE key = %(key)s",
        {"key": META_SCHEMA, "value": SCHEMA_VERSION},
    )


def upgrade_postgres(conn: Connection) -> None:
    """Upgrade a v1 trace on PostgreSQL to v2 inside ``conn``'s transaction.

    The caller then upgrades it to v3 (:func:`upgrade_v2_postgres`).
    """
    run = conn.exec_driver_sql
    for column, kind in _CHAIN_COLUMNS:
        run(f"ALTER TABLE append_intents ADD COLUMN IF NOT EXISTS {column} {kind}")
    run("ALTER TABLE path_entries ADD COLUMN IF NOT EXISTS txid BIGINT")
    run(
        "ALTER TABLE path_entries "
        "DROP CONSTRAINT IF EXISTS path_entries_commit_receipt_key"
    )
    run(
        "WITH ordered AS (SELECT i.append_intent_id, row_number() OVER ("
        "ORDER BY min(e.position) NULLS LAST, i.committed_at, i.append_intent_id"
        ") - 1 AS seq FROM append_intents i LEFT JOIN path_entries e "
        "ON e.append_intent_id = i.append_intent_id GROUP BY i.append_intent_id) "
        "UPDATE append_intents a SET commit_seq = o.seq FROM ordered o "
        "WHERE a.append_intent_id = o.append_intent_id"
    )
    commits = run("SELECT count(*) FROM append_intents").scalar_one()
    for key, value in ((META_SCHEMA, SCHEMA_V2), (META_HEAD, str(commits))):
        run(
            "INSERT INTO meta (key, value) VALUES (%(key)s, %(value)s) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            {"key": key, "value": value},
        )


def install_postgres_functions(conn: Connection) -> None:
    """(Re)create this version's allocation function and indexes (idempotent)."""
    run = conn.exec_driver_sql
    for statement in (*postgres.DDL, *postgres.INDEXES.values()):
        run(statement)


def prepare_postgres(conn: Connection) -> None:
    """Create (or keep) the sequences, the functions and the indexes of PostgreSQL.

    The indexes are ``postgres.INDEXES`` (the commit number, and the
    unsealed-chain partial index). The sequences restart after the highest
    stored position and commit number.
    """
    run = conn.exec_driver_sql
    for statement in (*postgres.DDL, *postgres.INDEXES.values()):
        run(statement)
    next_position = run(
        "SELECT COALESCE(MAX(position) + 1, 0) FROM path_entries"
    ).scalar_one()
    stored = run(
        "SELECT value FROM meta WHERE key = %(key)s", {"key": META_NEXT_COMMIT}
    ).scalar_one_or_none()
    next_position = max(int(next_position), int(stored or 0))
    next_commit = run(
        "SELECT COALESCE(MAX(s) + 1, 0) FROM (SELECT MAX(commit_seq) AS s "
        "FROM append_intents UNION ALL SELECT MAX(commit_seq) FROM side_writes) m"
    ).scalar_one()
    run(postgres.sequence_restart(postgres.POSITIONS_SEQUENCE, next_position))
    run(postgres.sequence_restart(postgres.COMMITS_SEQUENCE, int(next_commit)))
