"""The proof of an intent line's records: identity, redaction form, witnesses.

:class:`RecordProofs` proves each record of an intent line: its id
recomputed from its content, a redacted record's form and the redaction it
names (ADR 0062), a redaction's erased list, its witness and the causal
parents retained before it; it collects the record and edge rows to insert.
It imports the domain's identity and event modules, the store's codec and
:mod:`.intent_line`.
"""

from __future__ import annotations

from typing import Any, Final

from goatherd.domain.events.base import is_runtime_schema
from goatherd.domain.identity import (
    ROOT_WITNESS_REF,
    ROOT_WITNESS_SCHEMA_REF,
    WITNESS_SCHEMA_REF,
    record_digest,
    root_witness_record_id,
    validate_witness_body,
)
from goatherd.domain.records import FRONTIER_SCHEMA_REF, REDACTION_SCHEMA_REF
from goatherd.infrastructure.portability.import_lookup import _WITNESS_SCHEMAS, _Known
from goatherd.infrastructure.portability.intent_line import IntentLine, text_field
from goatherd.infrastructure.store.codec import (
    redacted_body_json,
    redacted_by,
    storage_json,
)

__all__ = ["RecordProofs"]


_UNERASABLE: Final = frozenset(
    {
        ROOT_WITNESS_SCHEMA_REF,
        WITNESS_SCHEMA_REF,
        REDACTION_SCHEMA_REF,
        FRONTIER_SCHEMA_REF,
    }
)


class RecordProofs(IntentLine):
    """The ``records`` of an intent line, proven one by one."""

    # ---------------------------------------------------------- records

    def _record(self, record: dict[str, Any]) -> None:
        record_id = text_field(record, "record_id", empty=False)
        schema_ref = text_field(record, "schema_ref")
        mode = text_field(record, "mode")
        witness_ref = text_field(record, "witness_ref")
        erased_by = self._redacted_by(record, record_id, schema_ref)
        caused_by = record["caused_by"]
        payload = {} if erased_by is not None else record["payload"]
        if not isinstance(caused_by, list) or not isinstance(payload, dict):
            raise TypeError(
                f"record {record_id}: caused_by must be a list, payload an object"
            )
        if record_id in self.line.records or self.lookup.record(record_id):
            raise ValueError(f"record {record_id} is retained twice")
        self._check_witness(record_id, schema_ref, witness_ref, payload)
        if erased_by is None:
            recomputed = record_digest(
                schema_ref, mode, payload, caused_by, witness_ref
            )
            if recomputed != record_id:
                raise ValueError(
                    f"record {record_id}: its content digests to {recomputed} "
                    "(forged id or edited content)"
                )
        if schema_ref == REDACTION_SCHEMA_REF:
            erased = payload.get("erased")
            if not isinstance(erased, list) or erased != caused_by:
                raise ValueError(
                    f"redaction {record_id}: its erased list is not its parents"
                )
            self.line.redactions[record_id] = erased
        for index, parent in enumerate(caused_by):
            if self._known(parent) is None:
                raise ValueError(
                    f"record {record_id}: causal parent {parent} is not retained "
                    "before it"
                )
            self.line.edges.append(
                {
                    "child_record_id": record_id,
                    "parent_position": index,
                    "parent_record_id": parent,
                }
            )
        self.line.records[record_id] = _Known(
            schema_ref, witness_ref, tuple(caused_by), payload
        )
        self.line.record_rows.append(
            {
                "record_id": record_id,
                "digest": record_id,
                "schema_ref": schema_ref,
                "mode": mode,
                "witness_ref": witness_ref,
                "caused_by_json": storage_json(caused_by, root="caused_by"),
                "body_json": storage_json({"payload": payload}, root="payload")
                if erased_by is None
                else redacted_body_json(erased_by),
                "append_intent_id": self.intent_id,
            }
        )

    def _redacted_by(
        self, record: dict[str, Any], record_id: str, schema_ref: str
    ) -> str | None:
        """The redaction a record exported in redaction form names (checked later)."""
        if "redacted_by" not in record:
            return None
        erased_by = text_field(record, "redacted_by", empty=False)
        if "payload" in record or redacted_by(redacted_body_json(erased_by)) is None:
            raise ValueError(
                f"record {record_id}: a redacted record has a redaction record id "
                "and no payload"
            )
        if schema_ref in _UNERASABLE or is_runtime_schema(schema_ref):
            raise ValueError(
                f"record {record_id}: a {schema_ref} record cannot be redacted"
            )
        self.line.redacted[record_id] = erased_by
        return erased_by

    def _check_witness(
        self, record_id: str, schema_ref: str, witness_ref: str, payload: Any
    ) -> None:
        if schema_ref == ROOT_WITNESS_SCHEMA_REF:
            validate_witness_body(schema_ref, payload)
            if record_id != root_witness_record_id() or witness_ref != ROOT_WITNESS_REF:
                raise ValueError(
                    f"record {record_id} is a root witness but not the root"
                )
            return
        cited = self._known(witness_ref)
        if schema_ref == WITNESS_SCHEMA_REF:
            validate_witness_body(schema_ref, payload)
            if cited is None or cited.schema_ref != ROOT_WITNESS_SCHEMA_REF:
                raise ValueError(f"witness {record_id} does not cite the root witness")
        elif cited is None or cited.schema_ref not in _WITNESS_SCHEMAS:
            raise ValueError(
                f"record {record_id}: witness {witness_ref} is not a known witness"
            )
