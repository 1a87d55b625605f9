"""The projection runner: keeps read models current over the trace's global log.

Each :class:`~goatherd.projections.Projection` has a row in
``projection_tracking`` (name, version, position) in the SAME database as its
view. One step reads a batch of log entries after the tracked position
(``store.read_log``), folds them into a view bound to a fresh transaction and
advances the position in that same transaction, with a compare-and-set so two
runners over one database never apply a batch twice. A crash therefore loses
nothing and repeats nothing: the next run resumes at the committed position.

- ``catch_up`` runs steps until the log is exhausted; ``start`` runs them in a
  background thread, woken by the effect bus (or a poll interval); ``stop``
  ends it. Resuming is starting again: the position is in the database.
- ``rebuild(name)`` drops the view, resets the position to -1 and replays.
  A changed ``version`` triggers the same rebuild on the next catch-up.
- ``list_projections`` / ``rebuild_projection`` back the CLI's
  ``goatherd projections list | rebuild NAME``.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import Any, Final, Protocol, runtime_checkable

from sqlalchemy import (
    BigInteger,
    Column,
    Connection,
    Engine,
    Integer,
    MetaData,
    Table,
    Text,
    insert,
    select,
    update,
)

from goatherd.domain.errors import GoatherdError
from goatherd.domain.log import LogEntry
from goatherd.infrastructure.bus.effect_bus import EffectBus, SubscriptionClosedError
from goatherd.infrastructure.projections.views import (
    SqlUiIndexView,
    runtime_state_view_factory,
)
from goatherd.infrastructure.store.engine import WRITE_OPTION
from goatherd.projections import (
    Projection,
    RuntimeStateProjection,
    UiIndexProjection,
)

__all__ = [
    "DEFAULT_PROJECTION_BATCH",
    "LogSource",
    "ProjectionRunner",
    "ProjectionStatus",
    "UnknownProjectionError",
    "builtin_projections",
    "list_projections",
    "rebuild_projection",
    "tracking_table",
]

DEFAULT_PROJECTION_BATCH: Final = 2000
_log = logging.getLogger(__name__)

AnyProjection = Projection[Any]


def tracking_table(metadata: MetaData | None = None) -> Table:
    """Return the ``projection_tracking`` table: one row per projection."""
    return Table(
        "projection_tracking",
        metadata or MetaData(),
        Column("name", Text, primary_key=True),
        Column("version", Integer, nullable=False),
        Column("position", BigInteger, nullable=False),
    )


_TRACKING: Final = tracking_table()


class UnknownProjectionError(GoatherdError, KeyError):
    """Raised when a runner is asked about a projection it does not run."""


@runtime_checkable
class LogSource(Protocol):
    """The part of the trace store a runner reads."""

    def read_log(
        self,
        after: int = -1,
        limit: int = 1000,
        *,
        schema_refs: Collection[str] | None = None,
    ) -> tuple[LogEntry, ...]:
        """Return log entries with position > ``after``, ascending."""
        ...

    def max_position(self) -> int:
        """Return the highest committed position (-1 when empty)."""
        ...


@dataclass(frozen=True, slots=True)
class ProjectionStatus:
    """Where one projection stands against the log."""

    name: str
    version: int
    position: int
    head: int

    @property
    def lag(self) -> int:
        """How many positions the projection is behind the log's head."""
        return max(self.head - self.position, 0)


class _PositionMovedError(Exception):
    """Another runner advanced the position first: roll back and re-read."""


_Tx = Callable[[], AbstractContextManager[Connection]]
Progress = Callable[[str, int, int], None]
"""``progress(projection_name, folded_through, log_length)`` after each batch."""


def _transactions(store: object, engine: Engine | None) -> tuple[_Tx, _Tx]:
    """Return (write, read) transaction openers for the views' database.

    In the store's own database every transaction goes through
    ``store.transaction()``, serialized with appends (a ``:memory:`` store has
    a single connection). A separate engine gets BEGIN IMMEDIATE for writes on
    SQLite, so a write never upgrades a read snapshot.
    """
    if engine is not None:
        writer = engine.execution_options(**{WRITE_OPTION: True})
        return writer.begin, engine.begin
    transaction = getattr(store, "transaction", None)
    if not callable(transaction):
        raise TypeError(
            "the store offers no transaction(); pass engine= to ProjectionRunner"
        )
    return transaction, transaction


def _flush(view: object) -> None:
    flush = getattr(view, "flush", None)
    if callable(flush):
        flush()


class ProjectionRunner:
    """Run projections over ``store``'s log into ``engine`` (default: the store's).

    Thread-safe: one lock serializes this runner's steps and reads.
    """

    def __init__(
        self,
        store: LogSource,
        projections: Sequence[AnyProjection],
        *,
        engine: Engine | None = None,
        bus: EffectBus | None = None,
        batch_size: int = DEFAULT_PROJECTION_BATCH,
        poll_interval: float = 0.5,
    ) -> None:
        names = [p.name for p in projections]
        if len(set(names)) != len(names) or not all(names):
            raise ValueError(f"projection names must be unique and non-empty: {names}")
        if batch_size < 1:
            raise ValueError(f"batch_size must be positive, got {batch_size}")
        self._store = store
        self._write, self._read = _transactions(store, engine)
        self._projections = {p.name: p for p in projections}
        self._bus = bus
        self._batch = batch_size
        self._poll = poll_interval
        self._lock = threading.RLock()
        self._ready: set[str] = set()
        self._positions: dict[str, int] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._failure: BaseException | None = None
        self._subscriber = f"projection-runner:{id(self)}"

    # ------------------------------------------------------------ queries

    @property
    def names(self) -> tuple[str, ...]:
        """The names of the projections this runner runs, in order."""
        return tuple(self._projections)

    def _get(self, name: str) -> AnyProjection:
        try:
            return self._projections[name]
        except KeyError:
            raise UnknownProjectionError(
                f"unknown projection {name!r}; known: {', '.join(self._projections)}"
            ) from None

    def status(self) -> tuple[ProjectionStatus, ...]:
        """Return each projection's version, committed position and the log head."""
        head = self._store.max_position()
        with self._lock, self._write() as conn:
            _TRACKING.create(conn, checkfirst=True)
            rows = {r.name: r for r in conn.execute(select(_TRACKING))}
        return tuple(
            ProjectionStatus(
                name,
                p.version,
                rows[name].position if name in rows else -1,
                head,
            )
            for name, p in self._projections.items()
        )

    @contextmanager
    def read(self, name: str) -> Iterator[Any]:
        """Yield ``name``'s view bound to a transaction, for queries."""
        projection = self._get(name)
        with self._lock, self._read() as conn:
            yield projection.bind_view(conn)

    # ------------------------------------------------------------- writing

    def _prepare(self, projection: AnyProjection) -> None:
        """Create the view and tracking row; rebuild on a version change."""
        if projection.name in self._ready:
            return
        with self._write() as conn:
            _TRACKING.create(conn, checkfirst=True)
            row = conn.execute(
                select(_TRACKING).where(_TRACKING.c.name == projection.name)
            ).first()
            if row is not None and row.version != projection.version:
                _log.info("projection %s: version changed, rebuilding", projection.name)
                self._reset(conn, projection)
            elif row is None:
                projection.bind_view(conn).create()
                conn.execute(
                    insert(_TRACKING).values(
                        name=projection.name, version=projection.version, position=-1
                    )
                )
        self._ready.add(projection.name)

    def _reset(self, conn: Connection, projection: AnyProjection) -> None:
        self._positions.pop(projection.name, None)
        view = projection.bind_view(conn)
        view.drop()
        view.create()
        conn.execute(
            update(_TRACKING)
            .where(_TRACKING.c.name == projection.name)
            .values(version=projection.version, position=-1)
        )

    def _position(self, name: str) -> int:
        """Return the committed position, cached between steps.

        Another runner's commit (or rebuild) makes the cache stale; the
        compare-and-set of the next step detects that and drops the cache.
        """
        position = self._positions.get(name)
        if position is None:
            with self._read() as conn:
                position = int(
                    conn.execute(
                        select(_TRACKING.c.position).where(_TRACKING.c.name == name)
                    ).scalar_one()
                )
            self._positions[name] = position
        return position

    def _step(self, projection: AnyProjection) -> int:
        """Apply one batch; return the positions advanced (0 when current)."""
        old = self._position(projection.name)
        refs = projection.schema_refs
        # A filtered read may skip to the head read BEFORE it (every position
        # up to it was committed and so seen); an unfiltered read is gap-free.
        head = -1 if refs is None else self._store.max_position()
        entries = self._store.read_log(after=old, limit=self._batch, schema_refs=refs)
        new = entries[-1].position if entries else old
        if len(entries) < self._batch:
            new = max(new, head)
        if new <= old:
            return 0
        with self._write() as conn:
            view = projection.bind_view(conn)
            projection.fold(view, entries)
            _flush(view)
            moved = conn.execute(
                update(_TRACKING)
                .where(_TRACKING.c.name == projection.name)
                .where(_TRACKING.c.position == old)
                .values(position=new)
            )
            if moved.rowcount != 1:
                raise _PositionMovedError
        self._positions[projection.name] = new
        return new - old

    def _catch_up_one(
        self, projection: AnyProjection, progress: Progress | None = None
    ) -> int:
        self._prepare(projection)
        total = self._store.max_position() + 1 if progress is not None else 0
        advanced = 0
        while True:
            try:
                step = self._step(projection)
            except _PositionMovedError:
                self._positions.pop(projection.name, None)
                continue
            if step == 0:
                return advanced
            advanced += step
            if progress is not None:
                done = self._positions[projection.name] + 1
                progress(projection.name, done, max(total, done))

    def catch_up(
        self, name: str | None = None, *, progress: Progress | None = None
    ) -> int:
        """Fold every committed entry not yet applied; return positions advanced.

        Idempotent: a current projection advances 0. ``name`` limits it to one
        projection (:class:`UnknownProjectionError` if unknown). ``progress``
        is called ``(name, position + 1, head + 1)`` after each batch.
        """
        targets = [self._get(name)] if name else list(self._projections.values())
        with self._lock:
            return sum(self._catch_up_one(p, progress) for p in targets)

    def rebuild(self, name: str, *, progress: Progress | None = None) -> int:
        """Drop ``name``'s view, reset its position and replay the whole log."""
        projection = self._get(name)
        with self._lock:
            self._prepare(projection)
            with self._write() as conn:
                self._reset(conn, projection)
            return self._catch_up_one(projection, progress)

    # ---------------------------------------------------------- background

    @property
    def running(self) -> bool:
        """Whether the background thread is alive."""
        return self._thread is not None and self._thread.is_alive()

    @property
    def failure(self) -> BaseException | None:
        """The exception that stopped the background thread, if any."""
        return self._failure

    def start(self) -> None:
        """Catch up in a background thread, woken by the bus or every poll interval.

        Idempotent while running. A handler exception stops the thread and is
        kept in :attr:`failure` (the position stays before the failing batch).
        """
        if self.running:
            return
        self._stop.clear()
        self._failure = None
        subscription = self._bus.subscribe(self._subscriber) if self._bus else None
        self._thread = threading.Thread(
            target=self._run,
            args=(subscription,),
            name="projection-runner",
            daemon=True,
        )
        self._thread.start()

    def _wait(self, subscription: Any) -> None:
        if subscription is None:
            self._stop.wait(self._poll)
            return
        try:
            subscription.get(timeout=self._poll)
            subscription.drain()
        except queue.Empty:
            return
        except SubscriptionClosedError:
            self._stop.wait(self._poll)

    def _run(self, subscription: Any) -> None:
        try:
            while not self._stop.is_set():
                self.catch_up()
                self._wait(subscription)
        except Exception as exc:  # the thread must report, not vanish
            _log.exception("projection runner stopped")
            self._failure = exc
        finally:
            if subscription is not None and self._bus is not None:
                self._bus.unsubscribe(subscription.subscriber_id)

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the background thread (idempotent); the position stays committed."""
        self._stop.set()
        if self._bus is not None:
            self._bus.unsubscribe(self._subscriber)  # wakes a thread waiting on it
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(timeout)

    def __enter__(self) -> ProjectionRunner:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def builtin_projections() -> tuple[AnyProjection, ...]:
    """Return the built-in read models wired to their SQL views."""
    return (
        RuntimeStateProjection(runtime_state_view_factory("goatherd_")),
        UiIndexProjection(SqlUiIndexView.bind),
    )


def list_projections(store: LogSource) -> tuple[ProjectionStatus, ...]:
    """Return the built-in projections' status in ``store``'s database (CLI)."""
    return ProjectionRunner(store, builtin_projections()).status()


def rebuild_projection(
    store: LogSource, name: str, *, progress: Progress | None = None
) -> int:
    """Rebuild one built-in projection in ``store``'s database (CLI)."""
    runner = ProjectionRunner(store, builtin_projections())
    return runner.rebuild(name, progress=progress)
