"""The drafts of one saver append, with the value records it adds or reuses.

``_Drafts`` collects the record drafts of one append and adds each value
node once (citing stored or same-append parents); ``_blob_json`` is the
stored form of a serialized blob. Used by the write path and the thread
operations; imports the domain's records, the index and ``values`` only.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Mapping, Sequence

from goatherd.domain.records import CAPTURE, RecordDraft
from goatherd.integrations.langgraph.index import SCHEMA_VALUE, TraceIndex
from goatherd.integrations.langgraph.values import Blob, EncodedValue

__all__ = [
    "_Drafts",
    "_blob_json",
]


def _blob_json(blob: Blob) -> dict[str, object]:
    return {"type": blob.type, "data": base64.b64encode(blob.data).decode("ascii")}


class _Drafts:
    """The drafts of one append, with the value records it adds or reuses."""

    def __init__(self, index: TraceIndex) -> None:
        self._index = index
        self._local: dict[str, str] = {}
        self.drafts: list[RecordDraft] = []

    def parents(
        self, digests: Iterable[str]
    ) -> tuple[tuple[str, ...], tuple[str, ...]]:
        stored: list[str] = []
        local: list[str] = []
        for digest in dict.fromkeys(digests):
            if digest in self._local:
                local.append(self._local[digest])
            else:
                stored.append(self._index.values[digest])
        return tuple(stored), tuple(local)

    def add_value(self, encoded: EncodedValue) -> str:
        for node, links in zip(encoded.nodes, encoded.links, strict=True):
            digest = str(node["digest"])
            if digest in self._index.values or digest in self._local:
                continue
            stored, local = self.parents(links)
            name = f"value-{len(self._local)}"
            payload = dict(node)
            generation = self._index.erased.get(digest)
            if generation is not None:  # stored again after an erasure
                payload["generation"] = generation
            self.drafts.append(
                RecordDraft(
                    mode=CAPTURE,
                    schema_ref=SCHEMA_VALUE,
                    payload=payload,
                    append_local_id=name,
                    caused_by_fact_ids=stored,
                    caused_by_local_refs=local,
                )
            )
            self._local[digest] = name
        return encoded.digest

    def add(
        self,
        schema_ref: str,
        payload: Mapping[str, object],
        *,
        parents: Sequence[str] = (),
        values: Iterable[str] = (),
        mode: str = CAPTURE,
    ) -> None:
        stored, local = self.parents(values)
        self.drafts.append(
            RecordDraft(
                mode=mode,
                schema_ref=schema_ref,
                payload=payload,
                caused_by_fact_ids=tuple(dict.fromkeys([*parents, *stored])),
                caused_by_local_refs=local,
            )
        )
