r"""Canonical JSON encodings and the kernel digest (kernel-spec sections 1-2).

Two JSON flavours live here, because the reference runs both in one append path:

* the *digest* flavour (:func:`canonical_json_bytes`): sorted keys, compact
  separators, raw UTF-8 (``ensure_ascii`` off), NaN and infinities rejected. Record
  ids and witness digests hash these bytes behind the canonical prefix.
* the *storage* flavour (:func:`canonical_json_ascii_bytes`): the same, but every
  non-ASCII character is ``\uXXXX``-escaped. Context ids, batch digests, request
  digests and stored JSON use it.

Both flavours are strict: a value that is not plain JSON (a set, bytes, an object,
a non-string key, NaN, a lone surrogate, a cycle) raises a
:class:`~goatherd.domain.errors.CanonicalEncodingError` naming where in the value
it sits. Nothing is coerced. Tuples encode as arrays, exactly as the reference does.

Nothing in this module performs I/O.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Callable
from json.encoder import (  # type: ignore[attr-defined]
    c_make_encoder,
    encode_basestring,
    encode_basestring_ascii,
)
from typing import Final, TypeAlias

from goatherd.domain.errors import (
    CanonicalEncodingError,
    CanonicalTypeError,
    CanonicalValueError,
)

__all__ = [
    "ABI_VERSION",
    "CANONICAL_PREFIX",
    "CANONICAL_VERSION",
    "JSONValue",
    "canonical_digest",
    "canonical_json_ascii_bytes",
    "canonical_json_bytes",
    "canonical_json_text",
    "check_canonical",
    "sha256_hex",
    "storage_digest",
]

ABI_VERSION: Final = "shepherd.kernel.abi.v0"
CANONICAL_VERSION: Final = "shepherd.kernel.canonical.v2"
CANONICAL_PREFIX: Final = (CANONICAL_VERSION + "\n").encode("ascii")
_CANONICAL_PREFIX = CANONICAL_PREFIX
_sha256 = hashlib.sha256

JSONValue: TypeAlias = (
    bool
    | int
    | float
    | str
    | list["JSONValue"]
    | tuple["JSONValue", ...]
    | dict[str, "JSONValue"]
    | None
)
"""A plain JSON value as Python holds it (tuples are accepted as arrays)."""

# The C encoders are built once and called directly: ``json.dumps`` rebuilds one
# per call, which costs more than the whole key check below. No circular-marker
# table either: a cycle ends in RecursionError, and the diagnostic walk then
# names it precisely.
_digest_encoder: Final[Callable[[object, int], list[str]]] = c_make_encoder(
    None, None, encode_basestring, None, ":", ",", True, False, False
)
_storage_encoder: Final[Callable[[object, int], list[str]]] = c_make_encoder(
    None, None, encode_basestring_ascii, None, ":", ",", True, False, False
)
_SURROGATE_ESCAPE: Final = re.compile(r"\\ud[89a-f]", re.IGNORECASE)


def canonical_json_bytes(value: object, *, root: str = "payload") -> bytes:
    """Encode ``value`` as digest-flavour canonical JSON bytes.

    Byte-identical to the reference's ``json.dumps(value, sort_keys=True,
    separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode("utf-8")``
    for every plain JSON value.

    Args:
        value: a JSON value (dicts with ``str`` keys, lists, tuples, str, int,
            float, bool, None).
        root: the name used for the value in error paths (``payload.args[2]``).

    Raises:
        CanonicalTypeError: a value or key of a type JSON cannot hold.
        CanonicalValueError: NaN or an infinity, a lone surrogate, a cycle.
    """
    text = _encode(value, _digest_encoder, root)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        _walk_root(value, root)
        raise CanonicalValueError(root, "contains a lone surrogate") from None


def canonical_json_text(value: object, *, root: str = "payload") -> str:
    """Return the digest-flavour canonical JSON of ``value`` as text."""
    text = _encode(value, _digest_encoder, root)
    if not text.isascii():
        _ensure_utf8(text, value, root)
    return text


def canonical_json_ascii_bytes(value: object, *, root: str = "payload") -> bytes:
    r"""Encode ``value`` as storage-flavour JSON (non-ASCII escaped as ``\uXXXX``).

    The reference uses this flavour for retained-context ids, batch digests,
    request digests and stored JSON. The same strictness applies as for
    :func:`canonical_json_bytes`, including the rejection of lone surrogates, so
    a value that can be stored can always be digested too.
    """
    text = _encode(value, _storage_encoder, root)
    if "\\ud" in text and _SURROGATE_ESCAPE.search(text):
        # Astral characters legitimately escape as surrogate pairs; only a
        # surrogate escape can hide a lone surrogate, so walk only then.
        check_canonical(value, root=root)
    return text.encode("ascii")


def canonical_digest(value: object, *, root: str = "payload") -> str:
    """Return ``sha256:`` + hex of the canonical prefix followed by the JSON bytes.

    Every kernel identity (record ids, witness body digests) is this digest.
    """
    # Inlined fast path of canonical_json_bytes: this is the hottest call in
    # the kernel (every record id), and each Python frame costs here.
    try:
        text = "".join(_digest_encoder(value, 0))
        _check_keys(value)
        data = text.encode("utf-8")
    except (TypeError, ValueError, RecursionError):
        data = canonical_json_bytes(value, root=root)
    return "sha256:" + _sha256(_CANONICAL_PREFIX + data).hexdigest()


def storage_digest(value: object, *, root: str = "value") -> str:
    """Return the bare SHA-256 hex of the storage-flavour JSON of ``value``."""
    return hashlib.sha256(canonical_json_ascii_bytes(value, root=root)).hexdigest()


def sha256_hex(text: str) -> str:
    """Return the bare SHA-256 hex digest of the UTF-8 bytes of ``text``."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def check_canonical(value: object, *, root: str = "payload") -> None:
    """Raise the precise encoding error for ``value``, or return if it is plain JSON.

    This is the slow, exhaustive walk: it tracks ancestors (so a value shared
    twice is fine but a cycle is not), checks every key and scalar and names the
    first offending path.
    """
    _walk_root(value, root)


def _encode(
    value: object, encoder: Callable[[object, int], list[str]], root: str
) -> str:
    try:
        text = "".join(encoder(value, 0))
    except (TypeError, ValueError, RecursionError) as exc:
        _walk_root(value, root)
        # The walk accepted what the encoder refused (for example an integer
        # beyond Python's digit limit): report the encoder's own reason.
        raise CanonicalValueError(root, str(exc)) from exc
    try:
        _check_keys(value)
    except (TypeError, RecursionError):
        _walk_root(value, root)
        raise
    return text


def _ensure_utf8(text: str, value: object, root: str) -> None:
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            _walk_root(value, root)
            raise CanonicalValueError(root, "contains a lone surrogate") from None


def _check_keys(value: object) -> None:
    # The C encoder silently stringifies int/float/bool/None keys; the kernel
    # refuses them so that no digest depends on that coercion. ``"".join`` over
    # a dict checks every key is a str at C speed; only containers recurse.
    # Container subclasses are not walked here: the encoder accepted them, and
    # they are checked by _walk_subclass.
    if type(value) is dict:
        "".join(value)
        value = value.values()
    elif type(value) is not list and type(value) is not tuple:
        if isinstance(value, dict | list | tuple):
            _check_subclass(value)
        return
    # Scalars are most items: test for them first, with one type() call.
    for item in value:
        kind = type(item)
        if kind in _SCALARS:
            continue
        if kind in _CONTAINERS:
            _check_keys(item)
        else:
            _check_subclass(item)


def _check_subclass(value: object) -> None:
    try:
        _walk_root(value, "")
    except CanonicalEncodingError as exc:
        raise TypeError(exc.reason) from None


_CONTAINERS: Final = frozenset({dict, list, tuple})
_SCALARS: Final = frozenset({str, int, float, bool, type(None)})


def _walk_root(value: object, root: str) -> None:
    # Deep nesting exhausts the interpreter's stack in the walk as in the
    # encoder: report it as the value's fault, never as a RecursionError.
    try:
        _walk(value, root, set())
    except RecursionError:
        raise CanonicalValueError(
            root, "nests too deeply (beyond the interpreter's recursion limit)"
        ) from None


def _walk(value: object, path: str, ancestors: set[int]) -> None:
    if isinstance(value, str):
        _check_string(value, path)
    elif isinstance(value, bool | int) or value is None:
        return
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise CanonicalValueError(
                path, f"{value!r} is not a JSON number (NaN and infinities are refused)"
            )
    elif isinstance(value, dict):
        _walk_container(value, path, ancestors, _walk_dict)
    elif isinstance(value, list | tuple):
        _walk_container(value, path, ancestors, _walk_list)
    else:
        raise CanonicalTypeError(
            path, f"value of type {type(value).__name__} is not JSON serializable"
        )


def _walk_container(
    value: dict[object, object] | list[object] | tuple[object, ...],
    path: str,
    ancestors: set[int],
    walker: Callable[[object, str, set[int]], None],
) -> None:
    marker = id(value)
    if marker in ancestors:
        raise CanonicalValueError(
            path, "cyclic reference (a container contains itself)"
        )
    ancestors.add(marker)
    try:
        walker(value, path, ancestors)
    finally:
        ancestors.discard(marker)


def _walk_dict(value: object, path: str, ancestors: set[int]) -> None:
    assert isinstance(value, dict)
    for key, item in value.items():
        if not isinstance(key, str):
            raise CanonicalTypeError(
                f"{path}[{key!r}]",
                f"object key of type {type(key).__name__} (keys must be strings)",
            )
        _check_string(key, f"{path}[{key!r}]")
        _walk(
            item,
            f"{path}.{key}" if key.isidentifier() else f"{path}[{key!r}]",
            ancestors,
        )


def _walk_list(value: object, path: str, ancestors: set[int]) -> None:
    assert isinstance(value, list | tuple)
    for index, item in enumerate(value):
        _walk(item, f"{path}[{index}]", ancestors)


def _check_string(value: str, path: str) -> None:
    if value.isascii():
        return
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        bad = value[exc.start]
        raise CanonicalValueError(
            path,
            f"lone surrogate U+{ord(bad):04X} at index {exc.start} is not valid text",
        ) from None
