"""One intent line under proof: its fields, its state, and the records it knows.

:class:`IntentLine` is the base of :class:`~.import_intent.IntentProver`: it
holds the line, the :class:`~.import_lookup.Lookup` of earlier lines, the
ordinal and position counters, and what the line has proven so far
(``_Line``); it looks a record or context up in this line first, then in the
earlier ones. :func:`text_field` reads one text field as every line's proof
does. It imports the store's limits and :mod:`.import_lookup`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from goatherd.infrastructure.portability.import_lookup import Lookup, _Known
from goatherd.infrastructure.store.limits import DEFAULT_LIMITS

__all__ = ["IntentLine", "text_field"]


@dataclass
class _Line:
    redacted: dict[str, str] = field(default_factory=dict)
    redactions: dict[str, list[str]] = field(default_factory=dict)
    records: dict[str, _Known] = field(default_factory=dict)
    record_rows: list[dict[str, Any]] = field(default_factory=list)
    edges: list[dict[str, Any]] = field(default_factory=list)
    contexts: dict[str, dict[str, Any]] = field(default_factory=dict)
    context_rows: list[dict[str, Any]] = field(default_factory=list)
    entries: list[dict[str, Any]] = field(default_factory=list)
    first_position: dict[str, int] = field(default_factory=dict)
    frontier_rows: list[dict[str, Any]] = field(default_factory=list)


class IntentLine:
    """An intent line, the earlier lines' rows, and what the line proved so far."""

    def __init__(
        self,
        obj: dict[str, Any],
        lookup: Lookup,
        next_ordinal: dict[str, int],
        next_position: int,
        first_logged: bool | None = None,
    ) -> None:
        """Prove ``obj``; ``next_ordinal`` is advanced in place.

        ``first_logged``: no earlier line placed a logged entry (then this
        line's first entry cites the root witness); by default, whether
        ``next_position`` is 0. Positions a hole line records (ADR 0076) may
        precede the first logged entry.
        """
        self.obj = obj
        self.lookup = lookup
        self.next_ordinal = next_ordinal
        self.first_logged = next_position == 0 if first_logged is None else first_logged
        self.first_position = next_position
        self.next_position = next_position
        self.line = _Line()
        self.intent_id = text_field(obj, "append_intent_id", empty=False)

    def _context_content(self, context_id: str) -> dict[str, Any] | None:
        return self.line.contexts.get(context_id) or self.lookup.context(context_id)

    def _known(self, record_id: str) -> _Known | None:
        return self.line.records.get(record_id) or self.lookup.record(record_id)


def text_field(obj: dict[str, Any], key: str, *, empty: bool = True) -> str:
    """Return ``obj[key]`` as text without NUL (non-empty unless ``empty``)."""
    value = obj[key]
    if not isinstance(value, str):
        raise TypeError(f"{key} must be a string")
    if "\x00" in value:
        raise ValueError(f"{key} contains NUL")
    if not empty and not value:
        raise ValueError(f"{key} is empty")
    size = len(value.encode("utf-8", "surrogatepass"))
    if size > DEFAULT_LIMITS.identifier_bytes:
        raise ValueError(
            f"{key} is {size} bytes, over the {DEFAULT_LIMITS.identifier_bytes}-byte "
            "limit on identifiers an append keeps too"
        )
    return value
