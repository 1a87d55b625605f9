"""Prove one ``intent`` line of an export against the rows written before it.

An intent line carries what one commit retained: its new contexts, new
records, path entries, frontier index rows and its receipt.
:class:`IntentProver` checks it with the rules ``verify`` uses and returns
the rows to insert; :class:`Lookup` answers questions about earlier lines
from the rows already written in the import's transaction, so nothing but
this line is held in memory.

:class:`Lookup` lives in :mod:`.import_lookup`; the prover's base (the line,
its counters and :func:`text_field`) in :mod:`.intent_line`, the proof of
the line's records in :mod:`.intent_records`. This module proves the rest:
the intent row, contexts, path entries, placement and order, the receipt and
the frontier rows.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Final

from sqlalchemy import Table

from goatherd.domain.events.checkpoint import CheckpointCreated, CheckpointPruned
from goatherd.domain.events.output import OutputSealed
from goatherd.domain.identity import root_witness_record_id
from goatherd.domain.records import FRONTIER_SCHEMA_REF, WITNESS_OWNER
from goatherd.infrastructure.audit.checks import parse_timestamp
from goatherd.infrastructure.audit.rows import CONTEXT_REF_NAMES
from goatherd.infrastructure.audit.rules import (
    LoggedEntry,
    context_problems,
    is_hex_digest,
    receipt_problems,
    witness_context_mismatch,
    witness_kind_label,
)
from goatherd.infrastructure.portability.import_lookup import (
    _WITNESS_SCHEMAS,
    Lookup,
    _Known,
)
from goatherd.infrastructure.portability.intent_line import text_field
from goatherd.infrastructure.portability.intent_records import RecordProofs
from goatherd.infrastructure.store.codec import storage_json
from goatherd.infrastructure.store.schema import (
    append_intents,
    contexts,
    frontiers,
    path_entries,
    record_edges,
    records,
)

__all__ = ["IntentProver", "IntentRows", "Lookup", "text_field"]

_BLOB_SCHEMAS: Final = (
    CheckpointCreated.SCHEMA,
    CheckpointPruned.SCHEMA,
    OutputSealed.SCHEMA,
)


@dataclass
class IntentRows:
    """The rows one proven intent line writes, in insertion order."""

    tables: list[tuple[Table, list[dict[str, Any]]]]
    committed_at: str
    runtime: list[tuple[str, dict[str, Any]]]
    record_count: int
    entry_count: int
    redacted: dict[str, str] = field(default_factory=dict)
    """Records exported in redaction form: record id -> the redaction it names."""
    redactions: dict[str, list[str]] = field(default_factory=dict)
    """Redaction records of the line: record id -> the ids it erased."""


class IntentProver(RecordProofs):
    """Prove one intent line; raise ``ValueError``/``TypeError`` naming the fault."""

    def prove(self) -> IntentRows:
        """Run every check; return the rows to insert."""
        self._prefetch()
        intent_row = self._intent_row()
        for context in _list(self.obj, "contexts"):
            self._context(_object(context, "a context"))
        for record in _list(self.obj, "records"):
            self._record(_object(record, "a record"))
        for entry in _list(self.obj, "entries"):
            self._entry(_object(entry, "an entry"))
        self._check_placement()
        self._check_receipt()
        self._check_contexts()
        for row in _list(self.obj, "frontiers"):
            self._frontier(_object(row, "a frontier row"))
        self._check_frontier_records()
        line = self.line
        return IntentRows(
            tables=[
                (append_intents, [intent_row]),
                (contexts, line.context_rows),
                (records, line.record_rows),
                (record_edges, line.edges),
                (path_entries, line.entries),
                (frontiers, line.frontier_rows),
            ],
            committed_at=intent_row["committed_at"],
            runtime=[
                (r["schema_ref"], json.loads(r["body_json"])["payload"])
                for r in line.record_rows
                if r["schema_ref"] in _BLOB_SCHEMAS
            ],
            record_count=len(line.record_rows),
            entry_count=len(line.entries),
            redacted=line.redacted,
            redactions=line.redactions,
        )

    def _prefetch(self) -> None:
        named: set[str] = set()
        contexts_named: set[str] = set()
        for record in _dicts(self.obj.get("records")):
            named.update(_strings(record.get("record_id"), record.get("witness_ref")))
            named.update(_texts(record.get("caused_by")))
        for entry in _dicts(self.obj.get("entries")):
            named.update(_strings(entry.get("record_id")))
            contexts_named.update(_strings(entry.get("retained_context_ref")))
        for context in _dicts(self.obj.get("contexts")):
            contexts_named.update(_strings(context.get("context_id")))
        self.lookup.prefetch(named, contexts_named)

    # ----------------------------------------------------------- intent

    def _intent_row(self) -> dict[str, Any]:
        if self.lookup.exists(append_intents, "append_intent_id", self.intent_id):
            raise ValueError(f"intent {self.intent_id!r} appears twice")
        receipt = self.obj["receipt"]
        if not isinstance(receipt, dict) or receipt.get("append_intent_id") != (
            self.intent_id
        ):
            raise ValueError("the receipt does not belong to this intent")
        digest = text_field(self.obj, "batch_digest")
        if not is_hex_digest(digest):
            raise ValueError(f"batch_digest {digest!r} is not a SHA-256 hex digest")
        committed_at = text_field(self.obj, "committed_at")
        if parse_timestamp(committed_at) is None:
            raise ValueError(f"committed_at {committed_at!r} is not a timestamp")
        return {
            "append_intent_id": self.intent_id,
            "batch_digest": digest,
            "receipt_json": storage_json(receipt, root="receipt"),
            "committed_at": committed_at,
        }

    # --------------------------------------------------------- contexts

    def _context(self, context: dict[str, Any]) -> None:
        context_id = text_field(context, "context_id", empty=False)
        if context_id in self.line.contexts or self.lookup.context(context_id):
            raise ValueError(f"context {context_id} appears twice")
        content: dict[str, Any] = {}
        row: dict[str, Any] = {
            "context_id": context_id,
            "append_intent_id": self.intent_id,
        }
        for name in CONTEXT_REF_NAMES:
            refs = context[name]
            if not isinstance(refs, list) or not all(isinstance(r, str) for r in refs):
                raise TypeError(f"context {name} must be a list of strings")
            content[name] = refs
            row[f"{name}_json"] = storage_json(refs, root=name)
        for name in ("substrate_ref", "containment"):
            content[name] = row[name] = text_field(context, name)
        self.line.contexts[context_id] = content
        self.line.context_rows.append(row)

    def _check_contexts(self) -> None:
        receipts = self.obj["receipt"].get("context_receipts")
        listed = receipts if isinstance(receipts, list) else []
        for context_id, content in self.line.contexts.items():
            slots = [i for i, c in enumerate(listed) if c == context_id]
            problems = context_problems(context_id, self.intent_id, content, slots)
            if problems:
                raise ValueError(problems[0])
        for entry in self.line.entries:
            if entry["position"] is not None:
                self._check_entry_context(entry)

    def _check_entry_context(self, entry: dict[str, Any]) -> None:
        content = self._context_content(entry["retained_context_ref"])
        record = self._known(entry["record_id"])
        witness = None if record is None else self._known(record.witness_ref)
        if content is None or witness is None or witness.payload is None:
            return
        mismatch = witness_context_mismatch(witness.payload, content)
        if mismatch is not None:
            raise ValueError(
                f"context {entry['retained_context_ref']!r} {mismatch} disagrees "
                f"with the witness of record {entry['record_id']}"
            )

    # ---------------------------------------------------------- entries

    def _entry(self, entry: dict[str, Any]) -> None:
        path = text_field(entry, "path_ref", empty=False)
        record_id = text_field(entry, "record_id")
        ordinal, position = entry["path_ordinal"], entry["position"]
        receipt = text_field(entry, "commit_receipt")
        context_ref = text_field(entry, "retained_context_ref")
        kind = text_field(entry, "kind_label")
        record = self._known(record_id)
        if record is None:
            raise ValueError(f"path entry cites unknown record {record_id}")
        expected = self.next_ordinal.get(path, 0)
        if type(ordinal) is not int or ordinal != expected:
            raise ValueError(
                f"path {path!r}: ordinal {ordinal!r} where {expected} is due"
            )
        if position is None:
            self._witness_entry(path, record_id, record, receipt, context_ref, kind)
        else:
            self._logged_entry(path, record_id, record, position, receipt, context_ref)
            if not kind:
                raise ValueError(f"{path}#{ordinal} has no kind label")
            self.line.first_position.setdefault(record_id, position)
        self.next_ordinal[path] = expected + 1
        self.line.entries.append(
            {
                "path_ref": path,
                "path_ordinal": ordinal,
                "record_id": record_id,
                "retained_context_ref": context_ref,
                "kind_label": kind,
                "append_intent_id": self.intent_id,
                "commit_receipt": receipt,
                "position": position,
            }
        )

    def _witness_entry(
        self,
        path: str,
        record_id: str,
        record: _Known,
        receipt: str,
        context_ref: str,
        kind: str,
    ) -> None:
        if path != WITNESS_OWNER or receipt != f"witness:{record_id}":
            raise ValueError(f"entry on {path!r} has no log position")
        if record.schema_ref not in _WITNESS_SCHEMAS:
            raise ValueError(f"record {record_id} on the witness path is no witness")
        if record_id not in self.line.records:
            raise ValueError(f"witness {record_id} is placed twice")
        if context_ref:
            raise ValueError(f"witness entry cites a context {context_ref!r}")
        label = witness_kind_label(record.schema_ref)
        if kind != label:
            raise ValueError(f"witness entry labelled {kind!r}, not {label!r}")

    def _logged_entry(
        self,
        path: str,
        record_id: str,
        record: _Known,
        position: Any,
        receipt: str,
        context_ref: str,
    ) -> None:
        if position != self.next_position or receipt != f"commit:{position}":
            raise ValueError(
                f"log position {position!r} / {receipt} where {self.next_position} "
                "is due"
            )
        self.next_position += 1
        if path == WITNESS_OWNER or record.schema_ref in _WITNESS_SCHEMAS:
            raise ValueError(f"a logged entry of a witness or on {WITNESS_OWNER!r}")
        if self._context_content(context_ref) is None:
            raise ValueError(f"path entry cites unknown context {context_ref!r}")

    # --------------------------------------------------- placement, order

    def _check_placement(self) -> None:
        placed = {e["record_id"] for e in self.line.entries}
        cited = {
            known.witness_ref
            for rid in self.line.first_position
            if (known := self._known(rid)) is not None
        }
        if self.line.first_position and self.first_logged:
            cited.add(root_witness_record_id())
        for record_id, known in self.line.records.items():
            if record_id not in placed:
                raise ValueError(f"record {record_id} is retained but on no path")
            if known.schema_ref in _WITNESS_SCHEMAS and record_id not in cited:
                raise ValueError(
                    f"witness {record_id} is cited by no entry of its intent"
                )
            mine = self.line.first_position.get(record_id)
            for parent in known.caused_by:
                theirs = self.line.first_position.get(parent)
                if mine is not None and theirs is not None and theirs >= mine:
                    raise ValueError(
                        f"record {record_id} is placed before its parent {parent}"
                    )

    def _check_receipt(self) -> None:
        logged = [
            LoggedEntry(
                position=e["position"],
                path=e["path_ref"],
                ordinal=e["path_ordinal"],
                record_id=e["record_id"],
                context=e["retained_context_ref"],
                parents=known.caused_by
                if (known := self._known(e["record_id"]))
                else (),
            )
            for e in self.line.entries
            if e["position"] is not None
        ]
        problems = receipt_problems(
            self.intent_id, self.obj["receipt"], logged, self.line.contexts
        )
        if problems:
            raise ValueError(problems[0])

    # -------------------------------------------------------- frontiers

    def _frontier(self, row: dict[str, Any]) -> None:
        frontier_id = text_field(row, "frontier_id", empty=False)
        created_by = text_field(row, "created_by_fact_id")
        record = self.line.records.get(created_by)
        if record is None or record.schema_ref != FRONTIER_SCHEMA_REF:
            raise ValueError(
                f"frontier {frontier_id!r}: {created_by} is not a frontier record "
                "of this intent"
            )
        index = {
            key: row[key]
            for key in (
                "frontier_id",
                "target_trace_owner_id",
                "through_fact_id",
                "through_owner_ordinal",
                "publisher_trace_owner_id",
            )
        }
        payload = record.payload or {}
        for key, value in index.items():
            if payload.get(key) != value or type(payload.get(key)) is not type(value):
                raise ValueError(
                    f"frontier {frontier_id!r}: {key} disagrees with its record"
                )
        if self.lookup.exists(frontiers, "frontier_id", frontier_id) or any(
            r["frontier_id"] == frontier_id for r in self.line.frontier_rows
        ):
            raise ValueError(f"frontier {frontier_id!r} appears twice")
        self._check_through(frontier_id, index)
        self.line.frontier_rows.append(
            {
                **index,
                "created_by_fact_id": created_by,
                "append_intent_id": self.intent_id,
            }
        )

    def _check_through(self, frontier_id: str, index: dict[str, Any]) -> None:
        target, ordinal = index["target_trace_owner_id"], index["through_owner_ordinal"]
        if not isinstance(target, str) or type(ordinal) is not int:
            raise TypeError(f"frontier {frontier_id!r}: malformed target or ordinal")
        here = [
            e["record_id"]
            for e in self.line.entries
            if e["path_ref"] == target and e["path_ordinal"] == ordinal
        ]
        at = here[0] if here else self.lookup.entry_at(target, ordinal)
        if at != index["through_fact_id"]:
            raise ValueError(
                f"frontier {frontier_id!r}: its through record is not at "
                f"{target}#{ordinal}"
            )

    def _check_frontier_records(self) -> None:
        indexed = {r["created_by_fact_id"] for r in self.line.frontier_rows}
        for record_id, known in self.line.records.items():
            if known.schema_ref == FRONTIER_SCHEMA_REF and record_id not in indexed:
                raise ValueError(f"frontier record {record_id} has no index row")


def _dicts(value: Any) -> list[dict[str, Any]]:
    return [i for i in value if isinstance(i, dict)] if isinstance(value, list) else []


def _texts(value: Any) -> list[str]:
    return [i for i in value if isinstance(i, str)] if isinstance(value, list) else []


def _strings(*values: Any) -> set[str]:
    return {value for value in values if isinstance(value, str)}


def _list(obj: dict[str, Any], key: str) -> list[Any]:
    value = obj[key]
    if not isinstance(value, list):
        raise TypeError(f"{key} must be a list")
    return value


def _object(value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise TypeError(f"{what} must be an object")
    return value
