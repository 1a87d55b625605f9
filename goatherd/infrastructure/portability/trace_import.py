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

This module opens the target and its transaction, chains and seals what was
imported, and keeps the public names; the line framing lives in
:mod:`.export_lines`, the proving and writing of each line in
:mod:`.line_importer`.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path

from sqlalchemy import Connection, func, inspect, select
from sqlalchemy.engine import make_url

from goatherd.infrastructure.blobs.store import blob_tables
from goatherd.infrastructure.portability.export_lines import (
    DEFAULT_MAX_LINE_BYTES,
    EXPORT_FORMAT,
    ImportRejectedError,
    read_export_lines,
)
from goatherd.infrastructure.portability.line_importer import ImportSummary, _Importer
from goatherd.infrastructure.store import postgres as pg
from goatherd.infrastructure.store.driver import Driver
from goatherd.infrastructure.store.engine import postgres_engine
from goatherd.infrastructure.store.opening import open_trace_store
from goatherd.infrastructure.store.outages import outages
from goatherd.infrastructure.store.schema import (
    METADATA,
    append_intents,
    checkpoint_snapshots,
    materialization_intents,
    meta,
    records,
    side_writes,
)
from goatherd.infrastructure.store.sealing import chain_unchained_side_rows, seal
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

Progress = Callable[[str, int, int], None]


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
