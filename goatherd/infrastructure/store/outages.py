"""Translate the database driver's outage errors into ``StoreUnavailableError``.

An outage is the database failing to do its part (locked beyond the busy
timeout, disk full, a read-only file, a lost connection, a file that cannot
be opened), as opposed to a store law being broken. Upper layers must never
see driver types (style guide section 5), so the store wraps every
transaction in :data:`outages`; the driver's own message stays in the new
error's text (one line) and in ``__cause__``.

psycopg is recognized by the error's class, without importing it: a SQLite
user never pays for loading the PostgreSQL driver.
"""

from __future__ import annotations

import sqlite3
from types import TracebackType
from typing import Final

from sqlalchemy.exc import InterfaceError, OperationalError

from goatherd.domain.errors import StoreUnavailableError

__all__ = ["is_outage", "one_line", "outages"]

_DRIVER_OUTAGES: Final = (sqlite3.OperationalError, OperationalError, InterfaceError)
_PSYCOPG_OUTAGES: Final = frozenset({"OperationalError", "InterfaceError"})


def is_outage(error: BaseException) -> bool:
    """Whether ``error`` is a driver's outage (SQLite, SQLAlchemy or psycopg)."""
    if isinstance(error, _DRIVER_OUTAGES):
        return True
    return any(
        cls.__module__.startswith("psycopg") and cls.__name__ in _PSYCOPG_OUTAGES
        for cls in type(error).__mro__
    )


def one_line(error: BaseException) -> str:
    """Return the driver's own reason, on one line."""
    reason = getattr(error, "orig", None) or error
    return " ".join(str(reason).split())


class _Outages:
    """Re-raise driver outage errors raised inside as ``StoreUnavailableError``.

    A plain class, not a generator context manager: it wraps every append.
    """

    __slots__ = ()

    def __enter__(self) -> None:
        return None

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if error is not None and is_outage(error):
            raise StoreUnavailableError(
                f"trace store unavailable: {one_line(error)}"
            ) from error


outages: Final = _Outages()
"""``with outages:`` translates driver outages (a reusable, stateless instance)."""
