"""The checks of the side tables: materializations, side writes, blobs, the blob store.

:class:`SideChecks` checks the materialization ledger's receipts, each side
row against the side step that last wrote its key (ADR 0064), each
checkpoint blob against the ``checkpoint.created`` record that vouches for
it, and the blob store's bytes, holders and addresses. It imports the
domain, the store's side, chain and schema modules (digests and table
names, no write path), the audit rules and :mod:`.indexed_rows`.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta
from typing import Final

from goatherd.domain.events.checkpoint import CheckpointCreated
from goatherd.infrastructure.audit.indexed_rows import IndexedRows, parse_timestamp
from goatherd.infrastructure.audit.rows import BlobRow, ContentRow, RecordRow, SideRow
from goatherd.infrastructure.audit.rules import (
    BlobAddresses,
    LedgerRefs,
    blob_problems,
    is_hex_digest,
    ledger_refs,
)
from goatherd.infrastructure.store.chain import HOLE_TABLE
from goatherd.infrastructure.store.schema import SIDE_TABLES
from goatherd.infrastructure.store.side import (
    BLOBS,
    LEDGER,
    blob_row_digest,
    ledger_row_digest,
)

__all__ = ["BLOB_CLOCK_SLACK", "SideChecks"]

BLOB_CLOCK_SLACK: Final = timedelta(days=1)
"""How far a blob's creation time may lie from its record's commit time."""


class SideChecks(IndexedRows):
    """The ``materializations``, ``side writes``, ``blobs``, ``blob store`` checks."""

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
