"""The checks of the rows beside each commit's records: intents, contexts, frontiers.

:class:`CommitChecks` recomputes each intent's receipt from its entries and
checks its batch digest, commit time and transaction ids, recomputes each
context id from its content and intent and checks each placement against its
record's witness, and checks the frontier index rows against their records.
It imports the domain, the audit rules and :mod:`.indexed_rows`.
"""

from __future__ import annotations

from typing import Any

from goatherd.domain.records import FRONTIER_SCHEMA_REF, WITNESS_OWNER
from goatherd.infrastructure.audit.indexed_rows import IndexedRows, parse_timestamp
from goatherd.infrastructure.audit.rows import ContextRow, EntryRow, RecordRow
from goatherd.infrastructure.audit.rules import (
    context_problems,
    is_hex_digest,
    receipt_problems,
    witness_context_mismatch,
)

__all__ = ["CommitChecks"]


class CommitChecks(IndexedRows):
    """The ``intents``, ``contexts`` and ``frontiers`` checks."""

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


def _content(context: ContextRow) -> dict[str, Any]:
    content: dict[str, Any] = {name: list(refs) for name, refs in context.refs.items()}
    content["substrate_ref"] = context.substrate_ref
    content["containment"] = context.containment
    return content
