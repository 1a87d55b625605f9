"""The database objects of a trace that goatherd did not create.

A trigger runs on every write: one planted in the trace's database can copy
each body before an erasure overwrites it, or rewrite a row as it lands, and
the rows themselves stay consistent, so no row check would see it. goatherd
creates no trigger, rule or view, and only the indexes its schema names; this
check lists everything else on the trace's tables:

* every trigger (SQLite ``sqlite_master``; PostgreSQL ``pg_trigger``, the
  system's own constraint triggers aside) on any table of the trace's schema;
* every rewrite rule on a table (PostgreSQL) and every view;
* every index on a goatherd table that its schema does not create (an
  expression or partial index can call a function on every write).

Tables that are not goatherd's are allowed: the projection runner keeps your
read models in the trace's database, and a table cannot act on its own. Read
only, like every check of ``goatherd verify``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from sqlalchemy import Connection, text

from goatherd.infrastructure.blobs.store import blob_tables
from goatherd.infrastructure.projections.runner import tracking_table
from goatherd.infrastructure.store import postgres
from goatherd.infrastructure.store.schema import TRACE_TABLES

__all__ = ["check_objects", "goatherd_indexes", "goatherd_tables"]

Problem = Callable[[str, str], None]

# Indexes goatherd creates by plain DDL outside the tables' metadata
# (PostgreSQL's, which its migration creates; a trace an earlier version
# upgraded may hold them too).
_DDL_INDEXES: Final = frozenset(postgres.INDEXES)


def goatherd_tables() -> frozenset[str]:
    """Return the names of the tables goatherd creates in a trace's database."""
    names = {table.name for table in TRACE_TABLES}
    names.update(table.name for table in blob_tables())
    names.add(tracking_table().name)
    return frozenset(names)


def goatherd_indexes() -> frozenset[str]:
    """Return the names of the indexes goatherd's schema creates."""
    names = {index.name for table in TRACE_TABLES for index in table.indexes}
    names.update(index.name for table in blob_tables() for index in table.indexes)
    return frozenset(str(name) for name in names if name) | _DDL_INDEXES


def check_objects(conn: Connection, problem: Problem) -> int:
    """Name each trigger, rule, view and foreign index; return how many."""
    if conn.dialect.name == "postgresql":
        found = _postgres_objects(conn)
    else:
        found = _sqlite_objects(conn)
    for kind, name, table in found:
        on = f" on table {table!r}" if table else ""
        problem(
            "objects",
            f"{kind} {name!r}{on} was not created by goatherd (a {kind} can read "
            "or change rows as they are written or erased: remove it)",
        )
    return len(found)


def _sqlite_objects(conn: Connection) -> list[tuple[str, str, str]]:
    ours = goatherd_tables()
    indexes = goatherd_indexes()
    found: list[tuple[str, str, str]] = []
    rows = conn.exec_driver_sql(
        "SELECT type, name, tbl_name FROM sqlite_master ORDER BY type, name"
    ).fetchall()
    for kind, name, table in rows:
        if kind in ("trigger", "view"):
            found.append(
                (str(kind), str(name), str(table) if kind == "trigger" else "")
            )
        elif (
            kind == "index"
            and table in ours
            and name not in indexes
            and not str(name).startswith("sqlite_autoindex_")
        ):
            found.append(("index", str(name), str(table)))
    return found


_PG_TRIGGERS: Final = text(
    "SELECT t.tgname, c.relname FROM pg_trigger t "
    "JOIN pg_class c ON c.oid = t.tgrelid "
    "JOIN pg_namespace n ON n.oid = c.relnamespace "
    "WHERE n.nspname = current_schema() AND NOT t.tgisinternal "
    "ORDER BY c.relname, t.tgname"
)
_PG_RULES: Final = text(
    "SELECT rulename, tablename FROM pg_rules WHERE schemaname = current_schema() "
    "ORDER BY tablename, rulename"
)
_PG_VIEWS: Final = text(
    "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
    "WHERE n.nspname = current_schema() AND c.relkind IN ('v', 'm') ORDER BY 1"
)
# Indexes that back no constraint (primary keys and unique constraints make
# their own, named by the server).
_PG_INDEXES: Final = text(
    "SELECT i.relname, t.relname FROM pg_index x "
    "JOIN pg_class i ON i.oid = x.indexrelid "
    "JOIN pg_class t ON t.oid = x.indrelid "
    "JOIN pg_namespace n ON n.oid = t.relnamespace "
    "WHERE n.nspname = current_schema() "
    "AND NOT EXISTS (SELECT 1 FROM pg_constraint k WHERE k.conindid = x.indexrelid) "
    "ORDER BY t.relname, i.relname"
)


def _postgres_objects(conn: Connection) -> list[tuple[str, str, str]]:
    ours = goatherd_tables()
    indexes = goatherd_indexes()
    found = [("trigger", str(n), str(t)) for n, t in conn.execute(_PG_TRIGGERS)]
    found += [("rule", str(n), str(t)) for n, t in conn.execute(_PG_RULES)]
    found += [("view", str(n), "") for (n,) in conn.execute(_PG_VIEWS)]
    found += [
        ("index", str(n), str(t))
        for n, t in conn.execute(_PG_INDEXES)
        if t in ours and n not in indexes
    ]
    return found
