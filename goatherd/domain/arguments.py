"""Argument checks shared by constructors that take a collection of strings.

Python iterates a ``str`` into its characters, so ``EchoSubstrate("ref",
"example.write.v1")`` would quietly accept the schemas ``e``, ``x``, ``a``...
Every constructor that takes a collection of names passes it through
:func:`string_tuple`, which refuses a bare string (or bytes) with a message
that shows the call to write instead.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["string_tuple"]


def string_tuple(value: Iterable[str], what: str) -> tuple[str, ...]:
    """Return ``value`` as a tuple of strings; refuse a bare string or a non-string.

    Raises:
        TypeError: ``value`` is a ``str``/``bytes`` (one name where a
            collection is expected), is not iterable, or holds a non-string.
    """
    if isinstance(value, str | bytes | bytearray):
        raise TypeError(
            f"{what} must be a collection of strings, got the single string"
            f" {value!r}; pass ({value!r},) or [{value!r}]"
        )
    try:
        items = tuple(value)
    except TypeError:
        raise TypeError(
            f"{what} must be a collection of strings, got {type(value).__name__}"
        ) from None
    for item in items:
        if not isinstance(item, str):
            raise TypeError(
                f"{what} must hold strings only, got {type(item).__name__} {item!r}"
            )
    return items
