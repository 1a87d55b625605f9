"""Build the SQLAlchemy engines and create or verify the trace schema.

SQLite: the driver's own transaction handling is switched off so that the
store emits ``BEGIN IMMEDIATE`` for writes (one writer at a time, taken at the
start of the transaction, never upgraded mid-way) and a deferred ``BEGIN`` for
reads (a consistent snapshot across a read's queries). Files use WAL with
``synchronous=NORMAL`` (survives a process crash) or ``FULL`` on request
(survives power loss), foreign keys on and a busy timeout. ``:memory:`` uses
one shared connection.

PostgreSQL: a plain pooled engine; the append transaction serializes on the
``meta`` row (see ``store.py``).
"""

from __future__ import annotations

import os
import random
import sqlite3
import time
from pathlib import Path
from typing import Any, Final
from urllib.parse import quote

from sqlalchemy import Connection, Engine, create_engine, event, insert, inspect, select
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import DBAPIError
from sqlalchemy.pool import StaticPool

from goatherd.domain.errors import (
    NotATraceStoreError,
    ReadRequestError,
    StoreUnavailableError,
)
from goatherd.infrastructure.store.checkpointer import SAFETY_NET_PAGES
from goatherd.infrastructure.store.schema import (
    META_HEAD,
    META_NEXT_COMMIT,
    META_SCHEMA,
    METADATA,
    SCHEMA_V1,
    SCHEMA_V2,
    SCHEMA_VERSION,
    meta,
    side_writes,
)

__all__ = [
    "DURABILITY_LEVELS",
    "WRITE_OPTION",
    "begin_immediate",
    "ensure_schema",
    "postgres_engine",
    "sqlite_engine",
    "sqlite_read_only_engine",
    "verify_schema",
]

WRITE_OPTION: Final = "goatherd_write"
DURABILITY_LEVELS: Final = {"normal": "NORMAL", "full": "FULL"}
BUSY_TIMEOUT_MS: Final = 30_000
_SCHEMA_LOCK_KEY: Final = 0x60A7_4E4D


def sqlite_engine(
    path: str, durability: str, busy_timeout_ms: int | None = None
) -> Engine:
    """Return an engine over a SQLite file (or ``:memory:``) for reading and writing.

    ``busy_timeout_ms`` is how long a writer waits for another process's write
    lock before failing (default :data:`BUSY_TIMEOUT_MS`).

    Raises:
        ValueError: an unknown durability level or a negative busy timeout.
        NotATraceStoreError: the file exists but is not a trace store.
    """
    if durability not in DURABILITY_LEVELS:
        raise ValueError(
            f"unknown durability {durability!r}: expected 'normal' or 'full'"
        )
    timeout_ms = BUSY_TIMEOUT_MS if busy_timeout_ms is None else busy_timeout_ms
    if (
        not isinstance(timeout_ms, int)
        or isinstance(timeout_ms, bool)
        or timeout_ms < 0
    ):
        raise ValueError(
            f"busy_timeout_ms must be a non-negative integer, got {busy_timeout_ms!r}"
        )
    if path == ":memory:":
        engine = create_engine(
            "sqlite://",
            poolclass=StaticPool,
            connect_args={"check_same_thread": False},
        )
        _install_sqlite_hooks(engine, pragmas=("PRAGMA foreign_keys=ON",))
        _install_text_guard(engine)
        return engine
    _classify_sqlite_file(path)
    # URL.create keeps the path as it is: a "?" or "#" in a file name is part
    # of the name, where a parsed "sqlite:///..." string would cut it there.
    engine = create_engine(
        URL.create("sqlite", database=path),
        connect_args={"check_same_thread": False, "timeout": timeout_ms / 1000},
        pool_size=8,
        max_overflow=16,
    )
    pragmas = (
        "PRAGMA foreign_keys=ON",
        f"PRAGMA busy_timeout={timeout_ms}",
        "PRAGMA journal_mode=WAL",
        f"PRAGMA synchronous={DURABILITY_LEVELS[durability]}",
        # The store's WalCheckpointer thread copies the WAL back; SQLite's own
        # checkpoint at COMMIT stays only as a safety net (checkpointer.py).
        f"PRAGMA wal_autocheckpoint={SAFETY_NET_PAGES}",
    )
    _install_sqlite_hooks(engine, pragmas=pragmas, timeout_ms=timeout_ms)
    _install_text_guard(engine)
    return engine


def sqlite_read_only_engine(path: str, *, live: bool = False) -> Engine:
    """Return an engine that reads an existing SQLite trace and never writes.

    Works on a read-only file or directory, and creates no ``-wal``/``-shm``
    files of its own:

    - a ``-wal`` file exists (a writer is at work, or left changes not yet
      copied back): ``mode=ro``, which reads through the WAL and the writer's
      ``-shm`` (even read-only ones);
    - no ``-wal``: the file holds every commit; ``immutable=1`` reads it with
      no locks and no side files. Such a store does not see commits a writer
      makes after it opened, and must not stay open while a writer works
      (``live=True`` is for that: ``mode=ro`` always, which in a writable
      directory leaves the ``-wal``/``-shm`` SQLite needs for it).

    Raises:
        NotATraceStoreError: the file is missing, empty, or a directory.
        StoreUnavailableError: the WAL holds changes this user cannot read
            (a read-only directory with no ``-shm``).
    """
    file = Path(path)
    wal = Path(f"{file}-wal")
    try:
        if file.is_dir():
            raise NotATraceStoreError(f"{path} is a directory, not a trace database")
        if not file.is_file():
            raise NotATraceStoreError(f"no trace database at {path}: file not found")
        if file.stat().st_size == 0:
            raise NotATraceStoreError(f"{path} is empty, not a trace database")
        resolved = quote(os.fspath(file.resolve()))
        mode = "mode=ro" if live or wal.exists() else "immutable=1"
    except OSError as error:
        raise StoreUnavailableError(
            f"cannot open {path} read-only: {error.strerror or error}"
        ) from error
    uri = f"file:{resolved}?{mode}"

    def connect() -> sqlite3.Connection:
        return sqlite3.connect(uri, uri=True, check_same_thread=False)

    _probe(connect, path, wal)
    engine = create_engine("sqlite://", creator=connect)
    _install_sqlite_hooks(engine, pragmas=(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}",))
    _install_text_guard(engine)
    return engine


def _probe(connect: Any, path: str, wal: Path) -> None:
    try:
        probe = connect()
    except sqlite3.OperationalError as error:
        raise StoreUnavailableError(
            f"cannot open {path} read-only: {' '.join(str(error).split())}"
        ) from error
    try:
        probe.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.DatabaseError as error:
        if _not_a_database(error):
            raise NotATraceStoreError(
                f"{path} is not a usable trace database: {error}"
            ) from error
        raise StoreUnavailableError(
            f"cannot read {path}: {' '.join(str(error).split())}"
            + (
                " (its WAL holds changes; open it once where the directory is writable)"
                if wal.exists()
                else ""
            )
        ) from error
    finally:
        probe.close()


def postgres_engine(url: str, *, read_only: bool = False, **options: Any) -> Engine:
    """Return a pooled engine for a ``postgresql+psycopg://`` URL.

    ``read_only``: every session is ``default_transaction_read_only``, so the
    server itself refuses a write.
    """
    options.setdefault("pool_pre_ping", True)
    if read_only:
        # Keep the URL's own server options (a search_path, say): connect_args
        # would replace them.
        parsed = make_url(url)
        flags = parsed.query.get("options", "")
        if not isinstance(flags, str):
            flags = " ".join(flags)
        read_only_flag = "-c default_transaction_read_only=on"
        url = parsed.update_query_dict(
            {"options": f"{flags} {read_only_flag}".strip()}
        ).render_as_string(hide_password=False)
    engine = create_engine(url, **options)
    _install_text_guard(engine)
    return engine


def ensure_schema(engine: Engine, busy_timeout_ms: int = BUSY_TIMEOUT_MS) -> str:
    """Create the v3 schema if absent, upgrade a v1 or v2 trace; refuse anything else.

    Returns:
        The schema marker now stored (always :data:`SCHEMA_VERSION`).

    Raises:
        NotATraceStoreError: a database holding other tables but no trace
            schema, an unknown schema marker (a newer goatherd's, say), or a
            file SQLite cannot read.
    """
    with _Translate(engine):
        if engine.dialect.name == "postgresql":
            return _ensure_postgres(engine)
        return _ensure_sqlite(engine, busy_timeout_ms)


def _ensure_sqlite(engine: Engine, busy_timeout_ms: int) -> str:
    marker = _read_marker(engine)
    if marker in (SCHEMA_V1, SCHEMA_V2):
        # Imported here: only an upgrade needs it (a read-only command never).
        from goatherd.infrastructure.store.migration import upgrade_sqlite_file

        assert engine.url.database
        upgrade_sqlite_file(engine.url.database, busy_timeout_ms)
        marker = _read_marker(engine)
    if marker is None:
        with engine.execution_options(**{WRITE_OPTION: True}).begin() as conn:
            marker = _create_if_empty(conn)
    return _accept(engine, marker)


def _ensure_postgres(engine: Engine) -> str:
    from goatherd.infrastructure.store.migration import (
        install_postgres_functions,
        prepare_postgres,
        upgrade_postgres,
        upgrade_v2_postgres,
    )

    with engine.begin() as conn:
        conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({_SCHEMA_LOCK_KEY})")
        marker = _marker_in(conn)
        if marker == SCHEMA_V1:
            upgrade_postgres(conn)
            marker = SCHEMA_V2
        if marker == SCHEMA_V2:
            upgrade_v2_postgres(conn)
            marker = SCHEMA_VERSION
        elif marker is None:
            marker = _create_if_empty(conn)
            if marker == SCHEMA_VERSION:
                prepare_postgres(conn)
        elif marker == SCHEMA_VERSION:
            install_postgres_functions(conn)
    return _accept(engine, marker)


def _read_marker(engine: Engine) -> str | None:
    with engine.connect() as conn:
        marker = _marker_in(conn)
        conn.rollback()
    return marker


def _marker_in(conn: Connection) -> str | None:
    tables = set(inspect(conn).get_table_names())
    if meta.name not in tables:
        if tables and conn.dialect.name == "sqlite":
            raise NotATraceStoreError(
                f"{conn.engine.url.database} is not a goatherd trace store "
                f"(it holds other tables: {', '.join(sorted(tables)[:5])})"
            )
        return None
    value = conn.execute(
        select(meta.c.value).where(meta.c.key == META_SCHEMA)
    ).scalar_one_or_none()
    return "" if value is None else str(value)


def _create_if_empty(conn: Connection) -> str:
    marker = _marker_in(conn)
    if marker is not None:
        return marker
    METADATA.create_all(conn, checkfirst=True)
    _seed_meta(conn)
    return SCHEMA_VERSION


def _accept(engine: Engine, marker: str | None) -> str:
    if marker != SCHEMA_VERSION:
        raise NotATraceStoreError(
            f"{engine.url.database or 'the database'} has trace schema marker "
            f"{marker!r}; this goatherd reads {SCHEMA_V1!r} and {SCHEMA_V2!r} "
            "and writes "
            f"{SCHEMA_VERSION!r} (a newer goatherd wrote it?)"
        )
    return marker


def verify_schema(engine: Engine) -> str:
    """Check, without writing, that the database holds a complete trace schema.

    Returns:
        The schema marker: :data:`SCHEMA_VERSION`, or :data:`SCHEMA_V1` or
        :data:`SCHEMA_V2` for a trace not yet upgraded (its reads work
        unchanged).

    Raises:
        NotATraceStoreError: a missing table or column, a missing or unknown
            schema marker, or a file that is not a database.
    """
    with _Translate(engine), engine.connect() as conn:
        inspector = inspect(conn)
        tables = set(inspector.get_table_names())
        marker = (
            conn.execute(
                select(meta.c.value).where(meta.c.key == META_SCHEMA)
            ).scalar_one_or_none()
            if meta.name in tables
            else None
        )
        if marker not in (SCHEMA_VERSION, SCHEMA_V1, SCHEMA_V2):
            missing = [t.name for t in METADATA.sorted_tables if t.name not in tables]
            if missing:
                raise NotATraceStoreError(
                    f"{engine.url.database or 'database'} is not a goatherd trace "
                    f"store: table {missing[0]!r} is missing"
                )
            raise NotATraceStoreError(
                f"unexpected trace schema marker {marker!r} (want {SCHEMA_VERSION!r})"
            )
        for table in METADATA.sorted_tables:
            if table is side_writes and marker != SCHEMA_VERSION:
                continue  # added by schema v3
            if table.name not in tables:
                raise NotATraceStoreError(
                    f"{engine.url.database or 'database'} is not a goatherd trace "
                    f"store: table {table.name!r} is missing"
                )
            columns = {c["name"] for c in inspector.get_columns(table.name)}
            wanted = set(table.columns.keys())
            if marker == SCHEMA_V1:
                wanted -= _V2_COLUMNS
            absent = sorted(wanted - columns)
            if absent:
                raise NotATraceStoreError(
                    f"table {table.name!r} lacks columns: {', '.join(absent)}"
                )
        conn.rollback()
    return str(marker)


_V2_COLUMNS = frozenset({"commit_seq", "commit_digest", "head_digest", "txid"})


def _seed_meta(conn: Connection) -> None:
    present = set(conn.execute(select(meta.c.key)).scalars())
    rows = [
        {"key": key, "value": value}
        for key, value in (
            (META_SCHEMA, SCHEMA_VERSION),
            (META_NEXT_COMMIT, "0"),
            (META_HEAD, "0"),
        )
        if key not in present
    ]
    if rows:
        conn.execute(insert(meta), rows)


def _classify_sqlite_file(path: str) -> None:
    # Look at an existing file through a read-only connection BEFORE the
    # engine's pragmas run: switching a foreign file to WAL would modify it.
    file = Path(path)
    if not file.exists() or file.stat().st_size == 0:
        return
    uri = "file:" + quote(os.fspath(file.resolve())) + "?mode=ro"
    probe = sqlite3.connect(uri, uri=True)
    try:
        names = {
            row[0]
            for row in probe.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table'"
            )
        }
    except sqlite3.DatabaseError as exc:
        raise NotATraceStoreError(f"{path} is not a SQLite database: {exc}") from exc
    finally:
        probe.close()
    if names and meta.name not in names:
        raise NotATraceStoreError(
            f"{path} is not a goatherd trace store "
            f"(it holds other tables: {', '.join(sorted(names)[:5])})"
        )


def _install_sqlite_hooks(
    engine: Engine, *, pragmas: tuple[str, ...], timeout_ms: int = BUSY_TIMEOUT_MS
) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        try:
            for pragma in pragmas:
                cursor.execute(pragma)
        finally:
            cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        write = conn.get_execution_options().get(WRITE_OPTION, False)
        # Straight on the driver: a SQLAlchemy execution here costs more than
        # the BEGIN itself, on every read and every append.
        raw = conn.connection.driver_connection
        if write:
            begin_immediate(raw, timeout_ms)
        else:
            raw.execute("BEGIN")  # type: ignore[union-attr]


def begin_immediate(raw: Any, timeout_ms: int) -> None:
    """Send ``BEGIN IMMEDIATE``, waiting for another writer at most ``timeout_ms``.

    The store's held writer connection runs with ``busy_timeout=0`` and waits
    here instead: SQLite's own busy handler sleeps 1, 2, 5, ... up to 100 ms
    between attempts, so writer processes that contend for the lock (held
    well under a millisecond per commit) mostly slept while it was free. This
    loop retries after 50 us, doubling to 2 ms, with jitter.

    Raises:
        sqlite3.OperationalError: still locked after ``timeout_ms``.
    """
    try:
        raw.execute("BEGIN IMMEDIATE")
        return
    except sqlite3.OperationalError as error:
        if not _locked(error):
            raise
    deadline = time.monotonic() + timeout_ms / 1000
    delay = 50e-6
    while True:
        time.sleep(delay * (0.5 + random.random()))  # noqa: S311 - jitter only
        try:
            raw.execute("BEGIN IMMEDIATE")
            return
        except sqlite3.OperationalError as error:
            if not _locked(error) or time.monotonic() >= deadline:
                raise
        delay = min(delay * 2, 0.002)


def _locked(error: sqlite3.OperationalError) -> bool:
    message = str(error)
    return "locked" in message or "busy" in message


def _install_text_guard(engine: Engine) -> None:
    # Appends refuse text that is not valid Unicode before any SQL runs; a
    # read naming such text (a lone surrogate in an owner or id) would fail in
    # the driver's encoder. Report it as the caller's bad request instead.
    @event.listens_for(engine, "handle_error")
    def _on_error(context: Any) -> None:
        error = context.original_exception
        if isinstance(error, UnicodeEncodeError):
            raise ReadRequestError(
                f"a query argument is not valid text: {error.reason} "
                f"({error.object[error.start : error.end]!r})"
            ) from error


def _not_a_database(error: BaseException | None) -> bool:
    message = str(error)
    return isinstance(error, sqlite3.DatabaseError) and (
        "not a database" in message or "malformed" in message
    )


class _Translate:
    """Turn a driver's "not a database" error into ``NotATraceStoreError``."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: object, exc: BaseException | None, tb: object) -> None:
        if isinstance(exc, DBAPIError) and _not_a_database(exc.orig):
            raise NotATraceStoreError(
                f"{self.engine.url.database} is not a usable trace database: {exc.orig}"
            ) from exc
