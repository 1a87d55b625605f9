"""The domain's exceptions: one small, flat hierarchy under :class:`DomainError`.

Hierarchy::

    GoatherdError                    root of every exception goatherd raises on purpose
      DomainError                    a rule of the pure model was broken
        CanonicalEncodingError       a value is not plain, canonical JSON (has ``path``)
          CanonicalTypeError         ... because of a type (also a ``TypeError``)
          CanonicalValueError        ... because of a value (also a ``ValueError``)
        RecordInputError             a record/witness canonical input breaks an ABI rule
                                     (also a ``ValueError``)

Other layers define their own roots (``TraceStoreError`` in the store,
application failures as values) and derive from :class:`GoatherdError` so a
caller can catch everything goatherd raises deliberately with one clause.
"""

from __future__ import annotations

__all__ = [
    "CanonicalEncodingError",
    "CanonicalTypeError",
    "CanonicalValueError",
    "DomainError",
    "GoatherdError",
    "RecordInputError",
]


class GoatherdError(Exception):
    """Root of every exception goatherd raises deliberately."""


class DomainError(GoatherdError):
    """A rule of the pure domain model was broken."""


class CanonicalEncodingError(DomainError):
    """A value cannot be encoded as canonical JSON.

    Attributes:
        path: where in the value the problem sits, e.g. ``payload.args[2]``.
        reason: what is wrong there.
    """

    def __init__(self, path: str, reason: str) -> None:
        """Record the offending ``path`` and the ``reason``."""
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


class CanonicalTypeError(CanonicalEncodingError, TypeError):
    """Raised when a value or key has a type JSON cannot hold (set, bytes, object)."""


class CanonicalValueError(CanonicalEncodingError, ValueError):
    """Raised for NaN, infinities, lone surrogates and cyclic structures."""


class RecordInputError(DomainError, ValueError):
    """Raised when a record or witness canonical input breaks an ABI rule.

    The message is the reference's message (for example ``schema_ref is
    required``), so it stays recognisable across implementations.
    """
