"""Whole-database fingerprints: prove that a refused operation changed nothing.

``table_rows`` reads every row of every table of a database through its
engine (the trace tables and anything else living there), in a stable order,
so two fingerprints are equal exactly when no row was added, removed or
changed. Used by the fuzz, security and fault-injection tests.
"""

from __future__ import annotations

from sqlalchemy import Engine, MetaData, inspect, select

_REFLECTED: dict[tuple[int, tuple[str, ...]], MetaData] = {}


def table_rows(engine: Engine) -> dict[str, list[tuple[object, ...]]]:
    """Return ``table -> sorted rows`` for every table in ``engine``'s database."""
    with engine.connect() as conn:
        names = tuple(sorted(inspect(conn).get_table_names()))
        key = (id(engine), names)
        metadata = _REFLECTED.get(key)
        if metadata is None:
            metadata = MetaData()
            metadata.reflect(conn)
            _REFLECTED[key] = metadata
        rows = {
            table.name: sorted(
                (tuple(row) for row in conn.execute(select(table))), key=repr
            )
            for table in metadata.sorted_tables
        }
        conn.rollback()
    return rows
