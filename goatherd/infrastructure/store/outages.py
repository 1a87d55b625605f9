"""Translate the database driver's outage errors into ``StoreUnavailableError``.

An outage is the database failing to do its part (locked beyond the busy
timeout, disk full, a read-only file, a lost connection), as opposed to a
store law being broken. Upper layers must never see driver types (style guide
section 5), so the store wraps every transaction in :func:`outages`; the
driver's own message stays in the new error's text and ``__cause__``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy.exc import InterfaceError, OperationalError

from goatherd.domain.errors import StoreUnavailableError

__all__ = ["outages"]

_DRIVER_OUTAGES: tuple[type[BaseException], ...] = (
    sqlite3.OperationalError,
    OperationalError,
    InterfaceError,
)
try:  # psycopg is a declared dependency, but keep SQLite usable without it
    import psycopg

    _DRIVER_OUTAGES += (psycopg.OperationalError, psycopg.InterfaceError)
except ImportError:  # pragma: no cover
    pass


@contextmanager
def outages() -> Iterator[None]:
    """Re-raise driver outage errors raised inside as ``StoreUnavailableError``."""
    try:
        yield
    except _DRIVER_OUTAGES as error:
        reason = getattr(error, "orig", None) or error
        raise StoreUnavailableError(
            f"trace store unavailable: {str(reason).strip()}"
        ) from error
