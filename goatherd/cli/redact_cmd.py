"""``redact``: erase payloads by a recorded redaction and say what remains.

The store's ``redact`` is the API this command calls (ADR 0062). On SQLite it
checkpoints and truncates the WAL and reads the file and its ``-wal`` back;
on PostgreSQL the command also asks for ``compact`` (ADR 0077): ``VACUUM
(FULL)`` of the payload tables, ``CHECKPOINT`` and ``pg_switch_wal()`` where
the role may, then the table files and ``pg_wal`` read back. Each step and
each place that may still hold erased bytes is one line; the exit code says
whether the erasure is complete (0) or something remains (4).
"""

from __future__ import annotations

import argparse
import hashlib

from goatherd.cli.common import open_writable
from goatherd.cli.exits import EXIT_INCOMPLETE, EXIT_OK
from goatherd.cli.ids import resolve_record
from goatherd.cli.output import emit_json
from goatherd.cli.text import clean
from goatherd.domain import TRUSTED_APPEND_CONTEXT
from goatherd.infrastructure.store import Redaction

__all__ = ["cmd_redact", "default_redaction_id"]

_BACKUPS_NOTE = (
    "note: backups and copies of the trace taken before the erasure are not "
    "reached by this command"
)


def default_redaction_id(record_ids: list[str], reason: str) -> str:
    """The redaction's intent id when none is given: the same for the same request.

    A rerun of the same command is then a replay of the committed redaction,
    never a second one.
    """
    digest = hashlib.sha256()
    for part in (*sorted(set(record_ids)), reason):
        digest.update(part.encode("utf-8") + b"\x00")
    return f"cli:redact:{digest.hexdigest()[:32]}"


def cmd_redact(args: argparse.Namespace) -> int:
    """Erase the payloads of RECORD_ID... under REASON; exit 4 if bytes may remain."""
    with open_writable(args.db) as store:
        ids = [resolve_record(store, text) for text in args.record_ids]
        intent = args.redaction_id or default_redaction_id(ids, args.reason)
        redaction = store.redact(
            TRUSTED_APPEND_CONTEXT,
            intent,
            ids,
            args.reason,
            compact=not args.no_compact,
            wait_seconds=args.wait,
        )
    if args.json:
        emit_json(_data(redaction, intent))
    else:
        for line in _lines(redaction, intent):
            print(clean(line))
    return EXIT_OK if redaction.complete else EXIT_INCOMPLETE


def _data(redaction: Redaction, intent: str) -> dict[str, object]:
    return {
        "redaction_record_id": redaction.redaction_record_id,
        "redaction_id": intent,
        "erased": list(redaction.erased),
        "complete": redaction.complete,
        "wal_truncated": redaction.wal_truncated,
        "bytes_left": list(redaction.bytes_left),
        "steps": list(redaction.steps),
        "remains": list(redaction.remains),
    }


def _lines(redaction: Redaction, intent: str) -> list[str]:
    count = len(redaction.erased)
    lines = [
        f"erased {count} record{'s' if count != 1 else ''} by redaction "
        f"{redaction.redaction_record_id} ({intent})"
    ]
    lines.extend(f"done: {step}" for step in redaction.steps)
    if not redaction.wal_truncated:
        lines.append(
            "remains: -wal: not truncated (a reader or the checkpointer held it "
            "past the busy timeout); run redact again once it is free"
        )
    lines.extend(f"remains: {item}" for item in redaction.remains)
    lines.extend(
        f"remains: record {record_id}: pieces of its old body can still be read"
        for record_id in redaction.bytes_left
    )
    if redaction.complete:
        lines.append("erasure complete: no erased byte found where it was checked")
    else:
        lines.append("erasure incomplete: erased bytes may remain where listed")
    lines.append(_BACKUPS_NOTE)
    return lines
