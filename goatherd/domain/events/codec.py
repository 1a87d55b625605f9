"""How an event class's fields meet a payload: one decoder per field, chosen once.

The strict decoding behind :func:`~goatherd.domain.events.base.decode_payload`:
the specs of a class's payload keys (read from its dataclass fields and type
hints, checked once for a supported type), the per-type decoders that name
the payload path a value does not fit, and the encoding of field values back
to JSON. Private to the events package: ``base`` imports it, and it imports
nothing of the package (it is typed over any event class, ``_E``).
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any, Final, TypeVar, Union

from goatherd.domain.workspace import WorkspaceState

_E = TypeVar("_E")

# Nothing public: ``base`` imports the private names it builds on.
__all__: list[str] = []


_BASE_FIELDS: Final = frozenset({"caused_by", "extensions"})


class _MismatchError(Exception):
    """A payload value does not fit its field (internal to decoding)."""


@dataclass(frozen=True, slots=True)
class _Spec:
    """One payload key of an event class.

    ``optional`` keys may be absent (a ``None`` default); ``nullable`` keys
    are always present and may be ``null``.
    """

    name: str
    key: str
    hint: Any
    optional: bool
    nullable: bool
    # Chosen once from the hint (the generic ``_decode`` asked the hint's
    # origin per value), with the path its errors name.
    decode: Callable[[Any, str], Any]
    path: str


_SPECS: dict[type, tuple[_Spec, ...]] = {}
_KEYS: dict[type, frozenset[str]] = {}


def _specs(cls: type) -> tuple[_Spec, ...]:
    specs = _SPECS.get(cls)
    if specs is not None:
        return specs
    hints = typing.get_type_hints(cls)
    found: list[_Spec] = []
    for spec in dataclasses.fields(cls):
        if spec.name in _BASE_FIELDS:
            continue
        full = hints[spec.name]
        hint = _strip_none(full)
        optional = spec.default is None
        nullable = (hint is not full or hint is Any) and not optional
        _check_supported(cls, spec.name, hint)
        key = spec.metadata.get("key", spec.name)
        found.append(
            _Spec(
                spec.name,
                key,
                hint,
                optional,
                nullable,
                _decoder(hint),
                f"payload.{key}",
            )
        )
    specs = tuple(found)
    _KEYS[cls] = frozenset(spec.key for spec in specs)
    _SPECS[cls] = specs
    return specs


def _strip_none(hint: Any) -> Any:
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    if typing.get_origin(hint) in (Union, types.UnionType) and len(args) == 1:
        return args[0]
    return hint


_SCALARS: Final = (str, int, bool)


def _check_supported(cls: type, name: str, hint: Any) -> None:
    origin = typing.get_origin(hint)
    if hint in _SCALARS or hint in (WorkspaceState, Any) or origin is Mapping:
        return
    if origin is tuple and hint.__args__[1:] == (Ellipsis,):
        _check_supported(cls, name, hint.__args__[0])
        return
    if isinstance(hint, type) and issubclass(hint, str):  # a StrEnum
        return
    raise TypeError(f"{cls.__qualname__}.{name}: unsupported field type {hint!r}")


def _build(cls: type[_E], payload: Mapping[str, Any], caused_by: tuple[str, ...]) -> _E:
    if not isinstance(payload, Mapping):
        raise _MismatchError("the payload is not an object")
    values: dict[str, Any] = {}
    extensions: dict[str, Any] = {}
    specs = _specs(cls)
    for spec in specs:
        if spec.key not in payload:
            if not spec.optional:
                raise _MismatchError(f"payload.{spec.key} is missing")
            continue
        raw = payload[spec.key]
        if raw is None and spec.nullable:
            values[spec.name] = None
            continue
        if raw is None and spec.optional:
            extensions[spec.key] = None  # an explicit null, re-emitted as is
            continue
        values[spec.name] = spec.decode(raw, spec.path)
    known = _KEYS[cls]
    for key, value in payload.items():
        if key not in known:
            extensions[key] = value
    make: Callable[..., _E] = cls  # an event class: its fields are keywords
    return make(caused_by=caused_by, extensions=extensions, **values)


def _decoder(hint: Any) -> Callable[[Any, str], Any]:
    """Return the function that decodes a value of ``hint`` (as ``_decode`` does)."""
    if hint is Any:
        return _decode_any
    if hint is bool:
        return _decode_bool
    if hint is int:
        return _decode_int
    if hint is str:
        return _decode_str
    if hint is WorkspaceState:
        return _decode_state
    origin = typing.get_origin(hint)
    if origin is Mapping:
        return lambda value, path: _decode_mapping(value, hint, path)
    if origin is tuple:
        item = _decoder(hint.__args__[0])

        def decode_tuple(value: Any, path: str) -> Any:
            if not isinstance(value, list):
                raise _MismatchError(f"{path} must be an array, got {_kind(value)}")
            return tuple(item(v, f"{path}[{i}]") for i, v in enumerate(value))

        return decode_tuple
    return lambda value, path: _decode_enum(value, hint, path)


def _decode_any(value: Any, path: str) -> Any:
    return value


def _decode_bool(value: Any, path: str) -> Any:
    if not isinstance(value, bool):
        raise _MismatchError(f"{path} must be a boolean, got {_kind(value)}")
    return value


def _decode_int(value: Any, path: str) -> Any:
    if isinstance(value, bool) or not isinstance(value, int):
        raise _MismatchError(f"{path} must be an integer, got {_kind(value)}")
    return value


def _decode_str(value: Any, path: str) -> Any:
    if not isinstance(value, str):
        raise _MismatchError(f"{path} must be a string, got {_kind(value)}")
    return value


def _decode_enum(value: Any, hint: type, path: str) -> Any:
    if not isinstance(value, str):
        raise _MismatchError(f"{path} must be a string, got {_kind(value)}")
    try:
        return hint(value)
    except ValueError:
        raise _MismatchError(f"{path} is {value!r}, not a known value") from None


def _decode_mapping(value: Any, hint: Any, path: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise _MismatchError(f"{path} must be an object, got {_kind(value)}")
    item = hint.__args__[1]
    if item is str:
        for key, inner in value.items():
            if not isinstance(inner, str):
                raise _MismatchError(
                    f"{path}.{key} must be a string, got {_kind(inner)}"
                )
    return dict(value)


_STATE_KEYS: Final = frozenset({"backend", "revision", "data"})


def _decode_state(value: Any, path: str) -> WorkspaceState:
    if not isinstance(value, Mapping) or set(value) != _STATE_KEYS:
        raise _MismatchError(f"{path} must be a {{backend, revision, data}} object")
    try:
        state = WorkspaceState.from_json(value)
    except (TypeError, ValueError) as error:
        raise _MismatchError(f"{path}: {error}") from None
    if state.to_json() != dict(value):
        raise _MismatchError(f"{path} does not round-trip as a workspace state")
    return state


def _encode(value: Any) -> Any:
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, WorkspaceState):
        return value.to_json()
    if isinstance(value, tuple):
        return [_encode(v) for v in value]
    if isinstance(value, Mapping):
        return dict(value)
    return value


def _kind(value: object) -> str:
    if value is None:
        return "null"
    return {
        bool: "a boolean",
        int: "an integer",
        float: "a number",
        str: "a string",
        list: "an array",
        dict: "an object",
    }.get(type(value), type(value).__name__)
