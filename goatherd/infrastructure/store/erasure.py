"""Erasure on SQLite that is checked, not hoped for (ADR 0062).

A redaction overwrites each erased body in its transaction with
``secure_delete`` on, so the old cell bytes are zeroed in the page. The page
itself first lands in the ``-wal`` file, and an earlier version of it (with
the body) may still be there: the bytes leave the disk only once the WAL is
checkpointed into the file and truncated. A reader holding an old snapshot,
or the background checkpointer holding the checkpoint lock, makes a
``wal_checkpoint(TRUNCATE)`` answer busy at once on a connection that does
not wait, and the old bytes stay until the last connection closes.

:func:`truncate_wal` therefore waits for them (up to a deadline), retrying
the checkpoint until it completes and the ``-wal`` file is empty;
:func:`bytes_left` then reads the database file and its ``-wal`` back and
looks for pieces of each erased body, so the caller is told which erased
records, if any, can still be read from the disk.
"""

from __future__ import annotations

import mmap
import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

__all__ = [
    "WINDOW_CHARS",
    "bytes_left",
    "live_pieces",
    "sample_windows",
    "truncate_wal",
]

WINDOW_CHARS: Final = 32
"""Length of each piece of an erased body looked for on disk."""
_WINDOWS: Final = 8
_PAYLOAD_PREFIX: Final = '{"payload":'
_RETRY_SECONDS: Final = 0.02


def truncate_wal(raw: Any, timeout_seconds: float) -> bool:
    """Checkpoint the WAL into the file and truncate it, waiting up to the deadline.

    Runs on the store's writer connection after the redaction committed. The
    connection's busy timeout is raised for the checkpoint (so it waits for
    the checkpointer and for readers to move to the new snapshot) and set
    back to 0, which is what the writer uses between appends. Returns whether
    the checkpoint completed with an empty ``-wal`` file.
    """
    deadline = time.monotonic() + max(timeout_seconds, 0.0)
    wal = _wal_path(raw)
    try:
        while True:
            remaining_ms = max(int((deadline - time.monotonic()) * 1000), 0)
            raw.execute(f"PRAGMA busy_timeout={max(remaining_ms, 1)}")
            busy, _, _ = raw.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            if not busy and (wal is None or _size(wal) == 0):
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(_RETRY_SECONDS)
    finally:
        raw.execute("PRAGMA busy_timeout=0")


def sample_windows(body: str) -> tuple[str, ...]:
    """Return pieces of a stored body to look for (none if it is too short).

    The ``{"payload":`` prefix every body shares is left out; a payload
    shorter than :data:`WINDOW_CHARS` is not looked for, since its bytes
    cannot be told from the same bytes elsewhere. Up to eight pieces spread
    over the payload: a large body spans overflow pages, so no single piece
    need be contiguous on disk, but every piece that lies within a page is.
    """
    text = body.removeprefix(_PAYLOAD_PREFIX)
    if len(text) < WINDOW_CHARS:
        return ()
    last = len(text) - WINDOW_CHARS
    count = min(_WINDOWS, last // WINDOW_CHARS + 1)
    starts = sorted({last * n // max(count - 1, 1) for n in range(count)})
    return tuple(text[s : s + WINDOW_CHARS] for s in starts)


def bytes_left(
    raw: Any,
    bodies: Mapping[str, str],
    shared: Sequence[str] = (),
) -> tuple[str, ...]:
    """Return the erased record ids whose body pieces are still on disk.

    ``bodies``: each erased record's stored body before the redaction.
    ``shared``: pieces that live records hold too (found there, they prove
    nothing), as :func:`live_pieces` returns them.
    """
    path = _db_path(raw)
    if path is None:
        return ()
    skip = set(shared)
    pieces = {
        record_id: [w.encode("utf-8") for w in sample_windows(body) if w not in skip]
        for record_id, body in bodies.items()
    }
    left: list[str] = []
    files = [p for p in (path, Path(f"{path}-wal")) if p.exists() and _size(p) > 0]
    for record_id in sorted(pieces):
        if any(_found(f, piece) for f in files for piece in pieces[record_id]):
            left.append(record_id)
    return tuple(left)


def live_pieces(raw: Any, bodies: Mapping[str, str]) -> tuple[str, ...]:
    """Return the pieces of ``bodies`` that some record's stored body holds now."""
    found: list[str] = []
    for body in bodies.values():
        for window in sample_windows(body):
            row = raw.execute(
                "SELECT 1 FROM records WHERE instr(body_json, ?) > 0 LIMIT 1",
                (window,),
            ).fetchone()
            if row is not None:
                found.append(window)
    return tuple(found)


def _found(path: Path, piece: bytes) -> bool:
    with path.open("rb") as handle:
        try:
            with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as view:
                return view.find(piece) != -1
        except ValueError:  # an empty file cannot be mapped
            return False


def _db_path(raw: Any) -> Path | None:
    for _, name, file in raw.execute("PRAGMA database_list").fetchall():
        if name == "main":
            return Path(file) if file else None
    return None


def _wal_path(raw: Any) -> Path | None:
    path = _db_path(raw)
    return None if path is None else Path(f"{path}-wal")


def _size(path: Path) -> int:
    try:
        return os.stat(path).st_size
    except FileNotFoundError:
        return 0
