"""The runtime state read model: the runtime's own fold, kept in views.

:class:`RuntimeStateProjection` folds every runtime record with the same
:class:`~goatherd.domain.RuntimeFold` the runtime decides on, into a
:class:`RuntimeStateView`: the scopes, checkpoints and retained outputs
tables of the database (or memory). So the scope tree the trace UI shows,
what ``recover`` answers and what a manager decides on are one computation;
rebuilding the view from an empty one gives the same rows
(``goatherd.testing.assert_replay_equivalent`` proves it for any trace).

Rows are the aggregates themselves, stored as JSON by
:func:`encode_aggregate` / :func:`decode_aggregate`.

Pure: no SQL here; infrastructure binds the view to tables.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Mapping
from enum import Enum
from typing import Any, Final, Protocol, TypeVar

from goatherd.domain import (
    Catalog,
    CheckpointAggregate,
    LogEntry,
    RetainedOutputAggregate,
    RuntimeFold,
    ScopeAggregate,
    WorkspaceState,
    decode_fact,
    runtime_fold_schemas,
)
from goatherd.projections.framework import Projection, View, on

__all__ = [
    "Aggregate",
    "RuntimeStateProjection",
    "RuntimeStateView",
    "decode_aggregate",
    "encode_aggregate",
    "listed_scopes",
    "scope_json",
]

Aggregate = ScopeAggregate | CheckpointAggregate | RetainedOutputAggregate
AggT = TypeVar("AggT", ScopeAggregate, CheckpointAggregate, RetainedOutputAggregate)
_RUNTIME_SCHEMAS: Final = tuple(sorted(runtime_fold_schemas()))


class RuntimeStateView(Catalog, View, Protocol):
    """The runtime state's storage: a :class:`~goatherd.domain.Catalog` plus rows."""

    def scope_rows(self) -> tuple[ScopeAggregate, ...]:
        """Return every scope, in first-fold order."""
        ...

    def checkpoint_rows(self) -> tuple[CheckpointAggregate, ...]:
        """Return every checkpoint, in first-fold order."""
        ...

    def output_rows(self) -> tuple[RetainedOutputAggregate, ...]:
        """Return every output, in first-fold order."""
        ...


class RuntimeStateProjection(Projection[RuntimeStateView]):
    """Fold runtime records into scopes, checkpoints and outputs."""

    name = "goatherd.runtime_state"
    version = 1

    @on(*_RUNTIME_SCHEMAS)
    def fold_record(self, view: RuntimeStateView, entry: LogEntry) -> None:
        """Decode the record and fold it (a record that does not decode raises)."""
        fact = decode_fact(entry.record, entry.position, entry.append_intent_id)
        RuntimeFold(view).apply(fact)


def listed_scopes(scopes: tuple[ScopeAggregate, ...]) -> tuple[ScopeAggregate, ...]:
    """Return the scopes the runtime lists (known as scopes, not pruned)."""
    return tuple(s for s in scopes if s.listed and not s.pruned)


def scope_json(scope: ScopeAggregate) -> dict[str, Any]:
    """Return a scope as the trace UI and the CLI show it."""
    return {**encode_aggregate(scope), "scope_id": scope.scope_id}


# ------------------------------------------------------------------ the codec


def encode_aggregate(aggregate: Aggregate) -> dict[str, Any]:
    """Return an aggregate as plain JSON values (its fields, by name)."""
    return {
        spec.name: _encode(getattr(aggregate, spec.name))
        for spec in dataclasses.fields(aggregate)
    }


def decode_aggregate(cls: type[AggT], data: Mapping[str, Any]) -> AggT:
    """Rebuild an aggregate of ``cls`` from :func:`encode_aggregate`'s output.

    Raises:
        ValueError: the data does not describe ``cls``'s fields.
    """
    hints = _hints(cls)
    if set(data) != set(hints):
        raise ValueError(f"{cls.__name__} row fields {sorted(data)} != {sorted(hints)}")
    values = {name: _decode(data[name], hint) for name, hint in hints.items()}
    return cls(**values)


_HINTS: dict[type, dict[str, Any]] = {}


def _hints(cls: type) -> dict[str, Any]:
    found = _HINTS.get(cls)
    if found is None:
        hints = typing.get_type_hints(cls)
        found = {spec.name: hints[spec.name] for spec in dataclasses.fields(cls)}
        _HINTS[cls] = found
    return found


def _encode(value: Any) -> Any:
    if isinstance(value, WorkspaceState):
        return value.to_json()
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, tuple):
        return [_encode(item) for item in value]
    if isinstance(value, Mapping):
        return dict(value)
    return value


def _decode(value: Any, hint: Any) -> Any:
    if value is None:
        return None
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    if typing.get_origin(hint) in (typing.Union, type(int | None)) and len(args) == 1:
        hint = args[0]
    if hint is WorkspaceState:
        return WorkspaceState.from_json(value)
    if isinstance(hint, type) and issubclass(hint, Enum):
        return hint(value)
    if typing.get_origin(hint) is tuple:
        item = hint.__args__[0]
        return tuple(_decode(v, item) for v in value)
    if typing.get_origin(hint) is Mapping:
        return dict(value)
    return value
