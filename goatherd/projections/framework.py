"""The user-facing projection API: a read model is a class of handlers plus a view.

A :class:`Projection` names itself (``name``, ``version``) and maps schema refs
to handler methods with the :func:`on` decorator; :attr:`Projection.handles`
is that map, built when the class is defined. A handler receives the view and
one :class:`~goatherd.domain.LogEntry` (a record at its global position) and
writes through the view; it must be deterministic (no clock, no randomness),
so replaying the log rebuilds the same view.

The :class:`View` protocol is what the runner needs from a view: ``create``
its storage if absent and ``drop`` it for a rebuild. The runner binds a fresh
view to each transaction (:meth:`Projection.bind_view`), so a view's rows and
the projection's tracked position always commit together.

Pure: no SQL here; the runner lives in ``goatherd.infrastructure``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import ClassVar, Final, Generic, Protocol, TypeVar, runtime_checkable

from goatherd.domain.log import LogEntry

__all__ = [
    "ALL_SCHEMAS",
    "Projection",
    "RowView",
    "View",
    "on",
]

ALL_SCHEMAS: Final = "*"
"""The wildcard schema ref: a handler registered for it sees every record."""

_HANDLES_ATTR: Final = "__goatherd_handles__"

Handler = Callable[..., None]
_F = TypeVar("_F", bound=Handler)


@runtime_checkable
class View(Protocol):
    """The storage of one read model, bound to the runner's current transaction."""

    def create(self) -> None:
        """Create the view's storage if it does not exist (idempotent)."""
        ...

    def drop(self) -> None:
        """Remove the view's storage and every row in it (idempotent)."""
        ...


ViewT = TypeVar("ViewT", bound=View)
RowT = TypeVar("RowT")


class RowView(View, Protocol[RowT]):
    """A keyed table of frozen row values: the view most read models need."""

    def get(self, key: str) -> RowT | None:
        """Return the row stored under ``key``, or ``None``."""
        ...

    def put(self, key: str, row: RowT) -> None:
        """Insert or replace the row under ``key`` (first insertion fixes its order)."""
        ...

    def rows(self) -> tuple[RowT, ...]:
        """Return every row in first-insertion order."""
        ...


def on(*schema_refs: str) -> Callable[[_F], _F]:
    """Mark a :class:`Projection` method as the handler of ``schema_refs``.

    Use :data:`ALL_SCHEMAS` to receive every record. The method is called as
    ``handler(self, view, entry)``.
    """

    def mark(method: _F) -> _F:
        setattr(
            method, _HANDLES_ATTR, (*getattr(method, _HANDLES_ATTR, ()), *schema_refs)
        )
        return method

    return mark


class Projection(Generic[ViewT]):
    """A read model: handlers per schema ref folding log entries into a view.

    Subclasses set ``name`` (unique per database) and ``version`` (bump it when
    the handlers or the view change: the runner then rebuilds the view from the
    start of the log), decorate handlers with :func:`on`, and implement
    :meth:`bind_view`.

    Attributes:
        handles: schema ref -> handler, collected from the :func:`on` marks
            (inherited marks included, a subclass's override wins).
    """

    name: ClassVar[str] = ""
    version: ClassVar[int] = 1
    handles: ClassVar[Mapping[str, Handler]] = {}

    def __init__(self, view_factory: Callable[[object], ViewT] | None = None) -> None:
        """Take an optional ``view_factory(transaction) -> view`` for bind_view."""
        self._view_factory = view_factory

    def __init_subclass__(cls) -> None:
        """Collect the handlers marked with :func:`on` into ``handles``."""
        super().__init_subclass__()
        found: dict[str, Handler] = {}
        for klass in reversed(cls.__mro__):
            for attr in vars(klass).values():
                for ref in getattr(attr, _HANDLES_ATTR, ()):
                    found[ref] = attr
        cls.handles = found

    def bind_view(self, transaction: object) -> ViewT:
        """Return this projection's view bound to the runner's ``transaction``.

        On SQL stores ``transaction`` is a SQLAlchemy ``Connection`` inside an
        open transaction; in-memory views may ignore it. The default calls the
        ``view_factory`` given at construction.

        Raises:
            NotImplementedError: without a factory and without an override.
        """
        if self._view_factory is None:
            raise NotImplementedError(
                f"{type(self).__name__} needs a view_factory or a bind_view override"
            )
        return self._view_factory(transaction)

    @property
    def schema_refs(self) -> frozenset[str] | None:
        """The schema refs the handlers read, or ``None`` if one reads every record."""
        if ALL_SCHEMAS in self.handles:
            return None
        return frozenset(self.handles)

    def apply(self, view: ViewT, entry: LogEntry) -> None:
        """Fold one entry into ``view``: its schema's handler, then the wildcard's."""
        handler = self.handles.get(entry.record.envelope.schema_ref)
        if handler is not None:
            handler(self, view, entry)
        wildcard = self.handles.get(ALL_SCHEMAS)
        if wildcard is not None:
            wildcard(self, view, entry)

    def fold(self, view: ViewT, entries: Iterable[LogEntry]) -> ViewT:
        """Fold ``entries`` in order into ``view`` and return it.

        Equivalent to :meth:`apply` per entry, with the dispatch hoisted out
        of the loop (the runner folds thousands of entries per batch).
        """
        handles = self.handles
        wildcard = handles.get(ALL_SCHEMAS)
        if wildcard is not None and len(handles) == 1:
            for entry in entries:
                wildcard(self, view, entry)
            return view
        for entry in entries:
            handler = handles.get(entry.record.envelope.schema_ref)
            if handler is not None:
                handler(self, view, entry)
            if wildcard is not None:
                wildcard(self, view, entry)
        return view
