"""Channel values as content-addressed value records of bounded size.

A serialized value (the serializer's ``(type, bytes)`` pair) is stored once per
distinct digest:

- ``blob``: the whole value inline, when it fits in one chunk;
- ``chunked``: a larger value, split into ``part`` records of one chunk each;
- ``list``: a Python list as a chain of nodes, each holding at most
  ``max_list_items`` items and one chunk of inline bytes and naming the node
  it extends (``base``). A list that grows by one message per step stores one
  small node per step, not the whole list again. Items too large to sit inline
  are their own ``blob``/``chunked`` value, referenced by digest.

Every record's payload is therefore bounded (see :class:`ValueLimits`).
Pure: no I/O; the saver reads and writes the records.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from goatherd.domain.errors import GoatherdError

__all__ = [
    "Blob",
    "DEFAULT_LIMITS",
    "EncodedValue",
    "MalformedValueError",
    "ValueLimits",
    "blob_digest",
    "decode_blob",
    "encode_blob",
    "encode_list",
    "list_digest",
    "list_node_links",
]

_VALUE_TAG: Final = b"goatherd.langgraph.value\x00"
_PART_TAG: Final = b"goatherd.langgraph.part\x00"
_LIST_TAG: Final = "goatherd.langgraph.list"


class MalformedValueError(GoatherdError, ValueError):
    """A value record does not have the shape or digest this saver writes."""


@dataclass(frozen=True, slots=True)
class ValueLimits:
    """Bounds on the records the saver writes.

    Attributes:
        chunk_bytes: raw bytes per ``blob``/``part`` record and per ``list``
            node's inline items (base64 makes the payload 4/3 of this).
        inline_item_bytes: list items up to this size sit inline in a node;
            larger ones are their own value.
        max_list_items: items per ``list`` node.
    """

    chunk_bytes: int = 48 * 1024
    inline_item_bytes: int = 8 * 1024
    max_list_items: int = 256

    def __post_init__(self) -> None:
        """Refuse bounds that cannot hold a value."""
        if self.chunk_bytes < 1 or self.max_list_items < 1:
            raise ValueError("chunk_bytes and max_list_items must be positive")
        if not 0 <= self.inline_item_bytes <= self.chunk_bytes:
            raise ValueError("inline_item_bytes must be between 0 and chunk_bytes")


DEFAULT_LIMITS: Final = ValueLimits()


@dataclass(frozen=True, slots=True)
class Blob:
    """A serialized value: the serializer's type tag and bytes."""

    type: str
    data: bytes


@dataclass(frozen=True, slots=True)
class EncodedValue:
    """The records that store one value, and the digest that addresses it.

    ``nodes`` are payloads in dependency order (a node after the nodes it
    names); each node's ``links`` are the digests it cites as causal parents.
    """

    digest: str
    nodes: tuple[Mapping[str, object], ...] = ()
    links: tuple[tuple[str, ...], ...] = field(default=())


def blob_digest(blob: Blob) -> str:
    """Return the digest that addresses a serialized value."""
    h = hashlib.sha256(_VALUE_TAG)
    h.update(blob.type.encode("utf-8"))
    h.update(b"\x00")
    h.update(blob.data)
    return h.hexdigest()


def list_digest(base: str | None, item_digests: Sequence[str]) -> str:
    """Return the digest of a ``list`` node: its base and its items' digests."""
    text = "\x00".join([_LIST_TAG, base or "", *item_digests])
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def encode_blob(blob: Blob, limits: ValueLimits = DEFAULT_LIMITS) -> EncodedValue:
    """Encode one serialized value as a ``blob`` or a ``chunked`` value."""
    digest = blob_digest(blob)
    if len(blob.data) <= limits.chunk_bytes:
        node = {"digest": digest, "kind": "blob", "type": blob.type}
        node["data"] = _b64(blob.data)
        return EncodedValue(digest, (node,), ((),))
    nodes: list[Mapping[str, object]] = []
    parts: list[str] = []
    for start in range(0, len(blob.data), limits.chunk_bytes):
        chunk = blob.data[start : start + limits.chunk_bytes]
        part = hashlib.sha256(_PART_TAG + chunk).hexdigest()
        if part not in parts:
            nodes.append({"digest": part, "kind": "part", "data": _b64(chunk)})
        parts.append(part)
    head = {
        "digest": digest,
        "kind": "chunked",
        "type": blob.type,
        "size": len(blob.data),
        "parts": parts,
    }
    links = [()] * len(nodes) + [tuple(dict.fromkeys(parts))]
    return EncodedValue(digest, (*nodes, head), tuple(links))


def encode_list(
    base: str | None,
    items: Sequence[Blob],
    limits: ValueLimits = DEFAULT_LIMITS,
    *,
    base_length: int = 0,
) -> EncodedValue:
    """Encode ``items`` appended to the list value ``base`` (``None``: a new list).

    Returns a chain of ``list`` nodes; the last node's digest addresses the
    whole list. An empty ``items`` with no base encodes the empty list.
    """
    nodes: list[Mapping[str, object]] = []
    links: list[tuple[str, ...]] = []
    length = base_length
    pending: list[object] = []
    pending_digests: list[str] = []
    pending_refs: list[str] = []
    inline_bytes = 0

    def flush() -> None:
        nonlocal base, inline_bytes
        digest = list_digest(base, pending_digests)
        nodes.append(
            {
                "digest": digest,
                "kind": "list",
                "base": base,
                "length": length,
                "items": list(pending),
            }
        )
        links.append(tuple(dict.fromkeys([*([base] if base else []), *pending_refs])))
        base = digest
        pending.clear()
        pending_digests.clear()
        pending_refs.clear()
        inline_bytes = 0

    for item in items:
        inline = len(item.data) <= limits.inline_item_bytes
        size = len(item.data) if inline else 0
        if pending and (
            len(pending) >= limits.max_list_items
            or inline_bytes + size > limits.chunk_bytes
        ):
            flush()
        length += 1
        if inline:
            pending.append({"type": item.type, "data": _b64(item.data)})
            pending_digests.append(blob_digest(item))
            inline_bytes += size
        else:
            encoded = encode_blob(item, limits)
            nodes.extend(encoded.nodes)
            links.extend(encoded.links)
            pending.append({"ref": encoded.digest})
            pending_digests.append(encoded.digest)
            pending_refs.append(encoded.digest)
    if pending or base is None:
        flush()
    assert base is not None
    return EncodedValue(base, tuple(nodes), tuple(links))


def _text(payload: Mapping[str, object], key: str, where: str) -> str:
    value = payload.get(key)
    if not isinstance(value, str):
        raise MalformedValueError(f"{where}: {key!r} must be a string")
    return value


def _bytes(payload: Mapping[str, object], key: str, where: str) -> bytes:
    try:
        return base64.b64decode(_text(payload, key, where), validate=True)
    except (binascii.Error, ValueError) as error:
        raise MalformedValueError(f"{where}: {key!r} is not base64") from error


def decode_blob(
    payload: Mapping[str, object], parts: Mapping[str, Mapping[str, object]]
) -> Blob:
    """Rebuild a ``blob`` or ``chunked`` value and check it against its digest.

    Args:
        payload: the value record's payload.
        parts: ``part`` payloads by digest (for ``chunked``).

    Raises:
        MalformedValueError: a missing field, a missing part, or a digest that
            does not match the bytes.
    """
    digest = _text(payload, "digest", "value record")
    where = f"value {digest}"
    kind = payload.get("kind")
    if kind == "blob":
        blob = Blob(_text(payload, "type", where), _bytes(payload, "data", where))
    elif kind == "chunked":
        names = payload.get("parts")
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise MalformedValueError(f"{where}: 'parts' must be a list of digests")
        chunks = []
        for name in names:
            part = parts.get(name)
            if part is None:
                raise MalformedValueError(f"{where}: part {name} is missing")
            chunks.append(_bytes(part, "data", f"part {name}"))
        blob = Blob(_text(payload, "type", where), b"".join(chunks))
    else:
        raise MalformedValueError(f"{where}: kind {kind!r} is not a blob")
    if blob_digest(blob) != digest:
        raise MalformedValueError(f"{where}: the bytes do not match the digest")
    return blob


def list_node_links(
    payload: Mapping[str, object],
) -> tuple[str | None, list[Blob | str]]:
    """Return a ``list`` node's base digest and its items (inline or a digest).

    Raises:
        MalformedValueError: the node does not have the ``list`` shape.
    """
    where = f"list value {payload.get('digest')!r}"
    base = payload.get("base")
    items = payload.get("items")
    if base is not None and not isinstance(base, str):
        raise MalformedValueError(f"{where}: 'base' must be a digest or null")
    if not isinstance(items, list):
        raise MalformedValueError(f"{where}: 'items' must be a list")
    out: list[Blob | str] = []
    digests: list[str] = []
    for item in items:
        if not isinstance(item, dict):
            raise MalformedValueError(f"{where}: an item is not an object")
        if "ref" in item:
            ref = _text(item, "ref", where)
            out.append(ref)
            digests.append(ref)
        else:
            blob = Blob(_text(item, "type", where), _bytes(item, "data", where))
            out.append(blob)
            digests.append(blob_digest(blob))
    if list_digest(base, digests) != payload.get("digest"):
        raise MalformedValueError(f"{where}: the items do not match the digest")
    return base, out
