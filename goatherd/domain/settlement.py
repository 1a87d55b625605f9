"""Settlement: the four verbs that consume a sealed output exactly once.

- ``selected``: fast-forward only; the parent must be bit-identical to the
  fork baseline, then it is reset to the sealed state and the child merged.
- ``applied``: three-way; the parent's own changes since the baseline must be
  path-disjoint from the output's, then the delta is applied and the child
  merged. A conflict consumes nothing.
- ``released``: keep the sealed state addressable, integrate nothing.
- ``discarded``: discard the child, keep the sealed state as a record.

Pure rules only; the effects are the application's.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from enum import StrEnum

from goatherd.domain.runtime_errors import (
    ParentMovedError,
    UnknownSettlementActionError,
)

__all__ = [
    "OutputState",
    "SettlementAction",
    "apply_overlap",
    "check_fast_forward",
    "effect_landed_ending",
    "parse_settlement_action",
    "terminal_state_for",
]


class SettlementAction(StrEnum):
    """How a sealed output is consumed (the seed's values)."""

    SELECT = "selected"
    APPLY = "applied"
    RELEASE = "released"
    DISCARD = "discarded"


class OutputState(StrEnum):
    """The consume-once lifecycle state of a retained output."""

    UNCONSUMED = "unconsumed"
    SELECTED = "selected"
    APPLIED = "applied"
    RELEASED = "released"
    DISCARDED = "discarded"
    INVALID = "invalid"


def parse_settlement_action(action: str) -> SettlementAction:
    """Return the verb named by ``action``.

    Raises:
        UnknownSettlementActionError: for anything but the four verbs.
    """
    try:
        return SettlementAction(action)
    except ValueError:
        raise UnknownSettlementActionError(str(action)) from None


def terminal_state_for(action: SettlementAction) -> OutputState:
    """Return the output state a settlement with ``action`` ends in."""
    return OutputState(action.value)


def check_fast_forward(
    output_id: str, parent_digest: str, baseline_digest: str
) -> None:
    """Allow select only when the parent is still exactly at the baseline.

    Raises:
        ParentMovedError: the digests differ (nothing is consumed).
    """
    if parent_digest != baseline_digest:
        raise ParentMovedError(output_id)


def apply_overlap(
    change_paths: Sequence[str], parent_files: Iterable[str]
) -> list[str]:
    """Return the output's paths (in change order) the parent also changed."""
    moved = set(parent_files)
    return [path for path in change_paths if path in moved]


def effect_landed_ending(child_active: bool) -> str:
    """Name the ending a settle whose effect landed still allows."""
    return "release or discard" if child_active else "release"
