"""The checks of ``verify`` over rows already read and type-checked.

:class:`Verifier` indexes the well-formed rows once and runs each check in a
fixed order, reporting through ``report(check, detail, record_id)``. The
module docstring of :mod:`goatherd.infrastructure.audit.verify` lists the checks.

The checks themselves live by family, each a base class of :class:`Verifier`
over the shared indexes of :mod:`.indexed_rows`: :mod:`.record_checks`
(identity, witnesses, schemas, causality), :mod:`.log_checks` (ordinals, the
log, placement), :mod:`.commit_checks` (intents, contexts, frontiers) and
:mod:`.side_checks` (materializations, side writes, blobs, the blob store).
This module keeps the ``meta`` check and the order :meth:`Verifier.run`
runs them in; it imports those modules and the store's schema constants.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from goatherd.infrastructure.audit.commit_checks import CommitChecks
from goatherd.infrastructure.audit.indexed_rows import parse_timestamp
from goatherd.infrastructure.audit.log_checks import LogChecks
from goatherd.infrastructure.audit.record_checks import RecordChecks
from goatherd.infrastructure.audit.side_checks import BLOB_CLOCK_SLACK, SideChecks
from goatherd.infrastructure.store import schema
from goatherd.infrastructure.store.schema import (
    META_SCHEMA,
    SCHEMA_V1,
    SCHEMA_V2,
    SCHEMA_VERSION,
)

__all__ = ["BLOB_CLOCK_SLACK", "KNOWN_META_KEYS", "Verifier", "parse_timestamp"]


KNOWN_META_KEYS: Final = frozenset(
    value
    for name, value in vars(schema).items()
    if name.startswith("META_") and isinstance(value, str)
)
"""Every ``meta`` key the store's schema module names (``META_*`` constants)."""


class Verifier(RecordChecks, LogChecks, CommitChecks, SideChecks):
    """Run every cross-check over one trace's rows."""

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
