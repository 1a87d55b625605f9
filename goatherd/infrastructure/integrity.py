"""Verify a stored trace from its raw rows: ``goatherd verify``.

Everything the trace promises is recomputed from what is stored, without
trusting any index: every record id and witness id from its content, the
witness chains, the ordered causal parents (``caused_by_json`` against the edge
rows), gap-free per-path ordinals and the owner ordinal table, the gap-free
global log positions and their commit receipts, the frontier index against the
retained frontier records, and the context and intent references.

The checks only read. They report problems in a deterministic order (records
in the order they first entered the log), so "the first bad record" is stable.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Final

from sqlalchemy import Connection, func, select

from goatherd.domain.errors import DomainError
from goatherd.domain.identity import (
    ROOT_WITNESS_REF,
    ROOT_WITNESS_SCHEMA_REF,
    WITNESS_SCHEMA_REF,
    record_digest,
    root_witness_record_id,
    validate_witness_body,
)
from goatherd.domain.records import FRONTIER_SCHEMA_REF, WITNESS_OWNER
from goatherd.infrastructure.store.reader import next_log_position
from goatherd.infrastructure.store.schema import (
    append_intents,
    contexts,
    frontiers,
    owner_ordinals,
    path_entries,
    record_edges,
    records,
)
from goatherd.infrastructure.store.store import SqlAlchemyTraceStore

__all__ = ["IntegrityProblem", "IntegrityReport", "verify_trace"]

Progress = Callable[[str, int, int], None]
"""``progress(phase, done, total)``, called as the checks advance."""

_CHUNK: Final = 2000


@dataclass(frozen=True, slots=True)
class IntegrityProblem:
    """One broken promise: which check, which record (if any), what is wrong."""

    check: str
    detail: str
    record_id: str | None = None

    def __str__(self) -> str:
        where = f"record {self.record_id}: " if self.record_id else ""
        return f"{self.check}: {where}{self.detail}"


@dataclass(frozen=True, slots=True)
class IntegrityReport:
    """What ``verify_trace`` checked and found."""

    records: int
    path_entries: int
    log_positions: int
    frontiers: int
    intents: int
    problems: tuple[IntegrityProblem, ...] = field(default=())

    @property
    def ok(self) -> bool:
        """Whether every check passed."""
        return not self.problems


class _Problems:
    def __init__(self, limit: int) -> None:
        self.items: list[IntegrityProblem] = []
        self.limit = limit

    def add(self, check: str, detail: str, record_id: str | None = None) -> None:
        if len(self.items) < self.limit:
            self.items.append(IntegrityProblem(check, detail, record_id))


def verify_trace(
    store: SqlAlchemyTraceStore,
    *,
    progress: Progress | None = None,
    max_problems: int = 100,
) -> IntegrityReport:
    """Recompute and cross-check everything stored in ``store``; never writes.

    Returns:
        The report; ``report.problems[0]`` names the first bad record.
    """
    problems = _Problems(max_problems)
    tick = progress or (lambda phase, done, total: None)
    with store.engine.connect() as conn:
        parents, count = _check_records(conn, problems, tick)
        _check_edges(conn, parents, problems)
        entries = _check_paths(conn, problems)
        positions = _check_positions(conn, problems)
        n_frontiers = _check_frontiers(conn, problems)
        n_intents = _check_references(conn, problems)
        conn.rollback()
    return IntegrityReport(
        records=count,
        path_entries=entries,
        log_positions=positions,
        frontiers=n_frontiers,
        intents=n_intents,
        problems=tuple(problems.items),
    )


# ----------------------------------------------------------------- records


def _records_in_log_order(conn: Connection) -> Iterator[tuple[object, ...]]:
    first = (
        select(
            path_entries.c.record_id,
            func.min(path_entries.c.position).label("first_position"),
        )
        .group_by(path_entries.c.record_id)
        .subquery()
    )
    stmt = (
        select(
            records.c.record_id,
            records.c.digest,
            records.c.schema_ref,
            records.c.mode,
            records.c.witness_ref,
            records.c.caused_by_json,
            records.c.body_json,
        )
        .outerjoin(first, first.c.record_id == records.c.record_id)
        .order_by(first.c.first_position.nulls_first(), records.c.record_id)
    )
    result = conn.execution_options(yield_per=_CHUNK).execute(stmt)
    for row in result:
        yield tuple(row)


def _check_records(
    conn: Connection, problems: _Problems, tick: Progress
) -> tuple[dict[str, tuple[str, ...]], int]:
    total = int(conn.execute(select(func.count()).select_from(records)).scalar_one())
    witnesses: dict[str, str] = {}
    parents: dict[str, tuple[str, ...]] = {}
    rows = list(_records_in_log_order(conn))
    for done, row in enumerate(rows, start=1):
        record_id, digest, schema_ref, mode, witness_ref, caused_json, body_json = (
            str(value) for value in row
        )
        caused_by = _check_one_record(
            record_id,
            digest,
            schema_ref,
            mode,
            witness_ref,
            caused_json,
            body_json,
            problems,
        )
        parents[record_id] = caused_by
        if schema_ref in (ROOT_WITNESS_SCHEMA_REF, WITNESS_SCHEMA_REF):
            witnesses[record_id] = schema_ref
        if done % _CHUNK == 0 or done == total:
            tick("records", done, total)
    _check_witness_refs(rows, witnesses, parents, problems)
    return parents, total


def _check_one_record(
    record_id: str,
    digest: str,
    schema_ref: str,
    mode: str,
    witness_ref: str,
    caused_json: str,
    body_json: str,
    problems: _Problems,
) -> tuple[str, ...]:
    if record_id != digest:
        problems.add("identity", f"digest column says {digest}", record_id)
    try:
        caused_by = json.loads(caused_json)
        body = json.loads(body_json)
    except ValueError as exc:
        problems.add("identity", f"stored JSON does not parse: {exc}", record_id)
        return ()
    payload = body.get("payload") if isinstance(body, dict) else None
    if not isinstance(caused_by, list) or not isinstance(payload, dict):
        problems.add(
            "identity", "stored parents or payload have the wrong shape", record_id
        )
        return ()
    try:
        if schema_ref in (ROOT_WITNESS_SCHEMA_REF, WITNESS_SCHEMA_REF):
            validate_witness_body(schema_ref, payload)
        recomputed = record_digest(schema_ref, mode, payload, caused_by, witness_ref)
    except (DomainError, TypeError, ValueError) as exc:
        problems.add(
            "identity", f"stored content is not a valid record: {exc}", record_id
        )
        return tuple(str(p) for p in caused_by)
    if recomputed != record_id:
        problems.add(
            "identity",
            f"stored content digests to {recomputed}, not to its id",
            record_id,
        )
    return tuple(str(p) for p in caused_by)


def _check_witness_refs(
    rows: list[tuple[object, ...]],
    witnesses: dict[str, str],
    parents: dict[str, tuple[str, ...]],
    problems: _Problems,
) -> None:
    root = root_witness_record_id()
    for row in rows:
        record_id, schema_ref, witness_ref = str(row[0]), str(row[2]), str(row[4])
        if schema_ref == ROOT_WITNESS_SCHEMA_REF:
            if record_id != root or witness_ref != ROOT_WITNESS_REF:
                problems.add(
                    "witness", "a root witness that is not the root", record_id
                )
        elif schema_ref == WITNESS_SCHEMA_REF:
            if witness_ref != root:
                problems.add(
                    "witness", "an ordinary witness must cite the root", record_id
                )
        elif witnesses.get(witness_ref) is None:
            problems.add(
                "witness",
                f"witness_ref {witness_ref!r} is not a stored witness",
                record_id,
            )
        for parent in parents.get(record_id, ()):
            if parent not in parents:
                problems.add("causality", f"parent {parent} is not stored", record_id)


def _check_edges(
    conn: Connection, parents: dict[str, tuple[str, ...]], problems: _Problems
) -> None:
    stored: dict[str, list[tuple[int, str]]] = {}
    stmt = select(
        record_edges.c.child_record_id,
        record_edges.c.parent_position,
        record_edges.c.parent_record_id,
    )
    for child, index, parent in conn.execute(stmt):
        stored.setdefault(child, []).append((int(index), parent))
    for record_id, caused_by in parents.items():
        edges = tuple(parent for _, parent in sorted(stored.get(record_id, [])))
        if edges != caused_by:
            problems.add(
                "causality",
                f"edge rows {list(edges)} disagree with caused_by {list(caused_by)}",
                record_id,
            )


# ------------------------------------------------------------ paths, log


def _check_paths(conn: Connection, problems: _Problems) -> int:
    stmt = select(
        path_entries.c.path_ref,
        path_entries.c.path_ordinal,
        path_entries.c.record_id,
        path_entries.c.retained_context_ref,
    ).order_by(path_entries.c.path_ref, path_entries.c.path_ordinal)
    counts: dict[str, int] = {}
    total = 0
    for path_ref, ordinal, record_id, context_ref in conn.execute(stmt):
        total += 1
        expected = counts.get(path_ref, 0)
        if int(ordinal) != expected:
            problems.add(
                "ordinals",
                f"path {path_ref!r} has ordinal {ordinal} where {expected} was due",
                record_id,
            )
        counts[path_ref] = int(ordinal) + 1
        if (path_ref == WITNESS_OWNER) != (context_ref == ""):
            problems.add(
                "contexts", f"unexpected context ref on {path_ref!r}", record_id
            )
    stored = {
        str(owner): int(value)
        for owner, value in conn.execute(
            select(owner_ordinals.c.trace_owner_id, owner_ordinals.c.next_ordinal)
        )
    }
    for owner in sorted(set(stored) | set(counts)):
        if int(stored.get(owner, 0)) != counts.get(owner, 0):
            problems.add(
                "ordinals",
                f"owner {owner!r}: next ordinal {stored.get(owner, 0)} but "
                f"{counts.get(owner, 0)} entries",
            )
    return total


def _check_positions(conn: Connection, problems: _Problems) -> int:
    stmt = select(
        path_entries.c.position,
        path_entries.c.commit_receipt,
        path_entries.c.record_id,
        path_entries.c.path_ref,
    ).order_by(path_entries.c.position.nulls_first())
    count = 0
    for position, receipt, record_id, path_ref in conn.execute(stmt):
        if position is None:
            if path_ref != WITNESS_OWNER or receipt != f"witness:{record_id}":
                problems.add("log", f"entry on {path_ref!r} has no position", record_id)
            continue
        if int(position) != count:
            problems.add("log", f"position {position} where {count} was due", record_id)
        if receipt != f"commit:{position}":
            problems.add(
                "log", f"commit receipt {receipt!r} at position {position}", record_id
            )
        count = int(position) + 1
    next_seq = next_log_position(conn)
    if next_seq is None or int(next_seq) != count:
        problems.add("log", f"next commit sequence {next_seq} but {count} positions")
    return count


# -------------------------------------------------- frontiers, references


def _check_frontiers(conn: Connection, problems: _Problems) -> int:
    rows = conn.execute(select(frontiers)).mappings().all()
    for row in rows:
        created_by = row["created_by_fact_id"]
        found = conn.execute(
            select(records.c.schema_ref, records.c.body_json).where(
                records.c.record_id == created_by
            )
        ).first()
        if found is None or found.schema_ref != FRONTIER_SCHEMA_REF:
            problems.add(
                "frontiers",
                f"frontier {row['frontier_id']!r} has no record",
                created_by,
            )
            continue
        payload = json.loads(found.body_json).get("payload", {})
        index = {
            "frontier_id": row["frontier_id"],
            "target_trace_owner_id": row["target_trace_owner_id"],
            "through_fact_id": row["through_fact_id"],
            "through_owner_ordinal": int(row["through_owner_ordinal"]),
        }
        truth = {key: payload.get(key) for key in index}
        if truth != index:
            problems.add(
                "frontiers",
                f"index row of {row['frontier_id']!r} disagrees with its record",
                created_by,
            )
        at = conn.execute(
            select(path_entries.c.record_id).where(
                path_entries.c.path_ref == row["target_trace_owner_id"],
                path_entries.c.path_ordinal == row["through_owner_ordinal"],
            )
        ).scalar_one_or_none()
        if at != row["through_fact_id"]:
            problems.add(
                "frontiers",
                f"frontier {row['frontier_id']!r}: its through record is not at "
                f"{row['target_trace_owner_id']}#{row['through_owner_ordinal']}",
                created_by,
            )
    return len(rows)


def _check_references(conn: Connection, problems: _Problems) -> int:
    known_contexts = set(conn.execute(select(contexts.c.context_id)).scalars())
    stmt = select(path_entries.c.record_id, path_entries.c.retained_context_ref).where(
        path_entries.c.retained_context_ref != ""
    )
    for record_id, context_ref in conn.execute(stmt):
        if context_ref not in known_contexts:
            problems.add(
                "contexts", f"context {context_ref!r} is not stored", record_id
            )
    known_records = set(conn.execute(select(records.c.record_id)).scalars())
    intents = conn.execute(
        select(append_intents.c.append_intent_id, append_intents.c.receipt_json)
    ).all()
    for intent_id, receipt_json in intents:
        try:
            fact_ids = json.loads(receipt_json).get("fact_ids", [])
        except (ValueError, AttributeError):
            problems.add("intents", f"intent {intent_id!r} has an unreadable receipt")
            continue
        for fact_id in fact_ids:
            if fact_id not in known_records:
                problems.add(
                    "intents", f"intent {intent_id!r} cites a missing record", fact_id
                )
    return len(intents)
