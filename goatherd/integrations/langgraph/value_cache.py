"""Reading and writing channel values: serialization, records and caches.

Value records are immutable and addressed by digest, so the caches here never
go stale; they hold serialized bytes (every read deserializes fresh objects)
and, per list value, the objects last stored or returned, which is how a list
that grew is recognized and stored as its new items only.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any, Final, Generic, TypeVar

from langgraph.checkpoint.serde.base import SerializerProtocol

from goatherd.domain.records import Record
from goatherd.domain.store import ReadAuthority, TraceStore
from goatherd.integrations.langgraph.index import SCHEMA_VALUE, TraceIndex
from goatherd.integrations.langgraph.values import (
    Blob,
    EncodedValue,
    MalformedValueError,
    ValueLimits,
    decode_blob,
    encode_blob,
    encode_list,
    list_node_links,
)

__all__ = ["MissingValueError", "ValueCache"]

_CACHE_ENTRIES: Final = 256
_K = TypeVar("_K")
_V = TypeVar("_V")
Stored = Blob | tuple[Blob, ...]
Nodes = Mapping[str, Mapping[str, object]]


class MissingValueError(LookupError):
    """A checkpoint or write names a value record the trace does not hold."""


class _Lru(Generic[_K, _V]):
    """A small least-recently-used map (not thread-safe: the saver locks)."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._items: OrderedDict[_K, _V] = OrderedDict()

    def get(self, key: _K) -> _V | None:
        value = self._items.get(key)
        if value is not None:
            self._items.move_to_end(key)
        return value

    def put(self, key: _K, value: _V) -> None:
        self._items[key] = value
        self._items.move_to_end(key)
        while len(self._items) > self._size:
            self._items.popitem(last=False)


def _same_item(left: object, right: object) -> bool:
    if left is right:
        return True
    if type(left) is not type(right):
        return False
    try:
        return bool(left == right)
    except Exception:  # an __eq__ that cannot answer means "not the same"
        return False


def _extends(value: list[Any], prefix: tuple[object, ...]) -> bool:
    return len(value) >= len(prefix) and all(
        _same_item(a, b) for a, b in zip(value, prefix, strict=False)
    )


class ValueCache:
    """Encodes values for appending and decodes value records read from a trace."""

    def __init__(
        self,
        store: TraceStore,
        index: TraceIndex,
        limits: ValueLimits,
        read_context: ReadAuthority,
    ) -> None:
        """Read value records through ``store``, finding them in ``index``."""
        self._store = store
        self._index = index
        self._limits = limits
        self._read_context = read_context
        self._stored: _Lru[str, Stored] = _Lru(_CACHE_ENTRIES)
        self._objects: _Lru[str, tuple[object, ...]] = _Lru(_CACHE_ENTRIES)

    # ---------------------------------------------------------------- write

    @staticmethod
    def blob(serde: SerializerProtocol, value: Any) -> Blob:
        """Serialize one value with ``serde``."""
        kind, data = serde.dumps_typed(value)
        return Blob(kind, data)

    def encode(
        self, serde: SerializerProtocol, value: Any, base: str | None
    ) -> EncodedValue:
        """Encode a channel value; ``base`` is the digest it may extend."""
        if type(value) is not list:
            blob = self.blob(serde, value)
            encoded = encode_blob(blob, self._limits)
            self._stored.put(encoded.digest, blob)
            return encoded
        prefix = self._objects.get(base) if base is not None else None
        start = len(prefix) if prefix is not None and _extends(value, prefix) else 0
        items = tuple(self.blob(serde, v) for v in value[start:])
        if start:
            assert base is not None
            encoded = encode_list(base, items, self._limits, base_length=start)
            known = self._stored.get(base)
            if isinstance(known, tuple):
                self._stored.put(encoded.digest, (*known, *items))
        else:
            encoded = encode_list(None, items, self._limits)
            self._stored.put(encoded.digest, items)
        self._objects.put(encoded.digest, tuple(value))
        return encoded

    # ----------------------------------------------------------------- read

    def values(
        self, serde: SerializerProtocol, digests: Sequence[str]
    ) -> dict[str, Any]:
        """Deserialize the values ``digests`` address (fresh objects per call).

        Raises:
            MissingValueError: a digest with no readable value record.
            MalformedValueError: a value record that does not match its digest.
        """
        wanted = list(dict.fromkeys(digests))
        found = {d: s for d in wanted if (s := self._stored.get(d)) is not None}
        missing = [d for d in wanted if d not in found]
        if missing:
            nodes = self._read_nodes(missing)
            for digest in missing:
                found[digest] = self._materialize(digest, nodes)
        out: dict[str, Any] = {}
        for digest in wanted:
            stored = found[digest]
            if isinstance(stored, Blob):
                out[digest] = serde.loads_typed((stored.type, stored.data))
            else:
                value = [serde.loads_typed((i.type, i.data)) for i in stored]
                self._objects.put(digest, tuple(value))
                out[digest] = value
        return out

    def _record_of(self, digest: str) -> str:
        record_id = self._index.values.get(digest)
        if record_id is None:
            raise MissingValueError(
                f"no value record with digest {digest} in the trace"
            )
        return record_id

    def _read_nodes(self, digests: Sequence[str]) -> dict[str, Mapping[str, object]]:
        roots = [self._record_of(d) for d in digests]
        closure = self._store.read_causal_closure(self._read_context, roots)
        nodes: dict[str, Mapping[str, object]] = {}
        for record in closure.facts_by_id.values():
            if (
                isinstance(record, Record)
                and record.envelope.schema_ref == SCHEMA_VALUE
            ):
                digest = record.payload.get("digest")
                if isinstance(digest, str):
                    nodes[digest] = record.payload
        return nodes

    def _node(self, digest: str, nodes: Nodes) -> Mapping[str, object]:
        node = nodes.get(digest)
        if node is None:
            raise MissingValueError(
                f"value record {self._record_of(digest)} ({digest}) is not readable"
            )
        return node

    def _materialize(self, digest: str, nodes: Nodes) -> Stored:
        cached = self._stored.get(digest)
        if cached is not None:
            return cached
        node = self._node(digest, nodes)
        stored: Stored
        if node.get("kind") == "list":
            stored = self._materialize_list(digest, nodes)
        else:
            stored = decode_blob(node, nodes)
        self._stored.put(digest, stored)
        return stored

    def _materialize_list(self, digest: str, nodes: Nodes) -> tuple[Blob, ...]:
        chain: list[list[Blob | str]] = []
        cursor: str | None = digest
        prefix: tuple[Blob, ...] = ()
        while cursor is not None:
            cached = self._stored.get(cursor) if cursor != digest else None
            if isinstance(cached, tuple):
                prefix = cached
                break
            base, items = list_node_links(self._node(cursor, nodes))
            chain.append(items)
            cursor = base
        flat = list(prefix)
        for items in reversed(chain):
            for item in items:
                if isinstance(item, Blob):
                    flat.append(item)
                    continue
                nested = self._materialize(item, nodes)
                if not isinstance(nested, Blob):
                    raise MalformedValueError(f"list item {item} is not a single value")
                flat.append(nested)
        return tuple(flat)
