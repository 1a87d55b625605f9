"""The checks of ``verify`` over rows already read and type-checked.

:class:`Verifier` indexes the well-formed rows once and runs each check in a
fixed order, reporting through ``report(check, detail, record_id)``. The
module docstring of :mod:`goatherd.infrastructure.audit.verify` lists the checks.
"""

from __future__ import annotations

import bisect
import hashlib
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from goatherd.domain.errors import DomainError
from goatherd.domain.events import RecordDecodeError, decode_payload, event_class_for
from goatherd.domain.events.checkpoint import CheckpointCreated
from goatherd.domain.identity import (
    ROOT_WITNESS_REF,
    ROOT_WITNESS_SCHEMA_REF,
    WITNESS_SCHEMA_REF,
    record_digest,
    root_witness_record_id,
    validate_witness_body,
)
from goatherd.domain.records import (
    FRONTIER_SCHEMA_REF,
    REDACTION_SCHEMA_REF,
    WITNESS_OWNER,
)
from goatherd.infrastructure.audit.rows import (
    BlobRow,
    ContentRow,
    ContextRow,
    EntryRow,
    RecordRow,
    SideRow,
    StoredRows,
)
from goatherd.infrastructure.audit.rules import (
    BlobAddresses,
    LedgerRefs,
    LoggedEntry,
    blob_problems,
    context_problems,
    is_hex_digest,
    is_timestamp,
    ledger_refs,
    receipt_problems,
    witness_context_mismatch,
    witness_kind_label,
)
from goatherd.infrastructure.store import schema
from goatherd.infrastructure.store.chain import HOLE_TABLE, parse_hole_key
from goatherd.infrastructure.store.schema import (
    META_NEXT_COMMIT,
    META_SCHEMA,
    SCHEMA_V1,
    SCHEMA_V2,
    SCHEMA_VERSION,
    SIDE_TABLES,
)
from goatherd.infrastructure.store.side import (
    BLOBS,
    LEDGER,
    blob_row_digest,
    ledger_row_digest,
)
from goatherd.projections.schema_library import known_schema_refs

__all__ = ["BLOB_CLOCK_SLACK", "KNOWN_META_KEYS", "Verifier", "parse_timestamp"]

Report = Callable[[str, str, "str | None"], None]
Tick = Callable[[str, int, int], None]

KNOWN_META_KEYS: Final = frozenset(
    value
    for name, value in vars(schema).items()
    if name.startswith("META_") and isinstance(value, str)
)
"""Every ``meta`` key the store's schema module names (``META_*`` constants)."""
BLOB_CLOCK_SLACK: Final = timedelta(days=1)
"""How far a blob's creation time may lie from its record's commit time."""

_WITNESS_SCHEMAS: Final = (ROOT_WITNESS_SCHEMA_REF, WITNESS_SCHEMA_REF)


def parse_timestamp(value: str) -> datetime | None:
    """Parse a commit timestamp as SQLite or PostgreSQL wrote it (UTC if naive)."""
    if not is_timestamp(value):
        return None
    text = value.replace("Z", "+00:00")
    if len(text) >= 3 and text[-3] in "+-" and text[-2:].isdigit():
        text += ":00"
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


class Verifier:
    """Run every cross-check over one trace's rows."""

    def __init__(self, rows: StoredRows, report: Report, tick: Tick) -> None:
        """Index ``rows``; problems go to ``report``, progress to ``tick``."""
        self.rows = rows
        self.report = report
        self.tick = tick
        self.records = {r.record_id: r for r in rows.records}
        self.intents = {i.intent_id: i for i in rows.intents}
        self.contexts = {c.context_id: c for c in rows.contexts}
        self.by_record: dict[str, list[EntryRow]] = {}
        self.by_intent: dict[str, list[EntryRow]] = {}
        self.by_path: dict[str, list[EntryRow]] = {}
        for entry in rows.entries:
            self.by_record.setdefault(entry.record_id, []).append(entry)
            self.by_intent.setdefault(entry.intent, []).append(entry)
            self.by_path.setdefault(entry.path, []).append(entry)
        self.first: dict[str, EntryRow] = {}
        for entry in sorted(
            (e for e in rows.entries if e.position is not None),
            key=lambda e: e.position or 0,
        ):
            self.first.setdefault(entry.record_id, entry)

    def run(self) -> None:
        """Run the checks in their documented order."""
        steps: tuple[tuple[str, Callable[[], None]], ...] = (
            ("meta", self.check_meta),
            ("records", self.check_records),
            ("schemas", self.check_schemas),
            ("causality", self.check_causality),
            ("ordinals", self.check_paths),
            ("log", self.check_log),
            ("placement", self.check_placement),
            ("intents", self.check_intents),
            ("contexts", self.check_contexts),
            ("frontiers", self.check_frontiers),
            ("materializations", self.check_ledger),
            ("blobs", self.check_blobs),
            ("side writes", self.check_side_writes),
            ("blob store", self.check_blob_store),
        )
        for done, (phase, step) in enumerate(steps, start=1):
            try:
                step()
            except Exception as exc:
                self.report(
                    phase,
                    f"the check stopped on {type(exc).__name__}: {exc} (a bug in "
                    "verify: the trace is not vouched for)",
                    None,
                )
            self.tick(phase, done, len(steps))

    # ------------------------------------------------------------ meta

    def check_meta(self) -> None:
        meta = self.rows.meta
        marker = meta.get(META_SCHEMA)
        absent = self.rows.absent_columns
        if marker == SCHEMA_V1 and absent:
            pass  # a v1 trace read as it is: it lacks the chain columns
        elif marker == SCHEMA_V2 and self.rows.side is None and not absent:
            pass  # a v2 trace read as it is: it lacks side_writes
        elif marker == SCHEMA_VERSION and self.rows.side is None:
            self.report("meta", f"a {marker} trace without table side_writes", None)
        elif marker != SCHEMA_VERSION:
            self.report(
                "meta", f"schema marker {marker!r} is not {SCHEMA_VERSION!r}", None
            )
        elif absent:
            self.report("meta", f"a {marker} trace without column {absent[0]}", None)
        for key in sorted(set(meta) - KNOWN_META_KEYS):
            self.report("meta", f"unknown meta key {key!r}", None)

    # ---------------------------------------------------------- records

    def _log_order(self) -> list[RecordRow]:
        def key(record: RecordRow) -> tuple[int, str]:
            entry = self.first.get(record.record_id)
            return (-1 if entry is None else entry.position or 0, record.record_id)

        return sorted(self.rows.records, key=key)

    def check_records(self) -> None:
        for record in self._log_order():
            self._check_identity(record)
            self._check_witness_ref(record)
            if record.schema_ref == REDACTION_SCHEMA_REF:
                self._check_redaction_record(record)

    def _check_identity(self, record: RecordRow) -> None:
        rid = record.record_id
        if rid != record.digest:
            self.report("identity", f"digest column says {record.digest}", rid)
        if record.redacted_by is not None:
            self._check_redacted(record, record.redacted_by)
            return
        try:
            if record.schema_ref in _WITNESS_SCHEMAS:
                validate_witness_body(record.schema_ref, record.payload)
            recomputed = record_digest(
                record.schema_ref,
                record.mode,
                record.payload,
                record.caused_by,
                record.witness_ref,
            )
        except (DomainError, TypeError, ValueError) as exc:
            self.report("identity", f"stored content is not a valid record: {exc}", rid)
            return
        if recomputed != rid:
            self.report(
                "identity",
                f"stored content digests to {recomputed}, not to its id",
                rid,
            )

    def _check_redacted(self, record: RecordRow, redaction_id: str) -> None:
        """A redacted body: a committed redaction record must name this record."""
        rid = record.record_id
        redaction = self.records.get(redaction_id)
        if (
            redaction is None
            or redaction.schema_ref != REDACTION_SCHEMA_REF
            or redaction.redacted_by is not None
            or rid not in _erased(redaction)
        ):
            self.report(
                "identity",
                f"a redacted body that no redaction record names (it cites "
                f"{redaction_id}): the payload was removed without a recorded "
                "redaction",
                rid,
            )
        elif record.schema_ref in _WITNESS_SCHEMAS or record.schema_ref in (
            REDACTION_SCHEMA_REF,
            FRONTIER_SCHEMA_REF,
        ):
            self.report("identity", f"a redacted {record.schema_ref} record", rid)

    def _check_redaction_record(self, redaction: RecordRow) -> None:
        """Every record a redaction names must hold the body that names it."""
        erased = _erased(redaction)
        payload = redaction.payload
        if (
            set(payload) != {"erased", "reason"}
            or erased != sorted(set(erased))
            or list(redaction.caused_by) != erased
        ):
            self.report(
                "identity",
                "a redaction record whose erased list is not its sorted parents",
                redaction.record_id,
            )
        for rid in erased:
            record = self.records.get(rid)
            if record is not None and record.redacted_by != redaction.record_id:
                self.report(
                    "identity",
                    f"redaction {redaction.record_id} names this record, but its "
                    "stored body is not the redaction form",
                    rid,
                )

    def _check_witness_ref(self, record: RecordRow) -> None:
        rid, schema, witness = record.record_id, record.schema_ref, record.witness_ref
        if schema == ROOT_WITNESS_SCHEMA_REF:
            if rid != root_witness_record_id() or witness != ROOT_WITNESS_REF:
                self.report("witness", "a root witness that is not the root", rid)
        elif schema == WITNESS_SCHEMA_REF:
            if witness != root_witness_record_id():
                self.report("witness", "an ordinary witness must cite the root", rid)
        else:
            cited = self.records.get(witness)
            if cited is None or cited.schema_ref not in _WITNESS_SCHEMAS:
                self.report(
                    "witness", f"witness_ref {witness!r} is not a stored witness", rid
                )

    # ------------------------------------------------------------ schemas

    def check_schemas(self) -> None:
        """Decode every record of a schema the default libraries know.

        A record of a known schema whose typed event does not fit (wrong mode,
        a missing or mistyped key) is one the runtime would refuse to fold.
        """
        known = known_schema_refs()
        for record in self._log_order():
            schema_ref = record.schema_ref
            if schema_ref not in known or event_class_for(schema_ref) is None:
                continue
            try:
                decode_payload(schema_ref, record.mode, record.payload)
            except RecordDecodeError as exc:
                self.report(
                    "schemas",
                    f"a {schema_ref} record the runtime cannot read: {exc.reason}",
                    record.record_id,
                )

    # -------------------------------------------------------- causality

    def check_causality(self) -> None:
        edges: dict[str, list[tuple[int, str]]] = {}
        for edge in self.rows.edges:
            edges.setdefault(edge.child, []).append((edge.index, edge.parent))
        for child in sorted(set(edges) - set(self.records)):
            self.report("causality", "edge rows of a record that is not stored", child)
        for record in self._log_order():
            rows = sorted(edges.get(record.record_id, []))
            stored = tuple(parent for _, parent in rows)
            slots = [index for index, _ in rows]
            if stored != record.caused_by or slots != list(range(len(rows))):
                self.report(
                    "causality",
                    f"edge rows {rows} disagree with caused_by "
                    f"{list(record.caused_by)}",
                    record.record_id,
                )
            self._check_parents(record)

    def _check_parents(self, record: RecordRow) -> None:
        mine = self.first.get(record.record_id)
        for parent in record.caused_by:
            if parent not in self.records:
                self.report(
                    "causality", f"parent {parent} is not stored", record.record_id
                )
                continue
            theirs = self.first.get(parent)
            if mine is None or theirs is None or mine.position is None:
                continue
            if (theirs.position or 0) >= mine.position:
                self.report(
                    "causality",
                    f"placed at log position {mine.position}, before its parent "
                    f"{parent} (position {theirs.position})",
                    record.record_id,
                )

    # ------------------------------------------------------------ paths

    def check_paths(self) -> None:
        for path in sorted(self.by_path):
            entries = sorted(self.by_path[path], key=lambda e: e.ordinal)
            for expected, entry in enumerate(entries):
                if entry.ordinal != expected:
                    self.report(
                        "ordinals",
                        f"path {path!r} has ordinal {entry.ordinal} where "
                        f"{expected} was due",
                        entry.record_id,
                    )
                    break
            self._check_path_follows_log(path, entries)
        counts = {path: len(entries) for path, entries in self.by_path.items()}
        stored = self.rows.ordinals
        for owner in sorted(set(stored) | set(counts)):
            if stored.get(owner, 0) != counts.get(owner, 0):
                self.report(
                    "ordinals",
                    f"owner {owner!r}: next ordinal {stored.get(owner, 0)} but "
                    f"{counts.get(owner, 0)} entries",
                    None,
                )

    def _check_path_follows_log(self, path: str, entries: list[EntryRow]) -> None:
        if path == WITNESS_OWNER:
            return
        last: EntryRow | None = None
        for entry in entries:
            if entry.position is None:
                continue
            if last is not None and (last.position or 0) >= entry.position:
                self.report(
                    "ordinals",
                    f"{path}#{entry.ordinal} is at log position {entry.position}, "
                    f"before {path}#{last.ordinal} (position {last.position})",
                    entry.record_id,
                )
            last = entry

    # -------------------------------------------------------------- log

    def check_log(self) -> None:
        logged = sorted(
            (e for e in self.rows.entries if e.position is not None),
            key=lambda e: e.position or 0,
        )
        holes = self._holes(logged)
        count = 0
        for entry in logged:
            while holes and holes[0][1] <= (entry.position or 0):
                seq, first, last = holes.pop(0)
                if first > count:
                    self.report(
                        "log",
                        f"hole step {seq} starts at position {first} "
                        f"where {count} was due{_UNRECORDED}",
                        None,
                    )
                count = max(count, last + 1)
            if entry.position != count:
                self.report(
                    "log",
                    f"position {entry.position} where {count} was due"
                    + (_UNRECORDED if (entry.position or 0) > count else ""),
                    entry.record_id,
                )
            if entry.receipt != f"commit:{entry.position}":
                self.report(
                    "log",
                    f"commit receipt {entry.receipt!r} at position {entry.position}",
                    entry.record_id,
                )
            count = (entry.position or 0) + 1
        for seq, first, last in holes:
            if first > count:
                self.report(
                    "log",
                    f"hole step {seq} starts at position {first} where {count} "
                    f"was due{_UNRECORDED}",
                    None,
                )
            count = max(count, last + 1)
        stored = self.rows.meta.get(META_NEXT_COMMIT)
        if stored is None or not self._counter_agrees(stored, count):
            self.report(
                "log", f"next commit sequence {stored} but {count} positions", None
            )

    def _holes(self, logged: list[EntryRow]) -> list[tuple[int, int, int]]:
        """The positions the hole steps record: ``(commit, first, last)`` sorted.

        Each must start where the log (with the holes before it) leaves off,
        and hold no entry: a forged hole over a real record is named here.
        """
        spans: list[tuple[int, int, int]] = []
        for step in sorted(self.rows.side or (), key=lambda s: s.commit_seq):
            if step.table_name != HOLE_TABLE:
                continue
            try:
                span = parse_hole_key(step.row_key)
            except ValueError as exc:
                self.report("log", f"hole step {step.commit_seq}: {exc}", None)
                continue
            if step.row_digest is not None:
                self.report(
                    "log",
                    f"hole step {step.commit_seq} has a row digest "
                    f"{step.row_digest!r} (a hole writes no row)",
                    None,
                )
            if span is not None:
                spans.append((step.commit_seq, *span))
        spans.sort(key=lambda span: span[1])
        positions = [entry.position or 0 for entry in logged]
        previous = -1
        for seq, first, last in spans:
            if first <= previous:
                self.report(
                    "log",
                    f"hole step {seq} records positions {first}-{last}, which "
                    f"overlap an earlier hole step (up to {previous})",
                    None,
                )
            previous = max(previous, last)
            index = bisect.bisect_left(positions, first)
            while index < len(positions) and positions[index] <= last:
                self.report(
                    "log",
                    f"hole step {seq} records position {positions[index]} as "
                    "abandoned, but it holds a record",
                    logged[index].record_id,
                )
                index += 1
        return spans

    def _counter_agrees(self, stored: str, count: int) -> bool:
        """SQLite keeps the counter exact; on PostgreSQL it is only a floor.

        PostgreSQL writers draw positions from a sequence and never update
        ``meta`` (ADR 0036): its value is what an upgrade or import left, and
        a floor above the stored positions would skip positions.
        """
        if not self.rows.postgres:
            return stored == str(count)
        return stored.isascii() and stored.isdigit() and int(stored) <= count

    # -------------------------------------------------------- placement

    def check_placement(self) -> None:
        for entry in self.rows.entries:
            self._check_entry(entry)
        citing: dict[str, EntryRow] = {}
        for record_id, entry in sorted(
            self.first.items(), key=lambda item: item[1].position or 0
        ):
            record = self.records.get(record_id)
            if record is not None:
                citing.setdefault(record.witness_ref, entry)
        if self.first:
            root = min(self.first.values(), key=lambda e: e.position or 0)
            citing.setdefault(root_witness_record_id(), root)
        for record in self._log_order():
            self._check_record_placement(record, citing)

    def _check_entry(self, entry: EntryRow) -> None:
        record = self.records.get(entry.record_id)
        where = f"{entry.path}#{entry.ordinal}"
        if record is None:
            self.report(
                "placement",
                f"{where} places a record that is not stored",
                entry.record_id,
            )
            return
        if entry.intent not in self.intents:
            self.report(
                "placement",
                f"{where} cites unknown intent {entry.intent!r}",
                entry.record_id,
            )
        is_witness = record.schema_ref in _WITNESS_SCHEMAS
        if is_witness != (entry.path == WITNESS_OWNER):
            self.report(
                "placement",
                f"{where}: a witness belongs on {WITNESS_OWNER!r} and only there",
                entry.record_id,
            )
        elif is_witness:
            self._check_witness_entry(entry, record)
        else:
            self._check_ordinary_entry(entry)

    def _check_witness_entry(self, entry: EntryRow, record: RecordRow) -> None:
        rid = entry.record_id
        if entry.position is not None or entry.receipt != f"witness:{rid}":
            self.report(
                "log",
                f"witness entry with position {entry.position} and "
                f"receipt {entry.receipt!r}",
                rid,
            )
        if entry.context:
            self.report(
                "contexts", f"witness entry cites context {entry.context!r}", rid
            )
        label = witness_kind_label(record.schema_ref)
        if entry.kind != label:
            self.report(
                "kind", f"witness entry labelled {entry.kind!r}, not {label!r}", rid
            )

    def _check_ordinary_entry(self, entry: EntryRow) -> None:
        if entry.position is None:
            self.report(
                "log", f"entry on {entry.path!r} has no position", entry.record_id
            )
        if not entry.kind:
            self.report(
                "kind",
                f"{entry.path}#{entry.ordinal} has no kind label",
                entry.record_id,
            )

    def _check_record_placement(
        self, record: RecordRow, citing: dict[str, EntryRow]
    ) -> None:
        rid = record.record_id
        entries = self.by_record.get(rid, [])
        if not entries:
            self.report("placement", "the record is on no path", rid)
            return
        if record.schema_ref in _WITNESS_SCHEMAS:
            first = citing.get(rid)
            if len(entries) != 1:
                self.report("placement", f"witness has {len(entries)} entries", rid)
            if first is None:
                self.report("placement", "no placed record cites this witness", rid)
                return
            expected = first.intent
            if entries[0].intent != expected:
                self.report(
                    "placement",
                    f"witness entry credited to intent "
                    f"{entries[0].intent!r}, first cited by {expected!r}",
                    rid,
                )
        else:
            found = self.first.get(rid)
            expected = entries[0].intent if found is None else found.intent
        if record.intent != expected:
            self.report(
                "placement",
                f"record credited to intent {record.intent!r}, "
                f"first placed by {expected!r}",
                rid,
            )

    # ---------------------------------------------------------- intents

    def check_intents(self) -> None:
        created: dict[str, list[str]] = {}
        for context in self.rows.contexts:
            created.setdefault(context.intent, []).append(context.context_id)
        for intent in sorted(self.rows.intents, key=self._intent_order):
            name = f"intent {intent.intent_id!r}"
            if not is_hex_digest(intent.batch_digest):
                self.report(
                    "intents",
                    f"{name}: batch digest {intent.batch_digest!r} "
                    "is not a SHA-256 hex digest",
                    None,
                )
            if parse_timestamp(intent.committed_at) is None:
                self.report(
                    "intents",
                    f"{name}: committed_at {intent.committed_at!r} is not a timestamp",
                    None,
                )
            self._check_txid(name, intent)
            for problem in receipt_problems(
                intent.intent_id,
                intent.receipt,
                self._logged(intent.intent_id),
                created.get(intent.intent_id, []),
            ):
                self.report("intents", f"{name}: {problem}", None)

    def _check_txid(self, name: str, intent: Any) -> None:
        """Each path entry carries the transaction id of its intent's commit."""
        for entry in self.by_intent.get(intent.intent_id, ()):
            if entry.txid != intent.txid:
                self.report(
                    "intents",
                    f"{name}: path {entry.path!r} ordinal {entry.ordinal} has "
                    f"transaction id {entry.txid!r}, its intent {intent.txid!r}",
                    None,
                )

    def _intent_order(self, intent: Any) -> tuple[int, str]:
        logged = self._logged(intent.intent_id)
        return (logged[0].position if logged else 2**63, intent.intent_id)

    def _logged(self, intent_id: str) -> list[LoggedEntry]:
        entries = sorted(
            (e for e in self.by_intent.get(intent_id, []) if e.position is not None),
            key=lambda e: e.position or 0,
        )
        return [
            LoggedEntry(
                position=e.position or 0,
                path=e.path,
                ordinal=e.ordinal,
                record_id=e.record_id,
                context=e.context,
                parents=self._parents(e.record_id),
            )
            for e in entries
        ]

    def _parents(self, record_id: str) -> tuple[str, ...]:
        record = self.records.get(record_id)
        return () if record is None else record.caused_by

    # --------------------------------------------------------- contexts

    def check_contexts(self) -> None:
        for context in self.rows.contexts:
            self._check_context_id(context)
        for entry in sorted(self.rows.entries, key=lambda e: e.position or -1):
            if entry.position is not None and entry.path != WITNESS_OWNER:
                self._check_entry_context(entry)

    def _check_context_id(self, context: ContextRow) -> None:
        intent = self.intents.get(context.intent)
        if intent is None:
            self.report(
                "contexts",
                f"context {context.context_id!r} cites unknown "
                f"intent {context.intent!r}",
                None,
            )
            return
        receipts = intent.receipt.get("context_receipts")
        slots = [
            i
            for i, c in enumerate(receipts if isinstance(receipts, list) else [])
            if c == context.context_id
        ]
        for problem in context_problems(
            context.context_id, context.intent, _content(context), slots
        ):
            self.report("contexts", problem, None)

    def _check_entry_context(self, entry: EntryRow) -> None:
        context = self.contexts.get(entry.context)
        if context is None:
            self.report(
                "contexts", f"context {entry.context!r} is not stored", entry.record_id
            )
            return
        record = self.records.get(entry.record_id)
        witness = None if record is None else self.records.get(record.witness_ref)
        if witness is None:
            return
        field = witness_context_mismatch(witness.payload, _content(context))
        if field is not None:
            self.report(
                "contexts",
                f"{entry.path}#{entry.ordinal}: context {entry.context!r} {field} "
                "disagrees with the record's witness",
                entry.record_id,
            )

    # -------------------------------------------------------- frontiers

    def check_frontiers(self) -> None:
        indexed = set()
        for row in self.rows.frontiers:
            indexed.add(row.created_by)
            record = self.records.get(row.created_by)
            if record is None or record.schema_ref != FRONTIER_SCHEMA_REF:
                self.report(
                    "frontiers",
                    f"frontier {row.frontier_id!r} has no record",
                    row.created_by,
                )
                continue
            self._check_frontier_row(row, record)
        for record in self._log_order():
            if (
                record.schema_ref == FRONTIER_SCHEMA_REF
                and record.record_id not in indexed
            ):
                self.report(
                    "frontiers",
                    "a frontier record without its index row",
                    record.record_id,
                )

    def _check_frontier_row(self, row: Any, record: RecordRow) -> None:
        index = {
            "frontier_id": row.frontier_id,
            "target_trace_owner_id": row.target,
            "through_fact_id": row.through_fact,
            "through_owner_ordinal": row.through_ordinal,
            "publisher_trace_owner_id": row.publisher,
        }
        truth = {key: record.payload.get(key) for key in index}
        if truth != index:
            self.report(
                "frontiers",
                f"index row of {row.frontier_id!r} disagrees with its record",
                row.created_by,
            )
        at = [
            e.record_id
            for e in self.by_path.get(row.target, [])
            if e.ordinal == row.through_ordinal
        ]
        if at != [row.through_fact]:
            self.report(
                "frontiers",
                f"frontier {row.frontier_id!r}: its through record is not at "
                f"{row.target}#{row.through_ordinal}",
                row.created_by,
            )
        if row.intent != record.intent:
            self.report(
                "frontiers",
                f"index row of {row.frontier_id!r} credited to "
                f"intent {row.intent!r}, not {record.intent!r}",
                row.created_by,
            )

    # -------------------------------------------------- materializations

    def check_ledger(self) -> None:
        for row in self.rows.ledger:
            name = f"materialization {row.intent!r}"
            if not is_hex_digest(row.request_digest):
                self.report(
                    "materializations",
                    f"{name}: request digest "
                    f"{row.request_digest!r} is not a SHA-256 hex digest",
                    None,
                )
            if parse_timestamp(row.completed_at) is None:
                self.report(
                    "materializations",
                    f"{name}: completed_at {row.completed_at!r} is not a timestamp",
                    None,
                )
            try:
                refs = ledger_refs(row.receipt)
            except ValueError as exc:
                self.report("materializations", f"{name}: {exc}", None)
                continue
            for rid in (*refs.targets, *refs.produced):
                if rid not in self.records:
                    self.report(
                        "materializations",
                        f"{name}: receipt cites a record that is not stored",
                        rid,
                    )
            if refs.produced:
                self._check_produced(name, row.intent, refs)

    def _check_produced(self, name: str, intent_id: str, receipt: LedgerRefs) -> None:
        # materialize appends its captures under its own intent id, placed
        # with a context naming the substrate.
        logged = self._logged(intent_id)
        if [e.record_id for e in logged] != list(receipt.produced):
            self.report(
                "materializations",
                f"{name}: produced records {list(receipt.produced)} are "
                f"not what intent {intent_id!r} appended",
                None,
            )
            return
        for entry in logged:
            context = self.contexts.get(entry.context)
            if context is not None and context.substrate_ref != receipt.substrate_ref:
                self.report(
                    "materializations",
                    f"{name}: substrate {receipt.substrate_ref!r} but its captures "
                    f"were placed with {context.substrate_ref!r}",
                    entry.record_id,
                )

    # ------------------------------------------------------- side writes

    def check_side_writes(self) -> None:
        """Each side row against the last side step that wrote its key (ADR 0064).

        A row whose content digests otherwise, a row no step wrote, a row a
        step deleted, and a row a step wrote that is gone are each named.
        The chain check vouches for the steps themselves.
        """
        steps = self.rows.side
        if steps is None:
            return  # before schema v3: the upgrade chains the rows as found
        latest: dict[tuple[str, str], SideRow] = {}
        for step in sorted(steps, key=lambda s: s.commit_seq):
            if step.table_name == HOLE_TABLE:
                continue  # no row: check_log checks the positions it records
            if step.table_name not in SIDE_TABLES:
                self.report(
                    "side writes",
                    f"commit {step.commit_seq} names table {step.table_name!r}, "
                    "which is not a side table",
                    None,
                )
                continue
            latest[step.table_name, step.row_key] = step
        stored = self._side_row_digests()
        for table, key in sorted(set(latest) | set(stored)):
            problem = _side_problem(latest.get((table, key)), stored.get((table, key)))
            if problem is not None:
                self.report("side writes", f"{table} row {key!r} {problem}", None)

    def _side_row_digests(self) -> dict[tuple[str, str], str]:
        found: dict[tuple[str, str], str] = {}
        for row in self.rows.ledger:
            found[LEDGER, row.intent] = ledger_row_digest(
                row.intent, row.request_digest, row.receipt_json, row.completed_at
            )
        for blob in self.rows.blobs:
            found[BLOBS, blob.checkpoint_id] = blob_row_digest(
                blob.checkpoint_id,
                blob.scope_id,
                blob.seq,
                blob.state_json,
                blob.snapshot,
                blob.created_at_ns,
            )
        return found

    # ------------------------------------------------------------ blobs

    def check_blobs(self) -> None:
        created: dict[str, RecordRow] = {}
        for record in self._log_order():
            if record.schema_ref == CheckpointCreated.SCHEMA:
                created.setdefault(str(record.payload.get("checkpoint_id")), record)
        # A missing blob is no forgery: the runtime deletes the blob of a
        # burnt checkpoint and of every checkpoint of an ended scope. A blob
        # no record vouches for (a crash between blob and record) is never
        # handed out by any reader.
        for blob in self.rows.blobs:
            vouching = created.get(blob.checkpoint_id)
            if vouching is not None:
                self._check_blob(blob, vouching)

    def check_blob_store(self) -> None:
        stored: dict[str, ContentRow] = {}
        for row in self.rows.contents:
            stored[row.digest] = row
            actual = "sha256:" + hashlib.sha256(row.data).hexdigest()
            if actual != row.digest or row.size != len(row.data):
                self.report(
                    "blob store",
                    f"blob {row.digest}: its {len(row.data)} bytes digest to "
                    f"{actual} (size column {row.size})",
                    None,
                )
        addresses = BlobAddresses()
        for record in self._log_order():
            addresses.note(record.schema_ref, record.payload)
        held = {holder.digest for holder in self.rows.holders}
        for holder in self.rows.holders:
            if holder.digest not in stored:
                self.report(
                    "blob store",
                    f"blob holder {holder.holder!r} holds {holder.digest}, not stored",
                    None,
                )
            problem = addresses.holder_problem(holder.holder, holder.digest)
            if problem is not None:
                self.report("blob store", problem, None)
        for digest in sorted(set(stored) - held):
            self.report("blob store", f"blob {digest} is held by no holder", None)
        holding = {holder.holder: holder.digest for holder in self.rows.holders}
        for name, digest in sorted(addresses.holders().items()):
            if holding.get(name) != digest:
                self.report(
                    "blob store",
                    f"blob holder {name!r} does not hold {digest}, which the "
                    "trace names",
                    None,
                )
        for digest in sorted(addresses.live() - set(stored)):
            self.report(
                "blob store", f"blob {digest} named by the trace is not stored", None
            )

    def _check_blob(self, blob: BlobRow, record: RecordRow) -> None:
        name = f"checkpoint {blob.checkpoint_id!r}"
        for problem in blob_problems(
            blob.checkpoint_id,
            blob.scope_id,
            blob.seq,
            blob.state,
            blob.snapshot,
            record.payload,
        ):
            self.report("blobs", f"{name}: {problem}", record.record_id)
        intent = self.intents.get(record.intent)
        committed = None if intent is None else parse_timestamp(intent.committed_at)
        if committed is None:
            return
        created = datetime.fromtimestamp(blob.created_at_ns / 1e9, UTC)
        if abs(created - committed) > BLOB_CLOCK_SLACK:
            self.report(
                "blobs",
                f"{name}: created at {created:%Y-%m-%d %H:%M:%S}, but its record "
                f"committed at {committed:%Y-%m-%d %H:%M:%S}",
                record.record_id,
            )


_UNRECORDED: Final = (
    " (no hole step records the positions between: a PostgreSQL writer that "
    "died before its COMMIT leaves such a gap until a writer seals)"
)


def _side_problem(step: SideRow | None, digest: str | None) -> str | None:
    """What is wrong with one side row (``digest``: its content; ``None``: absent)."""
    if step is None:
        return "was written by no side write (the commit chain does not vouch for it)"
    where = f"commit {step.commit_seq}"
    if step.row_digest is None:
        return None if digest is None else f"is present, but {where} deleted it"
    if digest is None:
        return f"is gone, but {where} wrote it and no later step deleted it"
    if digest != step.row_digest:
        return (
            f"changed since {where} wrote it: its columns digest to {digest}, "
            f"not {step.row_digest}"
        )
    return None


def _erased(redaction: RecordRow) -> list[str]:
    erased = redaction.payload.get("erased")
    if not isinstance(erased, list) or not all(isinstance(e, str) for e in erased):
        return []
    return erased


def _content(context: ContextRow) -> dict[str, Any]:
    content: dict[str, Any] = {name: list(refs) for name, refs in context.refs.items()}
    content["substrate_ref"] = context.substrate_ref
    content["containment"] = context.containment
    return content
