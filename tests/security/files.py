"""Byte-level snapshots of a trace file and its directory.

A read-only promise is checked by comparing the bytes of every file in the
trace's directory before and after. SQLite's WAL protocol makes every reader
of a WAL database take a read mark in the shared-memory index (``-shm``) and,
when no ``-wal`` exists yet, create an empty one: neither holds trace data, so
``trace_bytes`` leaves out the ``-shm`` file and an EMPTY ``-wal``. Everything
else - the database itself and a ``-wal`` with frames - must stay identical.
"""

from __future__ import annotations

import hashlib
from pathlib import Path


def directory_bytes(directory: Path) -> dict[str, str]:
    """Return ``file name -> SHA-256`` for every regular file in ``directory``."""
    return {
        path.name: hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(directory.iterdir())
        if path.is_file()
    }


def trace_bytes(directory: Path) -> dict[str, str]:
    """Like :func:`directory_bytes`, without the ``-shm`` index and an empty WAL."""
    return {
        name: digest
        for name, digest in directory_bytes(directory).items()
        if not name.endswith("-shm")
        and not (name.endswith("-wal") and (directory / name).stat().st_size == 0)
    }
