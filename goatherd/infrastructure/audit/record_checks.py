"""The checks of each record's content: identity, witnesses, schemas, causality.

:class:`RecordChecks` recomputes every record id and witness reference from
the stored content, checks redacted bodies against the redaction records
that name them, decodes every record of a known schema, and checks each
record's parents against its edge rows and the log order. It imports the
domain, the projections' schema library, the audit rows and
:mod:`.indexed_rows`.
"""

from __future__ import annotations

from goatherd.domain.errors import DomainError
from goatherd.domain.events import RecordDecodeError, decode_payload, event_class_for
from goatherd.domain.identity import (
    ROOT_WITNESS_REF,
    ROOT_WITNESS_SCHEMA_REF,
    WITNESS_SCHEMA_REF,
    record_digest,
    root_witness_record_id,
    validate_witness_body,
)
from goatherd.domain.records import FRONTIER_SCHEMA_REF, REDACTION_SCHEMA_REF
from goatherd.infrastructure.audit.indexed_rows import _WITNESS_SCHEMAS, IndexedRows
from goatherd.infrastructure.audit.rows import RecordRow
from goatherd.projections.schema_library import known_schema_refs

__all__ = ["RecordChecks"]


class RecordChecks(IndexedRows):
    """The ``records``, ``schemas`` and ``causality`` checks."""

    # ---------------------------------------------------------- records

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


def _erased(redaction: RecordRow) -> list[str]:
    erased = redaction.payload.get("erased")
    if not isinstance(erased, list) or not all(isinstance(e, str) for e in erased):
        return []
    return erased
