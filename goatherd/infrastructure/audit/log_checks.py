"""The checks of where records sit: per-path ordinals, the commit log, placement.

:class:`LogChecks` checks each path's gap-free ordinals and the owner ordinal
table, the global log positions with their commit receipts and the hole
steps that account for a gap (ADR 0076), the next commit sequence, and that
every record is on a path credited to the intent that first placed it. It
imports the domain, the store's chain and schema constants, the audit rules
and :mod:`.indexed_rows`.
"""

from __future__ import annotations

import bisect
from typing import Final

from goatherd.domain.identity import root_witness_record_id
from goatherd.domain.records import WITNESS_OWNER
from goatherd.infrastructure.audit.indexed_rows import _WITNESS_SCHEMAS, IndexedRows
from goatherd.infrastructure.audit.rows import EntryRow, RecordRow
from goatherd.infrastructure.audit.rules import witness_kind_label
from goatherd.infrastructure.store.chain import HOLE_TABLE, parse_hole_key
from goatherd.infrastructure.store.schema import META_NEXT_COMMIT

__all__ = ["LogChecks"]


class LogChecks(IndexedRows):
    """The ``ordinals``, ``log`` and ``placement`` checks."""

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


_UNRECORDED: Final = (
    " (no hole step records the positions between: a PostgreSQL writer that "
    "died before its COMMIT leaves such a gap until a writer seals)"
)
