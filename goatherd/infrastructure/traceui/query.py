"""The trace UI's read queries over its index, and their parameter validation.

``/api/records`` semantics (the kernel seed's contract): records under an owner
path SUBTREE - the path itself and its ``:``-delimited descendants, an empty
path spans every owner; ``through`` is an inclusive per-owner ordinal cutoff;
``mode`` filters by record mode; a record on several paths appears once per
path. Pages are ordered by global log position and continue with ``after``.
Witness records (their own ``kernel:witness`` path, outside the log) lead the
first page when the subtree covers that path.

A page holds at most ``limit`` log entries (default 1,000, at most 10,000), and
says so: ``truncated`` is true and ``next_after`` names the ``after`` of the
next page whenever entries were left out. A client reads until ``truncated``
is false.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from sqlalchemy import Connection, and_, func, or_, select

from goatherd.domain.contexts import TRUSTED_READ_CONTEXT
from goatherd.domain.errors import GoatherdError
from goatherd.domain.records import WITNESS_OWNER, ModeFilter, Record
from goatherd.domain.store import TraceStore
from goatherd.infrastructure.projections.views import record_key, ui_index_table
from goatherd.projections import ui_record_object

__all__ = [
    "DEFAULT_PAGE",
    "MAX_PAGE",
    "PAGE_BYTES",
    "QueryError",
    "RecordQuery",
    "owners_json",
    "parse_record_query",
    "record_entries_json",
    "records_page_json",
]

DEFAULT_PAGE: Final = 1000
MAX_PAGE: Final = 10_000
PAGE_BYTES: Final = 4 << 20
"""A page of ``/api/records`` stops before passing this many bytes of JSON."""
_NO_CUTOFF: Final = 2**63 - 1
_MODES: Final = {
    ModeFilter.CAPTURES_ONLY.value: "capture",
    ModeFilter.DECLARATIONS_ONLY.value: "declaration",
}
_PARAMS: Final = ("path", "through", "mode", "after", "limit")
_TABLE: Final = ui_index_table()


class QueryError(GoatherdError, ValueError):
    """A query parameter is invalid; the message names it and what was wrong."""


@dataclass(frozen=True, slots=True)
class RecordQuery:
    """A validated ``/api/records`` request."""

    path: str = ""
    through: int | None = None
    mode: str = ModeFilter.BOTH.value
    after: int = -1
    limit: int = DEFAULT_PAGE


def _int_param(params: Mapping[str, str], name: str, low: int, high: int) -> int | None:
    raw = params.get(name)
    if raw is None or raw == "":
        return None
    try:
        value = int(raw)
    except ValueError:
        raise QueryError(f"{name} must be an integer, got {raw!r}") from None
    if not low <= value <= high:
        raise QueryError(f"{name} must be between {low} and {high}, got {value}")
    return value


def parse_record_query(params: Mapping[str, str]) -> RecordQuery:
    """Validate the query string of ``/api/records``.

    Raises:
        QueryError: an unknown parameter, a non-integer or out-of-range
            ``through``/``after``/``limit``, or an unknown ``mode``.
    """
    unknown = sorted(set(params) - set(_PARAMS))
    if unknown:
        raise QueryError(
            f"unknown query parameter {unknown[0]!r}; "
            f"expected one of {', '.join(_PARAMS)}"
        )
    mode = params.get("mode") or ModeFilter.BOTH.value
    if mode not in (m.value for m in ModeFilter):
        raise QueryError(
            f"mode must be one of both, captures_only, declarations_only; got {mode!r}"
        )
    after = _int_param(params, "after", -1, _NO_CUTOFF)
    limit = _int_param(params, "limit", 1, MAX_PAGE)
    return RecordQuery(
        path=params.get("path", ""),
        through=_int_param(params, "through", 0, _NO_CUTOFF),
        mode=mode,
        after=-1 if after is None else after,
        limit=DEFAULT_PAGE if limit is None else limit,
    )


def _under(path: str) -> object:
    if not path:
        return True
    owner = _TABLE.c.owner
    return or_(owner == path, and_(owner >= path + ":", owner < path + ";"))


def _covers(path: str, owner: str) -> bool:
    return not path or owner == path or owner.startswith(path + ":")


def _witness_objects(store: TraceStore, query: RecordQuery) -> list[str]:
    if query.after >= 0 or not _covers(query.path, WITNESS_OWNER):
        return []
    through = _NO_CUTOFF if query.through is None else query.through
    slice_ = store.read_owner_prefix(
        TRUSTED_READ_CONTEXT, WITNESS_OWNER, through, query.mode
    )
    records = (
        slice_.facts_by_id[rid] for rid in slice_.owner_paths.get(WITNESS_OWNER, ())
    )
    return [
        json.dumps(
            ui_record_object(r, position=None), sort_keys=True, separators=(",", ":")
        )
        for r in records
        if isinstance(r, Record)
    ]


def records_page_json(conn: Connection, store: TraceStore, query: RecordQuery) -> str:
    """Return one page of ``/api/records`` as a JSON text (arrays never null)."""
    statement = (
        select(_TABLE.c.position, _TABLE.c.record_json)
        .where(_under(query.path))  # type: ignore[arg-type]
        .where(_TABLE.c.position > query.after)
        .order_by(_TABLE.c.position)
        .limit(query.limit + 1)
    )
    if query.through is not None:
        statement = statement.where(_TABLE.c.ordinal <= query.through)
    if query.mode in _MODES:
        statement = statement.where(_TABLE.c.mode == _MODES[query.mode])
    items = _witness_objects(store, query)
    size, taken, last, more = sum(len(i) for i in items), 0, None, False
    for position, text in conn.execute(statement):
        # A page ends at `limit` records or at PAGE_BYTES of JSON, whichever
        # comes first (at least one record), so one page of a trace of large
        # payloads never holds more than that in memory.
        if taken == query.limit or (taken and size + len(text) > PAGE_BYTES):
            more = True
            break
        items.append(text)
        size += len(text)
        taken, last = taken + 1, position
    next_after = last if more else None
    return (
        f'{{"count":{len(items)},"limit":{query.limit},'
        f'"truncated":{json.dumps(more)},"next_after":{json.dumps(next_after)},'
        f'"records":[{",".join(items)}]}}'
    )


def record_entries_json(conn: Connection, record_id: str) -> str:
    """Return every indexed path entry of one record (``/api/records/{id}``)."""
    rows = conn.execute(
        select(_TABLE.c.record_json)
        .where(_TABLE.c.record_key == record_key(record_id))
        .where(_TABLE.c.record_id == record_id)
        .order_by(_TABLE.c.position)
    ).scalars()
    items = list(rows)
    return f'{{"count":{len(items)},"records":[{",".join(items)}]}}'


def owners_json(conn: Connection) -> str:
    """Return every owner path with its entry count and last position."""
    rows = conn.execute(
        select(_TABLE.c.owner, func.count(), func.max(_TABLE.c.position))
        .group_by(_TABLE.c.owner)
        .order_by(_TABLE.c.owner)
    ).all()
    owners = [{"owner": o, "count": c, "last_position": p} for o, c, p in rows]
    return json.dumps({"owners": owners}, separators=(",", ":"))
