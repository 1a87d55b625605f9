"""A user's own projection, loaded by the CLI tests with ``--module``."""

from __future__ import annotations

from dataclasses import dataclass

from goatherd.domain import LogEntry
from goatherd.infrastructure import row_view_factory
from goatherd.projections import Projection, RowView, on

NAME = "test.bash_calls"


@dataclass(frozen=True, slots=True)
class BashCalls:
    """One row: an owner path and how many bash calls it declared."""

    owner: str
    calls: int


class BashCallCount(Projection[RowView[BashCalls]]):
    """Count ``yaah.tool.bash.v1`` declarations per owner path."""

    name = NAME
    version = 1

    def __init__(self) -> None:
        super().__init__(row_view_factory("test_bash_calls", BashCalls))

    @on("yaah.tool.bash.v1")
    def called(self, view: RowView[BashCalls], entry: LogEntry) -> None:
        owner = entry.record.trace_owner_id
        old = view.get(owner) or BashCalls(owner, 0)
        view.put(owner, BashCalls(owner, old.calls + 1))


def made_by_a_factory() -> BashCallCount:
    """A factory the CLI accepts in place of the class."""
    return BashCallCount()


NOT_A_PROJECTION = 42
