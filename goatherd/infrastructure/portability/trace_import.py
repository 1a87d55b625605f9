"""Prove an exported trace line by line and write it in one transaction.

Import refuses anything ``verify`` would refuse, and names the line: every
record id is recomputed from its content, witness bodies and chains, causal
parents retained before their children, gap-free ordinals and positions
(positions skip only what a hole line records, ADR 0076), commit receipts,
each intent's receipt recomputed from its entries, each new context id
recomputed and matched against the witnesses of the records placed with it,
the frontier index against its records, ledger receipts, and each
checkpoint blob against the ``checkpoint.created`` record that vouches for it
(the shared rules live in :mod:`goatherd.infrastructure.audit.rules`), and
each ledger and checkpoint row against the last ``side`` line that wrote its
key (ADR 0064). Intent and side lines are numbered in line order as the
chain's commits, so the copy ends at the export's head. A file without side
lines (an export made before schema v3) gets one step per side row after its
last commit, as the upgrade of a trace does.

Each proven line is written at once inside ONE transaction on the target,
which is rolled back on the first refusal: memory stays bounded by the
longest line (at most ``max_line_bytes``) plus one counter per owner path,
and lookups of earlier lines go to the rows already written. Import copies
verified rows instead of replaying appends because the original batches
cannot be rebuilt and their batch digests must stay intact (ADR 0019).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import os
import tempfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any, Final

from sqlalchemy import Connection, func, insert, inspect, select, update
from sqlalchemy.engine import make_url
from sqlalchemy.exc import IntegrityError

from goatherd.domain.canonical import ABI_VERSION
from goatherd.domain.errors import DomainError, GoatherdError
from goatherd.domain.events.checkpoint import CheckpointCreated
from goatherd.domain.workspace import WorkspaceState
from goatherd.infrastructure.audit.checks import BLOB_CLOCK_SLACK, parse_timestamp
from goatherd.infrastructure.audit.rules import (
    BlobAddresses,
    LedgerRefs,
    blob_problems,
    is_hex_digest,
    ledger_refs,
)
from goatherd.infrastructure.blobs.store import blob_tables
from goatherd.infrastructure.portability.import_intent import (
    IntentProver,
    Lookup,
)
from goatherd.infrastructure.portability.import_intent import (
    text_field as _text,
)
from goatherd.infrastructure.store import postgres as pg
from goatherd.infrastructure.store.chain import (
    HOLE_TABLE,
    SideContent,
    parse_hole_key,
    side_digest,
)
from goatherd.infrastructure.store.codec import storage_json
from goatherd.infrastructure.store.driver import Driver
from goatherd.infrastructure.store.engine import postgres_engine
from goatherd.infrastructure.store.opening import open_trace_store
from goatherd.infrastructure.store.outages import outages
from goatherd.infrastructure.store.schema import (
    META_NEXT_COMMIT,
    METADATA,
    SIDE_TABLES,
    append_intents,
    checkpoint_snapshots,
    contexts,
    materialization_intents,
    meta,
    owner_ordinals,
    path_entries,
    records,
    side_writes,
)
from goatherd.infrastructure.store.sealing import chain_unchained_side_rows, seal
from goatherd.infrastructure.store.side import (
    BLOBS,
    LEDGER,
    blob_row_digest,
    ledger_row_digest,
)
from goatherd.infrastructure.store.store import SqlAlchemyTraceStore

__all__ = [
    "DEFAULT_MAX_LINE_BYTES",
    "EXPORT_FORMAT",
    "ImportRejectedError",
    "ImportSummary",
    "import_trace",
    "import_trace_to",
    "read_export_lines",
]

EXPORT_FORMAT: Final = "goatherd.trace.jsonl.v1"
DEFAULT_MAX_LINE_BYTES: Final = 64 << 20
"""The longest export line import reads (64 MiB); longer lines are refused."""

Progress = Callable[[str, int, int], None]
_INT64_MIN: Final = -(2**63)
_INT64_MAX: Final = 2**63 - 1
_LEDGER_TYPES: Final = ("materialization", "checkpoint")


class ImportRejectedError(GoatherdError, ValueError):
    """Raised when an export file cannot be proven; nothing was written.

    Attributes:
        line: the 1-based line number at fault (0 for the file as a whole).
        reason: what is wrong there.
    """

    def __init__(self, line: int, reason: str) -> None:
        """Record the offending ``line`` and the ``reason``."""
        where = f"line {line}" if line else "file"
        super().__init__(f"{where}: {reason}")
        self.line = line
        self.reason = reason


@dataclass(frozen=True, slots=True)
class ImportSummary:
    """What an import wrote."""

    intents: int
    records: int
    path_entries: int
    checkpoints: int
    materializations: int
    blobs: int = 0
    head: str = ""
    side_writes: int = 0


def read_export_lines(
    stream: IO[bytes], max_line_bytes: int = DEFAULT_MAX_LINE_BYTES
) -> Iterator[bytes]:
    """Yield the lines of a binary export stream, never reading past the limit.

    Raises:
        ImportRejectedError: a line longer than ``max_line_bytes``.
    """
    number = 0
    while True:
        line = stream.readline(max_line_bytes + 1)
        if not line:
            return
        number += 1
        if len(line) > max_line_bytes:
            raise ImportRejectedError(number, _too_long(max_line_bytes))
        yield line


def _too_long(limit: int) -> str:
    return (
        f"the line is longer than {limit} bytes (the import's per-line limit; "
        "raise it with --max-line-bytes)"
    )


def import_trace(
    lines: Iterable[str | bytes],
    store: SqlAlchemyTraceStore,
    *,
    progress: Progress | None = None,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    accept_headless: bool = False,
) -> ImportSummary:
    """Prove an exported trace line by line into the empty ``store``, atomically.

    ``accept_headless``: import an end line that names no head (an export
    made before heads were written). Its chain then goes unchecked, so a field
    only the chain covers could have been edited; the default refuses it.

    Raises:
        ImportRejectedError: a line that cannot be proven, a line longer than
            ``max_line_bytes``, or a non-empty target; nothing is written.
    """
    with store.transaction() as conn:
        _require_empty(conn)
        importer = _Importer(conn, max_line_bytes, accept_headless=accept_headless)
        for number, raw in enumerate(lines, start=1):
            importer.feed(number, raw)
            if progress is not None and number % 500 == 0:
                progress("import", number, 0)
        summary = importer.finish()
        # Chain the imported commits in the same transaction (ADR 0038), the
        # side rows of a file without side lines after them (ADR 0064).
        driver = Driver(conn)
        steps = importer.steps
        if not importer.side_lines:
            steps += chain_unchained_side_rows(driver)
        if driver.postgres:
            driver.run(pg.sequence_restart(pg.COMMITS_SEQUENCE, steps))
            # Past every hole too: max(position) + 1 could fall inside one.
            driver.run(
                pg.sequence_restart(pg.POSITIONS_SEQUENCE, importer.next_position)
            )
        head = seal(driver)
        importer.check_head(str(head))
        return replace(summary, head=str(head), side_writes=steps - summary.intents)


def _require_empty(conn: Connection) -> None:
    for table in (
        append_intents,
        records,
        checkpoint_snapshots,
        materialization_intents,
        side_writes,
    ):
        if conn.execute(select(func.count()).select_from(table)).scalar_one():
            raise ImportRejectedError(
                0, "the target store is not empty; import into a new database"
            )


@dataclass
class _Counts:
    intents: int = 0
    records: int = 0
    entries: int = 0
    checkpoints: int = 0
    materializations: int = 0


@dataclass
class _Importer:
    conn: Connection
    max_line_bytes: int
    accept_headless: bool = False
    digest: Any = field(default_factory=hashlib.sha256)
    counts: _Counts = field(default_factory=_Counts)
    number: int = 0
    seen_end: bool = False
    end: tuple[int, object] = (0, None)
    in_ledger: bool = False
    next_ordinal: dict[str, int] = field(default_factory=dict)
    next_position: int = 0
    logged: bool = False
    """Whether an earlier intent line placed a logged entry."""
    checkpoints: dict[str, tuple[dict[str, Any], str]] = field(default_factory=dict)
    blobs: set[str] = field(default_factory=set)
    ledger_ids: set[str] = field(default_factory=set)
    lookup: Lookup = field(init=False)
    addresses: BlobAddresses = field(default_factory=BlobAddresses)
    imported_blobs: set[str] = field(default_factory=set)
    imported_holders: dict[str, str] = field(default_factory=dict)
    redacted: dict[str, str] = field(default_factory=dict)
    redactions: dict[str, list[str]] = field(default_factory=dict)
    steps: int = 0
    """Commit numbers taken so far (intent and side lines)."""
    side_lines: int = 0
    latest: dict[tuple[str, str], tuple[int, str | None]] = field(default_factory=dict)
    """The last side line per side row: its line number and row digest."""
    side_rows: dict[tuple[str, str], tuple[int, str]] = field(default_factory=dict)
    """Each imported side row: its line number and row digest."""

    def __post_init__(self) -> None:
        self.lookup = Lookup(self.conn)
        for table in blob_tables():
            table.create(self.conn, checkfirst=True)

    def _blob(self, obj: dict[str, Any]) -> None:
        self.in_ledger = True
        digest = _text(obj, "digest", empty=False)
        data = base64.b64decode(_text(obj, "data_b64"), validate=True)
        actual = "sha256:" + hashlib.sha256(data).hexdigest()
        if actual != digest:
            raise ValueError(f"blob {digest}: its bytes digest to {actual}")
        holders = obj["holders"]
        if not isinstance(holders, list) or not holders:
            raise ValueError(f"blob {digest} is held by no holder")
        _once(self.imported_blobs, "blob", digest)
        contents, holder_table = blob_tables()
        self.conn.execute(
            insert(contents), {"digest": digest, "size": len(data), "data": data}
        )
        for holder in holders:
            if not isinstance(holder, str) or not holder:
                raise TypeError("blob holders must be non-empty strings")
            problem = self.addresses.holder_problem(holder, digest)
            if problem:
                raise ValueError(problem)
            if holder in self.imported_holders:
                raise ValueError(f"blob holder {holder!r} appears twice")
            self.imported_holders[holder] = digest
            self.conn.execute(
                insert(holder_table), {"holder": holder, "digest": digest}
            )

    def feed(self, number: int, raw: str | bytes) -> None:
        self.number = number
        if self.seen_end:
            raise ImportRejectedError(number, "content after the end line")
        text, data = _decode(number, raw, self.max_line_bytes)
        obj = _parse(number, text)
        if number == 1:
            _prove_header(number, obj)
        elif obj.get("type") == "end":
            _prove_end(number, obj, self.digest, self.accept_headless)
            self.end = (number, obj.get("head"))
            self.seen_end = True
            return
        else:
            self._prove_line(number, obj)
        self.digest.update(data)

    def _prove_line(self, number: int, obj: dict[str, Any]) -> None:
        kind = obj.get("type")
        try:
            if kind == "intent":
                self._intent(obj)
            elif kind == "side":
                self._side(obj)
            elif kind == "materialization":
                self._materialization(obj)
            elif kind == "checkpoint":
                self._checkpoint(obj)
            elif kind == "blob":
                self._blob(obj)
            else:
                raise ValueError(f"unknown line type {kind!r}")
        except ImportRejectedError:
            raise
        except IntegrityError:
            raise ImportRejectedError(
                number, "the line conflicts with rows of an earlier line"
            ) from None
        except (DomainError, KeyError, TypeError, ValueError, binascii.Error) as exc:
            reason = f"missing field {exc}" if isinstance(exc, KeyError) else str(exc)
            raise ImportRejectedError(number, reason) from None

    def _intent(self, obj: dict[str, Any]) -> None:
        if self.in_ledger:
            raise ValueError("an intent line after the ledger and checkpoint lines")
        prover = IntentProver(
            obj,
            self.lookup,
            self.next_ordinal,
            self.next_position,
            first_logged=not self.logged,
        )
        rows = prover.prove()
        self.logged = self.logged or prover.next_position > prover.first_position
        for table, values in rows.tables:
            if table is append_intents:
                # Commit numbers follow the lines (the export's commit order),
                # so the imported chain ends at the export's head (ADR 0038).
                values = [{**v, "commit_seq": self.steps} for v in values]
            if values:
                self.conn.execute(insert(table), values)
        self.next_position = prover.next_position
        for schema, payload in rows.runtime:
            self.addresses.note(schema, payload)
            if schema == CheckpointCreated.SCHEMA:
                checkpoint_id = str(payload.get("checkpoint_id"))
                self.checkpoints[checkpoint_id] = (payload, rows.committed_at)
        self.redacted.update(rows.redacted)
        self.redactions.update(rows.redactions)
        self.steps += 1
        self.counts.intents += 1
        self.counts.records += rows.record_count
        self.counts.entries += rows.entry_count

    def _side(self, obj: dict[str, Any]) -> None:
        """One write to a side table: the next step of the chain (ADR 0064)."""
        if self.in_ledger:
            raise ValueError("a side line after the ledger and checkpoint lines")
        table = _text(obj, "table", empty=False)
        if table == HOLE_TABLE:
            self._hole(obj)
            return
        if table not in SIDE_TABLES:
            raise ValueError(f"side table {table!r} is not one of {list(SIDE_TABLES)}")
        key = _text(obj, "row_key", empty=False)
        digest = obj["row_digest"]
        if digest is not None and not (
            isinstance(digest, str)
            and digest.startswith("sha256:")
            and is_hex_digest(digest[7:])
        ):
            raise ValueError(f"row_digest {digest!r} is not sha256:<hex> or null")
        content = SideContent(self.steps, table, key, digest)
        self.conn.execute(
            insert(side_writes),
            {
                "commit_seq": self.steps,
                "table_name": table,
                "row_key": key,
                "row_digest": digest,
                "commit_digest": side_digest(content),
            },
        )
        self.latest[table, key] = (self.number, digest)
        self.steps += 1
        self.side_lines += 1

    def _hole(self, obj: dict[str, Any]) -> None:
        """A commit number (and positions) a dead writer abandoned (ADR 0076)."""
        key = _text(obj, "row_key", empty=False)
        span = parse_hole_key(key)
        if obj["row_digest"] is not None:
            raise ValueError("a hole line's row_digest must be null")
        if span is not None:
            if span[0] != self.next_position:
                raise ValueError(
                    f"hole of log positions {key} where {self.next_position} is due"
                )
            self.next_position = span[1] + 1
        content = SideContent(self.steps, HOLE_TABLE, key, None)
        self.conn.execute(
            insert(side_writes),
            {
                "commit_seq": self.steps,
                "table_name": HOLE_TABLE,
                "row_key": key,
                "row_digest": None,
                "commit_digest": side_digest(content),
            },
        )
        self.steps += 1
        self.side_lines += 1

    def _check_side_rows(self) -> None:
        """Every side row as the last side line of its key left it (ADR 0064)."""
        if not self.side_lines:
            return  # an export before schema v3: the rows get steps at the end
        for table, key in sorted(set(self.latest) | set(self.side_rows)):
            step, row = self.latest.get((table, key)), self.side_rows.get((table, key))
            name = f"{table} row {key!r}"
            if step is None:
                assert row is not None
                reason = f"{name} was written by no side line"
            elif row is None:
                if step[1] is None:
                    continue
                reason = f"{name} is missing, the side line {step[0]} wrote it"
            elif step[1] is None:
                reason = f"{name} is present, the side line {step[0]} deleted it"
            elif step[1] != row[1]:
                reason = (
                    f"{name} digests to {row[1]}, the side line {step[0]} wrote "
                    f"{step[1]}"
                )
            else:
                continue
            raise ImportRejectedError(row[0] if row else self.number, reason)

    def _materialization(self, obj: dict[str, Any]) -> None:
        self.in_ledger = True
        intent = _text(obj, "materialize_intent_id", empty=False)
        _once(self.ledger_ids, "materialization", intent)
        receipt = obj["receipt"]
        if not isinstance(receipt, dict):
            raise TypeError("a materialization receipt must be an object")
        parsed = ledger_refs(receipt)
        lookup = Lookup(self.conn)
        for record_id in (*parsed.targets, *parsed.produced):
            if lookup.record(record_id) is None:
                raise ValueError(f"the receipt cites unknown record {record_id}")
        if parsed.produced:
            self._prove_produced(intent, parsed)
        digest, completed = _text(obj, "request_digest"), _text(obj, "completed_at")
        if not is_hex_digest(digest):
            raise ValueError(f"request_digest {digest!r} is not a SHA-256 hex digest")
        if parse_timestamp(completed) is None:
            raise ValueError(f"completed_at {completed!r} is not a timestamp")
        receipt_json = storage_json(receipt, root="receipt")
        self.conn.execute(
            insert(materialization_intents),
            {
                "materialize_intent_id": intent,
                "request_digest": digest,
                "receipt_json": receipt_json,
                "completed_at": completed,
            },
        )
        self.side_rows[LEDGER, intent] = (
            self.number,
            ledger_row_digest(intent, digest, receipt_json, completed),
        )
        self.counts.materializations += 1

    def _prove_produced(self, intent: str, receipt: LedgerRefs) -> None:
        # materialize appends its captures under its own intent id, placed
        # with a context naming the substrate (as verify checks).
        placed = self.conn.execute(
            select(path_entries.c.record_id, contexts.c.substrate_ref)
            .join(
                contexts, contexts.c.context_id == path_entries.c.retained_context_ref
            )
            .where(
                path_entries.c.append_intent_id == intent,
                path_entries.c.position.is_not(None),
            )
            .order_by(path_entries.c.position)
        ).all()
        if [row[0] for row in placed] != list(receipt.produced):
            raise ValueError(
                "the receipt's produced records are not what intent "
                f"{intent!r} appended"
            )
        if any(row[1] != receipt.substrate_ref for row in placed):
            raise ValueError(
                f"substrate {receipt.substrate_ref!r} is not the one its captures "
                "were placed with"
            )

    def _checkpoint(self, obj: dict[str, Any]) -> None:
        self.in_ledger = True
        state = WorkspaceState.from_json(obj["state"])
        snapshot = base64.b64decode(_text(obj, "snapshot_b64"), validate=True)
        seq, created = obj["seq"], obj["created_at_unixnano"]
        if type(seq) is not int or type(created) is not int:
            raise TypeError("checkpoint seq and created_at_unixnano must be integers")
        if not (
            _INT64_MIN <= seq <= _INT64_MAX and _INT64_MIN <= created <= _INT64_MAX
        ):
            raise ValueError("checkpoint seq and created_at_unixnano must fit 64 bits")
        checkpoint_id = _text(obj, "checkpoint_id", empty=False)
        scope_id = _text(obj, "scope_id")
        _once(self.blobs, "checkpoint", checkpoint_id)
        vouched = self.checkpoints.get(checkpoint_id)
        if vouched is not None:
            _prove_blob(checkpoint_id, scope_id, seq, state, snapshot, created, vouched)
        state_json = storage_json(state.to_json(), root="state")
        self.conn.execute(
            insert(checkpoint_snapshots),
            {
                "checkpoint_id": checkpoint_id,
                "scope_id": scope_id,
                "seq": seq,
                "state_json": state_json,
                "snapshot": snapshot,
                "created_at_unixnano": created,
            },
        )
        self.side_rows[BLOBS, checkpoint_id] = (
            self.number,
            blob_row_digest(
                checkpoint_id, scope_id, seq, state_json, snapshot, created
            ),
        )
        self.counts.checkpoints += 1

    def check_head(self, head: str) -> None:
        """Refuse unless the imported chain ends at the head the export names.

        The end line's head is required (:func:`_prove_end`) unless the
        caller accepted a headless export.
        """
        number, noted = self.end
        if noted is None and self.accept_headless:
            return
        if noted != head:
            raise ImportRejectedError(
                number,
                f"the imported commits chain to head {head}, the export names "
                f"{noted!r}: a line was edited or the export is not of this trace",
            )

    def _check_redactions(self) -> None:
        """Every redacted record must be named by the file's redaction record.

        The redaction record comes after the records it erased, so this runs
        once the whole file was read (ADR 0062).
        """
        for record_id, redaction in sorted(self.redacted.items()):
            if record_id not in self.redactions.get(redaction, ()):
                raise ImportRejectedError(
                    self.number,
                    f"record {record_id} is exported redacted by {redaction}, "
                    "but no redaction record of the file names it",
                )
        for redaction, erased in sorted(self.redactions.items()):
            for record_id in erased:
                if self.redacted.get(record_id) != redaction:
                    raise ImportRejectedError(
                        self.number,
                        f"redaction {redaction} names record {record_id}, which "
                        "the file does not hold in its redaction form",
                    )

    def finish(self) -> ImportSummary:
        if self.number == 0:
            raise ImportRejectedError(0, "the file is empty")
        if not self.seen_end:
            raise ImportRejectedError(
                self.number, "the file ends without its end line (truncated?)"
            )
        self._check_redactions()
        self._check_side_rows()
        for holder, digest in sorted(self.addresses.holders().items()):
            if self.imported_holders.get(holder) != digest:
                raise ImportRejectedError(
                    self.number, f"blob holder {holder!r} of {digest} has no blob line"
                )
        missing = sorted(self.addresses.live() - self.imported_blobs)
        if missing:
            raise ImportRejectedError(
                self.number, f"blob {missing[0]} named by the trace has no blob line"
            )
        ordinals = [
            {"trace_owner_id": k, "next_ordinal": v}
            for k, v in self.next_ordinal.items()
        ]
        if ordinals:
            self.conn.execute(insert(owner_ordinals), ordinals)
        self.conn.execute(
            update(meta)
            .where(meta.c.key == META_NEXT_COMMIT)
            .values(value=str(self.next_position))
        )
        c = self.counts
        return ImportSummary(
            c.intents,
            c.records,
            c.entries,
            c.checkpoints,
            c.materializations,
            len(self.imported_blobs),
        )


def _prove_blob(
    checkpoint_id: str,
    scope_id: str,
    seq: int,
    state: WorkspaceState,
    snapshot: bytes,
    created_ns: int,
    vouched: tuple[dict[str, Any], str],
) -> None:
    payload, committed_at = vouched
    problems = blob_problems(
        checkpoint_id, scope_id, seq, state.to_json(), snapshot, payload
    )
    if problems:
        raise ValueError(f"checkpoint {checkpoint_id!r}: {problems[0]}")
    committed = parse_timestamp(committed_at)
    if committed is not None:
        created = datetime.fromtimestamp(created_ns / 1e9, UTC)
        if abs(created - committed) > BLOB_CLOCK_SLACK:
            raise ValueError(
                f"checkpoint {checkpoint_id!r}: created_at_unixnano lies more than "
                "a day from its record's commit"
            )


def _decode(number: int, raw: str | bytes, limit: int) -> tuple[str, bytes]:
    if isinstance(raw, str):
        try:
            data = raw.encode("utf-8")
        except UnicodeEncodeError:
            raise ImportRejectedError(number, "the line is not valid UTF-8") from None
    else:
        data = raw
    if len(data) > limit:
        raise ImportRejectedError(number, _too_long(limit))
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ImportRejectedError(number, "the line is not valid UTF-8") from None
    return text, data if data.endswith(b"\n") else data + b"\n"


class _DuplicateKeyError(ValueError):
    pass


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _DuplicateKeyError(
                    f"duplicate key {key!r} (a reader keeping the first would see "
                    "other content than one keeping the last)"
                )
            seen.add(key)
    return obj


# The keys each kind of line (and each object inside an intent line) may
# carry: what export writes. A key outside these is refused, never dropped.
_CONTEXT_KEYS: Final = frozenset(
    {
        "context_id",
        "active_binding_refs",
        "capability_witness_refs",
        "semantic_environment_refs",
        "visibility_policy_refs",
        "substrate_ref",
        "containment",
    }
)
_LINE_KEYS: Final[dict[str, frozenset[str]]] = {
    "header": frozenset({"type", "format", "abi_version", "schema_version", "records"}),
    "end": frozenset({"type", "lines", "sha256", "head"}),
    "intent": frozenset(
        {
            "type",
            "append_intent_id",
            "batch_digest",
            "committed_at",
            "receipt",
            "contexts",
            "records",
            "entries",
            "frontiers",
        }
    ),
    "side": frozenset({"type", "table", "row_key", "row_digest"}),
    "materialization": frozenset(
        {"type", "materialize_intent_id", "request_digest", "receipt", "completed_at"}
    ),
    "checkpoint": frozenset(
        {
            "type",
            "checkpoint_id",
            "scope_id",
            "seq",
            "state",
            "snapshot_b64",
            "created_at_unixnano",
        }
    ),
    "blob": frozenset({"type", "digest", "data_b64", "holders"}),
}
_INTENT_PARTS: Final[dict[str, frozenset[str]]] = {
    "contexts": _CONTEXT_KEYS,
    "records": frozenset(
        {
            "record_id",
            "schema_ref",
            "mode",
            "witness_ref",
            "caused_by",
            "payload",
            "redacted_by",
        }
    ),
    "entries": frozenset(
        {
            "path_ref",
            "path_ordinal",
            "record_id",
            "retained_context_ref",
            "kind_label",
            "commit_receipt",
            "position",
        }
    ),
    "frontiers": frozenset(
        {
            "frontier_id",
            "target_trace_owner_id",
            "through_fact_id",
            "through_owner_ordinal",
            "publisher_trace_owner_id",
            "created_by_fact_id",
        }
    ),
}


def _refuse_unknown_keys(number: int, obj: dict[str, Any]) -> None:
    kind = obj.get("type")
    allowed = _LINE_KEYS.get(kind) if isinstance(kind, str) else None
    if allowed is None:
        return  # the line's own check names an unknown type
    _only(number, obj, allowed, f"a {kind} line")
    if kind != "intent":
        return
    for part, keys in _INTENT_PARTS.items():
        items = obj.get(part)
        if not isinstance(items, list):
            continue
        for index, item in enumerate(items):
            if isinstance(item, dict):
                _only(number, item, keys, f"{part}[{index}]")


def _only(number: int, obj: dict[str, Any], allowed: frozenset[str], what: str) -> None:
    unknown = sorted(set(obj) - allowed)
    if unknown:
        shown = ", ".join(repr(key[:64]) for key in unknown[:3])
        more = f" and {len(unknown) - 3} more" if len(unknown) > 3 else ""
        raise ImportRejectedError(
            number,
            f"{what} has unknown key(s) {shown}{more} (an export writes none: "
            "nothing is dropped silently)",
        )


def _parse(number: int, text: str) -> dict[str, Any]:
    try:
        obj = json.loads(text, object_pairs_hook=_unique_keys)
    except _DuplicateKeyError as exc:
        raise ImportRejectedError(number, str(exc)) from None
    except RecursionError:
        raise ImportRejectedError(
            number, "the line nests JSON deeper than the parser allows"
        ) from None
    except ValueError as exc:
        raise ImportRejectedError(number, f"not JSON: {exc}") from None
    if not isinstance(obj, dict):
        raise ImportRejectedError(number, "a line must be a JSON object")
    _refuse_unknown_keys(number, obj)
    return obj


def _prove_header(number: int, obj: dict[str, Any]) -> None:
    if obj.get("type") != "header" or obj.get("format") != EXPORT_FORMAT:
        raise ImportRejectedError(number, f"not a {EXPORT_FORMAT} export (bad header)")
    if obj.get("abi_version") != ABI_VERSION:
        raise ImportRejectedError(
            number, f"ABI {obj.get('abi_version')!r} is not {ABI_VERSION}"
        )


def _prove_end(
    number: int, obj: dict[str, Any], digest: Any, accept_headless: bool
) -> None:
    if obj.get("lines") != number - 1:
        raise ImportRejectedError(
            number, f"end line counts {obj.get('lines')} lines, found {number - 1}"
        )
    if obj.get("sha256") != digest.hexdigest():
        raise ImportRejectedError(
            number, "the lines do not match the end line's SHA-256"
        )
    head = obj.get("head")
    if head is None and accept_headless:
        return
    if not isinstance(head, str) or not head:
        # Without it the chain goes unchecked, and any field only the chain
        # covers could be edited with nothing but the file's SHA-256 redone.
        raise ImportRejectedError(
            number,
            "the end line names no head (every export writes one; for an export "
            "made before heads were written, --accept-headless imports it "
            "without the chain check)",
        )


def _once(seen: set[str], kind: str, identifier: str) -> None:
    if identifier in seen:
        raise ValueError(f"{kind} {identifier!r} appears twice")
    seen.add(identifier)


def import_trace_to(
    target: str,
    lines: Iterable[str | bytes],
    *,
    progress: Progress | None = None,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    accept_headless: bool = False,
) -> ImportSummary:
    """Import into a NEW database at ``target`` (a path or URL), all or nothing.

    A SQLite target is written to a temporary file beside it, which is linked
    into place only after the import committed (the link fails if the target
    appeared meanwhile); a refusal deletes the temporary file, so the target
    never exists half-written and the retry works. A PostgreSQL target is
    written in one transaction; if the import created the trace tables and is
    refused, it drops them again.

    Raises:
        ImportRejectedError: an unprovable line, or a target that exists.
    """
    options = _Options(progress, max_line_bytes, accept_headless)
    if "://" not in target:
        return _import_to_file(target, lines, options)
    url = make_url(target)
    if url.get_backend_name() == "sqlite":
        return _import_to_file(url.database or ":memory:", lines, options)
    return _import_to_server(target, lines, options)


@dataclass(frozen=True, slots=True)
class _Options:
    progress: Progress | None
    max_line_bytes: int
    accept_headless: bool

    def run(
        self, lines: Iterable[str | bytes], store: SqlAlchemyTraceStore
    ) -> ImportSummary:
        return import_trace(
            lines,
            store,
            progress=self.progress,
            max_line_bytes=self.max_line_bytes,
            accept_headless=self.accept_headless,
        )


def _has_trace_tables(url: str) -> bool:
    engine = postgres_engine(url)
    try:
        with outages, engine.connect() as conn:
            return bool(inspect(conn).has_table(meta.name))
    finally:
        engine.dispose()


def _import_to_file(
    location: str, lines: Iterable[str | bytes], options: _Options
) -> ImportSummary:
    if location == ":memory:":
        raise ImportRejectedError(0, "import needs a database file, not :memory:")
    path = Path(location)
    if path.exists():
        raise ImportRejectedError(
            0, f"{location} already exists: import into a new database"
        )
    handle, name = tempfile.mkstemp(
        prefix=f".{path.name}.", suffix=".importing", dir=path.parent or "."
    )
    os.close(handle)
    temporary = Path(name)
    try:
        with open_trace_store(temporary) as store:
            summary = options.run(lines, store)
        try:
            os.link(temporary, path)
        except FileExistsError:
            raise ImportRejectedError(
                0, f"{location} appeared during the import: import into a new database"
            ) from None
        return summary
    finally:
        for leftover in (temporary, *_side_files(temporary)):
            leftover.unlink(missing_ok=True)


def _side_files(path: Path) -> tuple[Path, ...]:
    return tuple(path.with_name(path.name + s) for s in ("-wal", "-shm", "-journal"))


def _import_to_server(
    url: str, lines: Iterable[str | bytes], options: _Options
) -> ImportSummary:
    fresh = not _has_trace_tables(url)
    with open_trace_store(url) as store:
        try:
            return options.run(lines, store)
        except ImportRejectedError:
            if fresh:
                with store.transaction() as conn:
                    for table in blob_tables():
                        table.drop(conn, checkfirst=True)
                    METADATA.drop_all(conn)
            raise
