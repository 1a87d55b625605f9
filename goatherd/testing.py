"""Test helpers for goatherd users: prove a read model replay-equivalent.

A projection is replay-equivalent when the view it builds does not depend on
how the log reached it: folded record by record, in batches of any size,
resumed by a new runner after a stop at any position, or rebuilt from an
empty view in one go, the rows are the same. That is what lets a read model
be dropped and rebuilt, and what a handler that reads a clock, keeps state
outside its view or mishandles a record placed on several paths breaks.

:func:`assert_replay_equivalent` checks it on any trace you give it (your
test's, or a copy of a production trace), without writing to that trace:
every fold runs into a private in-memory database::

    from goatherd.testing import assert_replay_equivalent

    report = assert_replay_equivalent(
        store, lambda: MyProjection(row_view_factory("my_rows", MyRow))
    )
    assert report.records > 0

``docs/projections.md`` has a complete example.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Any, Final

from sqlalchemy import create_engine
from sqlalchemy.pool import StaticPool

from goatherd.domain import LogEntry
from goatherd.infrastructure.projections.runner import LogSource, ProjectionRunner
from goatherd.projections import Projection

__all__ = [
    "ReplayMismatchError",
    "ReplayReport",
    "assert_replay_equivalent",
    "default_snapshot",
]

DEFAULT_STOPS: Final = (1, 2, 3, 7, 50)
"""How many log entries apart the resumed runs stop (one run per value)."""


class ReplayMismatchError(AssertionError):
    """A projection built two ways from the same log gave different views.

    Attributes:
        projection: the projection's name.
        how: how the differing view was built.
        rebuilt: the view rebuilt from an empty one in one go.
        other: the differing view.
    """

    def __init__(self, projection: str, how: str, rebuilt: object, other: object):
        """Name the projection, the way that differed and both views."""
        super().__init__(
            f"projection {projection!r} is not replay-equivalent: built {how},"
            f" its view differs from the one rebuilt in one go\n"
            f"  rebuilt: {rebuilt!r}\n  {how}: {other!r}"
        )
        self.projection = projection
        self.how = how
        self.rebuilt = rebuilt
        self.other = other


@dataclass(frozen=True, slots=True)
class ReplayReport:
    """What :func:`assert_replay_equivalent` compared.

    Attributes:
        projection: the projection's name.
        records: log entries the trace holds.
        ways: how many differently built views were compared with the rebuild.
        view: the agreed view (what ``snapshot`` returned).
    """

    projection: str
    records: int
    ways: int
    view: object


def default_snapshot(view: Any) -> object:
    """Return what a view holds: ``rows()``, or the runtime state's three tables."""
    if hasattr(view, "scope_rows"):
        return (view.scope_rows(), view.checkpoint_rows(), view.output_rows())
    rows = getattr(view, "rows", None)
    if callable(rows):
        return rows()
    raise TypeError(
        f"cannot read a {type(view).__name__}: pass snapshot= to say what to compare"
    )


def assert_replay_equivalent(
    store: LogSource,
    make_projection: Callable[[], Projection[Any]],
    *,
    snapshot: Callable[[Any], object] = default_snapshot,
    stops: Sequence[int] = DEFAULT_STOPS,
) -> ReplayReport:
    """Fold ``store``'s log into fresh views several ways; require one answer.

    Args:
        store: the trace (only read).
        make_projection: builds a fresh projection (with its view factory).
        snapshot: reads a bound view into a comparable value.
        stops: for each value ``n``, one view is built by runners that each
            fold at most ``n`` entries (in batches of ``n``) and stop; a new
            runner resumes from the committed position.

    Returns:
        What was compared.

    Raises:
        ReplayMismatchError: a view differs from the one rebuilt in one go.
    """
    head = store.max_position()
    rebuilt = _fold(store, make_projection(), snapshot, batch=10_000, stop=None)
    name = make_projection().name
    ways = 0
    for stop in stops:
        resumed = _fold(store, make_projection(), snapshot, batch=stop, stop=stop)
        ways += 1
        if resumed != rebuilt:
            raise ReplayMismatchError(name, f"in runs of {stop}", rebuilt, resumed)
    return ReplayReport(name, head + 1, ways, rebuilt)


def _fold(
    store: LogSource,
    projection: Projection[Any],
    snapshot: Callable[[Any], object],
    *,
    batch: int,
    stop: int | None,
) -> object:
    engine = create_engine("sqlite://", poolclass=StaticPool)
    try:
        head = store.max_position()
        if stop is None:
            runner = ProjectionRunner(
                store, [projection], engine=engine, batch_size=batch
            )
            runner.catch_up()
        else:
            upto = -1
            while upto < head:
                upto = min(upto + stop, head)
                prefix = _Prefix(store, upto)
                runner = ProjectionRunner(
                    prefix, [projection], engine=engine, batch_size=batch
                )
                runner.catch_up()
        with runner.read(projection.name) as view:
            return snapshot(view)
    finally:
        engine.dispose()


class _Prefix:
    """The log as it stood when its head was ``upto`` (a runner's view of it)."""

    def __init__(self, store: LogSource, upto: int) -> None:
        self._store = store
        self._upto = upto

    def max_position(self) -> int:
        return min(self._store.max_position(), self._upto)

    def read_log(
        self,
        after: int = -1,
        limit: int = 1000,
        *,
        schema_refs: Collection[str] | None = None,
    ) -> tuple[LogEntry, ...]:
        entries = self._store.read_log(after, limit, schema_refs=schema_refs)
        return tuple(e for e in entries if e.position <= self._upto)
