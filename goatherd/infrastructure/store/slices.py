"""Assemble a :class:`TraceSlice` from a traversal (kernel-spec 7.8 and 7.9).

Shared by the three slice reads. Input: the traversal's path entries in order,
the visibility profile, the mode filter, whether external anchors are on, and
the cut (for cut reads). Every lookup goes through the :class:`StoreReader`,
which fetches set-wise and serves repeated content from the cache.
"""

from __future__ import annotations

from collections.abc import Sequence

from goatherd.domain.errors import ReadRequestError, TraceStoreError
from goatherd.domain.identity import ROOT_WITNESS_SCHEMA_REF, WITNESS_SCHEMA_REF
from goatherd.domain.records import (
    MODE_FILTERS,
    ContextAnchor,
    Cut,
    ExternalAnchor,
    ModeFilter,
    Record,
    RecordShape,
    RetainedContext,
    TraceSlice,
    VisibilityProfile,
    VisibleRecord,
    WitnessAnchor,
)
from goatherd.infrastructure.store.builders import build_record, build_view
from goatherd.infrastructure.store.reader import EntryRow, RecordContent, StoreReader

__all__ = ["assemble_slice", "check_mode_filter", "visible_record"]

_WITNESS_SCHEMAS = (ROOT_WITNESS_SCHEMA_REF, WITNESS_SCHEMA_REF)
_MODES_KEPT = {
    ModeFilter.BOTH: ("capture", "declaration"),
    ModeFilter.CAPTURES_ONLY: ("capture",),
    ModeFilter.DECLARATIONS_ONLY: ("declaration",),
}


def check_mode_filter(mode_filter: str) -> None:
    """Raise ``ReadRequestError`` for an unknown mode filter."""
    if mode_filter not in MODE_FILTERS:
        raise ReadRequestError(f"unknown mode filter: {mode_filter}")


def visible_record(
    content: RecordContent, entry: EntryRow, profile: str
) -> VisibleRecord:
    """Return the record seen through ``entry`` under ``profile``."""
    envelope, body = content
    view = build_view(
        entry.path_ref, entry.ordinal, entry.context_ref, entry.kind_label
    )
    if profile == VisibilityProfile.SHAPE_ONLY:
        return RecordShape(envelope=envelope, view=view)
    return build_record(envelope, body, view)


def assemble_slice(
    reader: StoreReader,
    entries: Sequence[EntryRow],
    *,
    profile: str,
    mode_filter: str,
    anchors: bool,
    frontier: Cut | None = None,
) -> TraceSlice:
    """Build the slice of ``entries`` (already authorized and validated)."""
    contents = reader.records(entry.record_id for entry in entries)
    kept = _MODES_KEPT[ModeFilter(mode_filter)]
    selected = [e for e in entries if _content(contents, e)[0].mode in kept]
    selected_ids = {entry.record_id for entry in selected}
    builder = _SliceBuilder(reader, profile)
    for entry in selected:
        builder.add(entry, contents[entry.record_id], selected_ids, anchors)
    reader.cache.add_views(builder.fresh_views)
    builder.resolve_anchors()
    builder.add_witness_support([contents[entry.record_id] for entry in selected])
    return builder.build(frontier, mode_filter)


def _content(contents: dict[str, RecordContent], entry: EntryRow) -> RecordContent:
    content = contents.get(entry.record_id)
    if content is None:
        raise TraceStoreError(
            f"path entry {entry.path_ref}#{entry.ordinal} names a missing record: "
            f"{entry.record_id}"
        )
    return content


class _SliceBuilder:
    def __init__(self, reader: StoreReader, profile: str) -> None:
        self.reader = reader
        self.profile = VisibilityProfile(profile).value
        self.shape_only = profile == VisibilityProfile.SHAPE_ONLY
        self.facts: dict[str, VisibleRecord] = {}
        self.views = reader.cache.views
        self.fresh_views: list[tuple[tuple[EntryRow, str], VisibleRecord]] = []
        self.paths: dict[str, list[str]] = {}
        self.edges: list[tuple[str, str]] = []
        self.anchor_refs: dict[str, None] = {}
        self.anchors: tuple[ExternalAnchor, ...] = ()
        self.context_refs: dict[str, None] = {}
        self.witnesses: dict[str, VisibleRecord] = {}
        self.witness_anchors: list[WitnessAnchor] = []

    def add(
        self,
        entry: EntryRow,
        content: RecordContent,
        selected_ids: set[str],
        anchors: bool,
    ) -> None:
        record_id = entry.record_id
        # A path entry never changes once committed, and neither does its
        # record: the visible record of an identical entry row is reused.
        key = (entry, self.profile)
        seen = self.views.get(key)
        if seen is None or seen.envelope is not content[0]:
            seen = visible_record(content, entry, self.profile)
            self.fresh_views.append((key, seen))
        self.facts[record_id] = seen
        self.paths.setdefault(entry.path_ref, []).append(record_id)
        for parent in content[0].caused_by_record_ids:
            if parent in selected_ids:
                self.edges.append((parent, record_id))
            elif anchors:
                self.anchor_refs.setdefault(parent)
        if self.shape_only or entry.context_ref:
            self.context_refs.setdefault(entry.context_ref)

    def resolve_anchors(self) -> None:
        refs = list(self.anchor_refs)
        if not refs:
            return
        contents = self.reader.records(refs)
        firsts = self.reader.first_entries(contents)
        self.anchors = tuple(
            _external_anchor(ref, contents.get(ref), firsts.get(ref)) for ref in refs
        )

    def add_witness_support(self, selected: list[RecordContent]) -> None:
        support: dict[str, RecordContent] = {}
        validated: set[str] = set()
        refs: dict[str, None] = {}
        for envelope, _ in selected:
            if not envelope.witness_ref:
                if envelope.schema_ref != ROOT_WITNESS_SCHEMA_REF:
                    raise TraceStoreError(
                        f"non-root record has empty witness_ref: {envelope.record_id}"
                    )
                continue
            refs[envelope.witness_ref] = None
        for ref in refs:
            self._walk_chain(ref, support, validated)
        if self.shape_only:
            self.witness_anchors = [_witness_anchor(c) for c in support.values()]
            return
        firsts = self.reader.first_entries(support)
        for witness_id, content in support.items():
            entry = firsts.get(witness_id)
            view = None if entry is None else entry
            self.witnesses[witness_id] = (
                Record(envelope=content[0], body=content[1])
                if view is None
                else visible_record(content, view, self.profile)
            )

    def _walk_chain(
        self, ref: str, support: dict[str, RecordContent], validated: set[str]
    ) -> None:
        seen: set[str] = set()
        while ref and ref not in validated:
            if ref in seen:
                raise TraceStoreError(f"witness chain cycle before root witness: {ref}")
            seen.add(ref)
            content = self.reader.record(ref)
            support.setdefault(ref, content)
            ref = _next_witness(content)
        validated.update(seen)

    def build(self, frontier: Cut | None, mode_filter: str) -> TraceSlice:
        contexts: dict[str, RetainedContext] = {}
        context_anchors: tuple[ContextAnchor, ...] = ()
        if self.shape_only:
            context_anchors = tuple(
                ContextAnchor(context_id=ref, visible_shape={"context_id": ref})
                for ref in self.context_refs
            )
        elif self.context_refs:
            contexts = self._contexts()
        return TraceSlice(
            frontier=frontier,
            visibility_profile=str(self.profile),
            mode_filter=mode_filter,
            facts_by_id=self.facts,
            contexts_by_id=contexts,
            owner_paths={owner: tuple(ids) for owner, ids in self.paths.items()},
            causal_edges=tuple(self.edges),
            external_anchors=self.anchors,
            context_anchors=context_anchors,
            visible_witnesses_by_id=self.witnesses,
            witness_anchors=tuple(self.witness_anchors),
        )

    def _contexts(self) -> dict[str, RetainedContext]:
        found = self.reader.contexts(self.context_refs)
        missing = [ref for ref in self.context_refs if ref not in found]
        if missing:
            raise TraceStoreError(f"unknown context id: {missing[0]}")
        return {ref: found[ref] for ref in self.context_refs}


def _next_witness(content: RecordContent) -> str:
    envelope = content[0]
    if envelope.schema_ref not in _WITNESS_SCHEMAS:
        raise TraceStoreError(
            f"witness_ref does not resolve to a witness record: {envelope.record_id}"
        )
    if envelope.schema_ref == ROOT_WITNESS_SCHEMA_REF:
        if envelope.witness_ref:
            raise TraceStoreError(
                "root witness must use the empty witness sentinel: "
                + envelope.record_id
            )
        return ""
    if not envelope.witness_ref:
        raise TraceStoreError(
            f"non-root witness has empty witness_ref: {envelope.record_id}"
        )
    return envelope.witness_ref


def _external_anchor(
    ref: str, content: RecordContent | None, entry: EntryRow | None
) -> ExternalAnchor:
    if content is None or entry is None:
        return ExternalAnchor(ref=ref, hidden_reason="unknown")
    envelope = content[0]
    return ExternalAnchor(
        ref=ref,
        visible_shape={
            "kind_label": entry.kind_label,
            "schema_ref": envelope.schema_ref,
            "trace_owner_id": entry.path_ref,
            "owner_ordinal": entry.ordinal,
            "witness_ref": envelope.witness_ref,
        },
    )


def _witness_anchor(content: RecordContent) -> WitnessAnchor:
    envelope = content[0]
    return WitnessAnchor(
        witness_ref=envelope.record_id,
        visible_shape={
            "schema_ref": envelope.schema_ref,
            "record_id": envelope.record_id,
            "mode": envelope.mode,
            "witness_ref": envelope.witness_ref,
        },
    )
