"""Supervision rules: what a supervisor watches for and how it intervenes.

A :class:`SupervisionRule` pairs a ``match`` predicate with an ``action`` that
may return an :class:`Intervention`. Rules see effect events (anything shaped
like :class:`SupervisedEvent`: the store's ``EffectEvent`` and the synthetic
merge-review event both are). The four built-in rules follow runtime-spec 11.3
exactly, message texts included:

* :func:`destructive_tool_rule` (``destructive_file_guard``): an advisory inject.
  Substring matching is NOT a security boundary (``rm${IFS}-rf /`` bypasses it).
* :func:`destructive_tool_guard` (``destructive_file_block``): default-deny of
  every shell call and every structured write/delete, for the synchronous gate.
* :func:`high_error_rate_rule` (``error_rate_guard``): per-owner sliding window.
* :func:`stuck_detection_rule` (``stuck_detection``): per-owner repeat counter.

Stateful rules keep their state per trace owner behind a lock, compute their
message before resetting, and reset after firing so they do not spam. Rules
never read a clock: an intervention's ``time`` is stamped by the engine.
"""

from __future__ import annotations

import math
import threading
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Final, Protocol

from goatherd.domain.canonical import canonical_json_text
from goatherd.domain.errors import CanonicalEncodingError
from goatherd.domain.records import CAPTURE, DECLARATION

__all__ = [
    "BASH_SCHEMA_REF",
    "DELETE_SCHEMA_REF",
    "DESTRUCTIVE_SUBSTRINGS",
    "DestructiveToolGuard",
    "DestructiveToolRule",
    "HighErrorRateRule",
    "Intervention",
    "InterventionType",
    "SCOPE_ID_PREFIX",
    "StuckDetectionRule",
    "SupervisedEvent",
    "SupervisionRule",
    "WRITE_SCHEMA_REF",
    "destructive_tool_guard",
    "destructive_tool_rule",
    "high_error_rate_rule",
    "is_bash_call",
    "is_delete_call",
    "is_write_call",
    "scope_id_for_owner",
    "stuck_detection_rule",
]

SCOPE_ID_PREFIX: Final = "scope:"
BASH_SCHEMA_REF: Final = "yaah.tool.bash.v1"
WRITE_SCHEMA_REF: Final = "yaah.tool.write.v1"
DELETE_SCHEMA_REF: Final = "yaah.tool.delete.v1"
DESTRUCTIVE_SUBSTRINGS: Final = (
    "rm ",
    "rm\t",
    "rmdir",
    "mv ",
    "chmod",
    "chown",
    "mkfs",
    "dd ",
    "format",
    "> /",
    ">> /",
)
_TURN_OUTCOME_LABELS: Final = frozenset(
    {"turn:started", "turn:completed", "turn:failed"}
)
_TURN_START_LABELS: Final = frozenset({"turn:created", "turn:started"})
_DEFAULT_ERROR_WINDOW: Final = 10


class InterventionType(StrEnum):
    """What a supervisor asks the host to do about a scope."""

    INJECT = "inject"
    FORK = "fork"
    DISCARD = "discard"
    HALT = "halt"
    DENY = "deny"


@dataclass(frozen=True, slots=True)
class Intervention:
    """A supervisor's verdict about one scope.

    Attributes:
        type: what to do.
        scope_id: the scope concerned (``scope:<owner>``); may be empty for a
            synthetic review event, which the engine then fills in.
        payload: the guidance; the built-in rules use a string.
        time: when the engine emitted it (``None`` until the engine stamps it).
    """

    type: InterventionType
    scope_id: str
    payload: object = None
    time: datetime | None = None


class SupervisedEvent(Protocol):
    """The fields of an effect event the rules read.

    The store's ``EffectEvent`` satisfies it, and so does the unrecorded event
    a merge review builds.
    """

    @property
    def trace_owner_id(self) -> str:
        """The owner path the record landed on."""
        ...

    @property
    def mode(self) -> str:
        """``capture`` or ``declaration``."""
        ...

    @property
    def schema_ref(self) -> str:
        """The record's schema."""
        ...

    @property
    def kind_label(self) -> str:
        """The path entry's kind label."""
        ...

    @property
    def payload(self) -> Mapping[str, object]:
        """The record's payload."""
        ...


@dataclass(frozen=True, slots=True)
class SupervisionRule:
    """A named rule: ``action`` is consulted for events ``match`` accepts.

    Attributes:
        name: a stable identifier (the built-ins use the reference's names).
        match: a cheap predicate over an event.
        action: returns an intervention or ``None``; stateful rules update
            their state here, so the engine calls it for every matching event.
    """

    name: str
    match: Callable[[SupervisedEvent], bool]
    action: Callable[[SupervisedEvent], Intervention | None]


def scope_id_for_owner(trace_owner_id: str) -> str:
    """Return the scope id of the scope writing to ``trace_owner_id``."""
    return SCOPE_ID_PREFIX + trace_owner_id


def is_bash_call(event: SupervisedEvent) -> bool:
    """Tell whether ``event`` is a shell tool call (by schema or kind label)."""
    return event.schema_ref == BASH_SCHEMA_REF or event.kind_label == "bash"


def is_write_call(event: SupervisedEvent) -> bool:
    """Tell whether ``event`` is a structured file-write tool call."""
    return event.schema_ref == WRITE_SCHEMA_REF or event.kind_label == "write"


def is_delete_call(event: SupervisedEvent) -> bool:
    """Tell whether ``event`` is a structured delete tool call."""
    return event.schema_ref == DELETE_SCHEMA_REF or event.kind_label == "delete"


def _advisory_destructive(event: SupervisedEvent) -> bool:
    if is_write_call(event) or is_delete_call(event):
        return True
    if not is_bash_call(event):
        return False
    command = event.payload.get("cmd")
    return isinstance(command, str) and any(
        pattern in command for pattern in DESTRUCTIVE_SUBSTRINGS
    )


def _blockable(event: SupervisedEvent) -> bool:
    return is_bash_call(event) or is_write_call(event) or is_delete_call(event)


def destructive_tool_rule() -> SupervisionRule:
    """Warn (inject, advisory) when a declared tool call looks destructive.

    Matches declarations that are writes, deletes, or shell calls whose
    ``payload.cmd`` contains a destructive substring. Substring matching is
    advisory only; use :func:`destructive_tool_guard` to block.
    """

    def match(event: SupervisedEvent) -> bool:
        return event.mode == DECLARATION and _advisory_destructive(event)

    def action(event: SupervisedEvent) -> Intervention:
        return Intervention(
            InterventionType.INJECT,
            scope_id_for_owner(event.trace_owner_id),
            f"WARNING: destructive operation detected ({event.kind_label}). "
            "Proceed with caution.",
        )

    return SupervisionRule("destructive_file_guard", match, action)


def destructive_tool_guard() -> SupervisionRule:
    """Deny every declared shell call and every structured write or delete.

    Default-deny for shells, because a shell can evade any blacklist. Meant for
    the synchronous pre-tool gate (``Supervisor.check_call``).
    """

    def match(event: SupervisedEvent) -> bool:
        return event.mode == DECLARATION and _blockable(event)

    def action(event: SupervisedEvent) -> Intervention:
        return Intervention(
            InterventionType.DENY,
            scope_id_for_owner(event.trace_owner_id),
            f"Blocked destructive operation ({event.kind_label}). Supervisor denied.",
        )

    return SupervisionRule("destructive_file_block", match, action)


def _round_half_up(value: float) -> int:
    # Go's math.Round rounds halves away from zero; rates are never negative.
    return math.floor(value + 0.5)


class _ErrorWindows:
    """Per-owner sliding windows of call outcomes (guarded by a lock)."""

    def __init__(self, threshold: float, window: int) -> None:
        self._threshold = threshold
        self._window = window
        self._lock = threading.Lock()
        self._results: dict[str, deque[bool]] = {}

    def observe(self, event: SupervisedEvent) -> Intervention | None:
        success = event.payload.get("success")
        with self._lock:
            results = self._results.setdefault(
                event.trace_owner_id, deque(maxlen=self._window)
            )
            results.append(success is True)
            return self._verdict(event.trace_owner_id, results)

    def _verdict(self, owner: str, results: deque[bool]) -> Intervention | None:
        if len(results) < self._window // 2:
            return None
        total = len(results)
        errors = sum(1 for ok in results if not ok)
        rate = errors / total
        if rate < self._threshold:
            return None
        # The message is built before the reset: v0.4.1 printed "/0" otherwise.
        message = (
            f"WARNING: error rate {_round_half_up(rate * 100)}% "
            f"({errors}/{total} recent calls). Consider a different approach."
        )
        results.clear()
        return Intervention(InterventionType.INJECT, scope_id_for_owner(owner), message)


def high_error_rate_rule(threshold: float, window: int) -> SupervisionRule:
    """Warn when an owner's recent calls fail at ``threshold`` or more.

    Args:
        threshold: the failing fraction that fires (``0.5`` = 50%).
        window: how many recent results count; ``<= 0`` means 10. Fewer than
            ``window // 2`` results never fire. Firing resets the owner's window.
    """
    windows = _ErrorWindows(threshold, window if window > 0 else _DEFAULT_ERROR_WINDOW)

    def match(event: SupervisedEvent) -> bool:
        return (
            event.mode == CAPTURE
            and event.kind_label not in _TURN_OUTCOME_LABELS
            and "success" in event.payload
        )

    return SupervisionRule("error_rate_guard", match, windows.observe)


def _render_value(value: object) -> str:
    try:
        return canonical_json_text(value)
    except CanonicalEncodingError:
        return repr(value)


def _call_signature(event: SupervisedEvent) -> str:
    parts = [event.kind_label]
    for key in sorted(event.payload):
        parts.append(f":{key}={_render_value(event.payload[key])}")
    return "".join(parts)


class _RepeatCounters:
    """Per-owner last signature and repeat count (guarded by a lock)."""

    def __init__(self, threshold: int) -> None:
        self._threshold = threshold
        self._lock = threading.Lock()
        self._last: dict[str, str] = {}
        self._repeats: dict[str, int] = {}

    def observe(self, event: SupervisedEvent) -> Intervention | None:
        owner = event.trace_owner_id
        signature = _call_signature(event)
        with self._lock:
            if self._last.get(owner) == signature:
                self._repeats[owner] += 1
            else:
                self._last[owner] = signature
                self._repeats[owner] = 1
            if self._repeats[owner] < self._threshold:
                return None
            self._repeats[owner] = 0
        return Intervention(
            InterventionType.INJECT,
            scope_id_for_owner(owner),
            f"WARNING: same tool call repeated {self._threshold} times. "
            "You may be stuck. Try a different approach.",
        )


def stuck_detection_rule(repeat_threshold: int) -> SupervisionRule:
    """Warn when an owner declares the same call ``repeat_threshold`` times running.

    The signature is the kind label plus ``:<key>=<canonical JSON of value>``
    for each payload key in sorted order. Every declaration except
    ``turn:created``/``turn:started`` participates, tool call or not.
    """
    counters = _RepeatCounters(repeat_threshold)

    def match(event: SupervisedEvent) -> bool:
        return event.mode == DECLARATION and event.kind_label not in _TURN_START_LABELS

    return SupervisionRule("stuck_detection", match, counters.observe)


# The seed's constructor names, kept as aliases.
DestructiveToolRule = destructive_tool_rule
DestructiveToolGuard = destructive_tool_guard
HighErrorRateRule = high_error_rate_rule
StuckDetectionRule = stuck_detection_rule
