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

from goatherd.domain.errors import GoatherdError
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

__all__ = ["MissingValueError", "ValueCache", "load_list"]

_CACHE_ENTRIES: Final = 256
# Live objects of the last few lists stored, for recognizing a list that grew;
# few, and none of the lists read, because every object held makes each
# garbage collection (and so every deserialization) slower.
_OBJECT_ENTRIES: Final = 8
_NODE_ENTRIES: Final = 65536
_K = TypeVar("_K")
_V = TypeVar("_V")
Stored = Blob | tuple[Blob, ...]
Nodes = Mapping[str, Mapping[str, object]]
ListNode = tuple[str | None, tuple[Blob | str, ...]]


class _NodeMissingError(LookupError):
    """A value node needed for a read is neither cached nor in the nodes read."""

    def __init__(self, digest: str) -> None:
        super().__init__(digest)
        self.digest = digest


def _msgpack_array_header(length: int) -> bytes:
    if length <= 15:
        return bytes([0x90 | length])
    if length <= 0xFFFF:
        return b"\xdc" + length.to_bytes(2, "big")
    return b"\xdd" + length.to_bytes(4, "big")


def load_list(serde: SerializerProtocol, items: Sequence[Blob]) -> list[Any]:
    """Deserialize list items; msgpack items decode as one array in one call."""
    if items and all(i.type == "msgpack" for i in items):
        joined = _msgpack_array_header(len(items)) + b"".join(i.data for i in items)
        value = serde.loads_typed(("msgpack", joined))
        if isinstance(value, list) and len(value) == len(items):
            return value
    return [serde.loads_typed((i.type, i.data)) for i in items]


class MissingValueError(GoatherdError, LookupError):
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
        self._objects: _Lru[str, tuple[object, ...]] = _Lru(_OBJECT_ENTRIES)
        self._nodes: _Lru[str, ListNode] = _Lru(_NODE_ENTRIES)

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
        start = self._extended_length(serde, value, base)
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
        self._remember(encoded.nodes)
        return encoded

    def _extended_length(
        self, serde: SerializerProtocol, value: list[Any], base: str | None
    ) -> int:
        """Return how many leading items ``value`` shares with the list ``base``.

        The objects of a list this cache stored are compared by identity or
        equality; a list known only as stored bytes (read back after a
        restart) is compared by serializing ``value``'s leading items once.
        """
        if base is None:
            return 0
        prefix = self._objects.get(base)
        if prefix is not None:
            return len(prefix) if _extends(value, prefix) else 0
        stored = self._stored.get(base)
        if not isinstance(stored, tuple) or len(stored) > len(value):
            return 0
        for item, blob in zip(value, stored, strict=False):
            if self.blob(serde, item) != blob:
                return 0
        return len(stored)

    def _remember(self, nodes: Sequence[Mapping[str, object]]) -> None:
        for node in nodes:
            if node.get("kind") == "list":
                base, items = list_node_links(node)
                self._nodes.put(str(node["digest"]), (base, tuple(items)))

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
        nodes: dict[str, Mapping[str, object]] = {}
        for digest in wanted:
            while digest not in found:
                try:
                    found[digest] = self._materialize(digest, nodes)
                except _NodeMissingError as missing:
                    if missing.digest in nodes:
                        raise MissingValueError(
                            f"value {missing.digest} is not readable"
                        ) from None
                    nodes.update(self._read_nodes(missing.digest))
        out: dict[str, Any] = {}
        for digest in wanted:
            stored = found[digest]
            if isinstance(stored, Blob):
                out[digest] = serde.loads_typed((stored.type, stored.data))
            else:
                out[digest] = load_list(serde, stored)
        return out

    def _record_of(self, digest: str) -> str:
        record_id = self._index.values.get(digest)
        if record_id is None:
            raise MissingValueError(
                f"no value record with digest {digest} in the trace"
            )
        return record_id

    def _read_nodes(self, digest: str) -> dict[str, Mapping[str, object]]:
        root = self._record_of(digest)
        closure = self._store.read_causal_closure(self._read_context, [root])
        nodes: dict[str, Mapping[str, object]] = {}
        for record in closure.facts_by_id.values():
            if (
                isinstance(record, Record)
                and record.envelope.schema_ref == SCHEMA_VALUE
            ):
                name = record.payload.get("digest")
                if isinstance(name, str):
                    nodes[name] = record.payload
        self._remember(list(nodes.values()))
        return nodes

    def _materialize(self, digest: str, nodes: Nodes) -> Stored:
        cached = self._stored.get(digest)
        if cached is not None:
            return cached
        stored: Stored
        if self._nodes.get(digest) is not None:
            stored = self._materialize_list(digest, nodes)
        else:
            node = nodes.get(digest)
            if node is None:
                raise _NodeMissingError(digest)
            if node.get("kind") == "list":
                stored = self._materialize_list(digest, nodes)
            else:
                stored = decode_blob(node, nodes)
        self._stored.put(digest, stored)
        return stored

    def _list_node(self, digest: str, nodes: Nodes) -> ListNode:
        known = self._nodes.get(digest)
        if known is not None:
            return known
        node = nodes.get(digest)
        if node is None:
            raise _NodeMissingError(digest)
        base, items = list_node_links(node)
        self._nodes.put(digest, (base, tuple(items)))
        return base, tuple(items)

    def _materialize_list(self, digest: str, nodes: Nodes) -> tuple[Blob, ...]:
        chain: list[tuple[Blob | str, ...]] = []
        cursor: str | None = digest
        prefix: tuple[Blob, ...] = ()
        while cursor is not None:
            cached = self._stored.get(cursor) if cursor != digest else None
            if isinstance(cached, tuple):
                prefix = cached
                break
            cursor, items = self._list_node(cursor, nodes)
            chain.append(items)
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
