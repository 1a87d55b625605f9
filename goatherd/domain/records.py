"""The kernel record model as immutable values (kernel-spec section 4).

Drafts are what callers append; records, shapes and views are what reads
return; receipts, cuts and slices describe what an append or a read did.
Every type is a frozen dataclass with value equality. The prototype names of
the reference (``FactDraft``, ``OwnerCutoff``, ...) are kept as aliases.

Pure values only: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Final, TypeAlias

__all__ = [
    "AppendBatch",
    "AppendGroup",
    "AppendReceipt",
    "CAPTURE",
    "CLOSURE_POLICIES",
    "ClosurePolicy",
    "ContextAnchor",
    "Cut",
    "CutSpec",
    "DECLARATION",
    "DEFAULT_CONTAINMENT",
    "DEFAULT_SCHEMA_ENVIRONMENT",
    "DEFAULT_SUBSTRATE_REF",
    "ExternalAnchor",
    "FRONTIER_KIND_LABEL",
    "FRONTIER_SCHEMA_REF",
    "Fact",
    "FactBody",
    "FactDraft",
    "FactEnvelope",
    "FactShape",
    "FactView",
    "MODE_FILTERS",
    "ModeFilter",
    "OwnerCutoff",
    "OwnerCutoffSpec",
    "Payload",
    "REDACTION_KIND_LABEL",
    "REDACTION_OWNER",
    "REDACTION_SCHEMA_REF",
    "Record",
    "RecordBody",
    "RecordDraft",
    "RecordEnvelope",
    "RecordMode",
    "RecordShape",
    "RecordView",
    "RetainedContext",
    "RetainedContextDraft",
    "TRUSTED_AUTHORITY",
    "TRUSTED_TRUST_MODE",
    "TraceSlice",
    "VISIBILITY_PROFILES",
    "VisibilityProfile",
    "VisibleFact",
    "VisibleRecord",
    "WITNESS_OWNER",
    "WitnessAnchor",
]

Payload: TypeAlias = Mapping[str, object]
"""A record body: a JSON object. Values are plain JSON (see ``canonical``)."""


class RecordMode(StrEnum):
    """Whether a record observes what happened or declares what is intended."""

    CAPTURE = "capture"
    DECLARATION = "declaration"


CAPTURE: Final = RecordMode.CAPTURE
DECLARATION: Final = RecordMode.DECLARATION


class ModeFilter(StrEnum):
    """Which record modes a slice read keeps."""

    BOTH = "both"
    CAPTURES_ONLY = "captures_only"
    DECLARATIONS_ONLY = "declarations_only"


class VisibilityProfile(StrEnum):
    """How much of a record a read exposes."""

    SHAPE_ONLY = "shape_only"
    PAYLOAD = "payload"
    FULL_INTERNAL = "full_internal"


class ClosurePolicy(StrEnum):
    """Whether a causal-closure read reports parents it cannot show."""

    INCLUDE_EXTERNAL_ANCHORS = "include_external_anchors"
    VISIBLE_ONLY = "visible_only"


MODE_FILTERS: Final = tuple(m.value for m in ModeFilter)
VISIBILITY_PROFILES: Final = tuple(v.value for v in VisibilityProfile)
CLOSURE_POLICIES: Final = tuple(c.value for c in ClosurePolicy)

WITNESS_OWNER: Final = "kernel:witness"
TRUSTED_AUTHORITY: Final = "trusted:internal"
TRUSTED_TRUST_MODE: Final = "internal"
DEFAULT_SCHEMA_ENVIRONMENT: Final = "shepherd2-slice-a"
DEFAULT_SUBSTRATE_REF: Final = "sqlite.local.v1"
DEFAULT_CONTAINMENT: Final = "contained"
FRONTIER_SCHEMA_REF: Final = "shepherd2.frontier.owner_cutoff.v1"
FRONTIER_KIND_LABEL: Final = "frontier_published"
REDACTION_SCHEMA_REF: Final = "goatherd.trace.redaction.v1"
"""A recorded redaction: it names the records whose payloads it erased (ADR 0062)."""
REDACTION_OWNER: Final = "goatherd:redactions"
"""The owner path redaction records are placed on (only ``redact`` appends there)."""
REDACTION_KIND_LABEL: Final = "payloads_redacted"


# --------------------------------------------------------------------- drafts


@dataclass(frozen=True, slots=True)
class RecordDraft:
    """One record to append (an append input, not a retained record).

    Attributes:
        mode: ``capture`` or ``declaration``.
        schema_ref: the schema name; must be non-empty at append.
        payload: the body, a JSON object.
        kind_label: a view label outside identity; defaults to ``schema_ref``.
        append_local_id: a batch-local name later drafts may cite.
        caused_by_fact_ids: explicit parent record ids, in order.
        caused_by_local_refs: parents named by ``append_local_id``, in order.
    """

    mode: str
    schema_ref: str
    payload: Payload = field(default_factory=dict)
    kind_label: str = ""
    append_local_id: str | None = None
    caused_by_fact_ids: tuple[str, ...] = ()
    caused_by_local_refs: tuple[str, ...] = ()

    @property
    def fact_kind(self) -> str:
        """Return the kind label, or the schema ref when the label is empty."""
        return self.kind_label or self.schema_ref


@dataclass(frozen=True, slots=True)
class RetainedContextDraft:
    """A new retained context for an append group, or a reuse of a stored one."""

    active_binding_refs: tuple[str, ...] = ()
    capability_witness_refs: tuple[str, ...] = ()
    semantic_environment_refs: tuple[str, ...] = ()
    visibility_policy_refs: tuple[str, ...] = ()
    substrate_ref: str = DEFAULT_SUBSTRATE_REF
    containment: str = DEFAULT_CONTAINMENT
    reuse_context_id: str | None = None


@dataclass(frozen=True, slots=True)
class RetainedContext:
    """A durable retained context as stored (and as a witness is derived from)."""

    context_id: str
    active_binding_refs: tuple[str, ...] = ()
    capability_witness_refs: tuple[str, ...] = ()
    semantic_environment_refs: tuple[str, ...] = ()
    visibility_policy_refs: tuple[str, ...] = ()
    substrate_ref: str = DEFAULT_SUBSTRATE_REF
    containment: str = DEFAULT_CONTAINMENT


@dataclass(frozen=True, slots=True)
class AppendGroup:
    """The drafts of one batch that land on one owner path.

    ``retained_context`` is a new draft, a stored context (reused by id), a bare
    context id, or ``None`` for the default context.
    """

    trace_owner_id: str
    retained_context: RetainedContextDraft | RetainedContext | str | None = None
    causal_parents: tuple[str, ...] = ()
    fact_drafts: tuple[RecordDraft, ...] = ()


@dataclass(frozen=True, slots=True)
class AppendBatch:
    """An atomic append under one append-intent id (the idempotency key)."""

    append_intent_id: str
    groups: tuple[AppendGroup, ...] = ()
    atomicity: str = "atomic"


@dataclass(frozen=True, slots=True)
class AppendReceipt:
    """What a committed append allocated.

    Attributes:
        append_intent_id: the batch's intent.
        fact_ids: the record id of each draft, in batch order.
        commit_receipts: ``commit:<n>`` per draft, store-global.
        owner_ordinal_ranges: owner -> (first, last) ordinal, inclusive.
        causal_edges: (parent, child) pairs in order.
        context_receipts: the context id of each non-empty group.
    """

    append_intent_id: str
    fact_ids: tuple[str, ...] = ()
    commit_receipts: tuple[str, ...] = ()
    owner_ordinal_ranges: Mapping[str, tuple[int, int]] = field(default_factory=dict)
    causal_edges: tuple[tuple[str, str], ...] = ()
    context_receipts: tuple[str, ...] = ()


# --------------------------------------------------------------------- records


@dataclass(frozen=True, slots=True)
class RecordEnvelope:
    """A record's identity: id (== digest), schema, mode, witness and parents."""

    record_id: str
    digest: str
    schema_ref: str
    mode: str
    witness_ref: str
    caused_by_record_ids: tuple[str, ...] = ()

    @property
    def fact_id(self) -> str:
        """Alias of :attr:`record_id`."""
        return self.record_id

    @property
    def caused_by_fact_ids(self) -> tuple[str, ...]:
        """Alias of :attr:`caused_by_record_ids`."""
        return self.caused_by_record_ids


@dataclass(frozen=True, slots=True)
class RecordBody:
    """A retained record's payload, or the redaction that erased it.

    Attributes:
        payload: the payload (empty when the record was redacted).
        redacted_by: the id of the redaction record that erased the payload,
            ``None`` for a record whose payload is stored.
    """

    payload: Payload = field(default_factory=dict)
    redacted_by: str | None = None


@dataclass(frozen=True, slots=True)
class RecordView:
    """Path metadata of one path entry: the same record differs per path."""

    trace_owner_id: str
    owner_ordinal: int
    retained_context_ref: str = ""
    kind_label: str = ""

    @property
    def fact_kind(self) -> str:
        """Alias of :attr:`kind_label`."""
        return self.kind_label


@dataclass(frozen=True, slots=True)
class Record:
    """A retained record with its payload, seen through one path entry."""

    envelope: RecordEnvelope
    body: RecordBody
    view: RecordView | None = None

    @property
    def record_id(self) -> str:
        """The record id."""
        return self.envelope.record_id

    @property
    def fact_id(self) -> str:
        """Alias of :attr:`record_id`."""
        return self.envelope.record_id

    @property
    def payload(self) -> Payload:
        """The record's payload (empty when :attr:`redacted_by` is set)."""
        return self.body.payload

    @property
    def redacted_by(self) -> str | None:
        """The redaction record that erased this payload, ``None`` if it is stored."""
        return self.body.redacted_by

    @property
    def fact_kind(self) -> str:
        """The view's kind label if non-empty, else the schema ref."""
        return _fact_kind(self.envelope, self.view)

    @property
    def trace_owner_id(self) -> str:
        """The view's owner path (``""`` without a view)."""
        return self.view.trace_owner_id if self.view else ""

    @property
    def owner_ordinal(self) -> int:
        """The view's ordinal (``-1`` without a view)."""
        return self.view.owner_ordinal if self.view else -1

    @property
    def retained_context_ref(self) -> str:
        """The view's context id (``""`` without a view)."""
        return self.view.retained_context_ref if self.view else ""


@dataclass(frozen=True, slots=True)
class RecordShape:
    """A record with its payload hidden by visibility. Never a :class:`Record`."""

    envelope: RecordEnvelope
    view: RecordView | None = None
    hidden_reason: str = "payload_hidden"

    @property
    def record_id(self) -> str:
        """The record id."""
        return self.envelope.record_id

    @property
    def fact_id(self) -> str:
        """Alias of :attr:`record_id`."""
        return self.envelope.record_id

    @property
    def fact_kind(self) -> str:
        """The view's kind label if non-empty, else the schema ref."""
        return _fact_kind(self.envelope, self.view)

    @property
    def trace_owner_id(self) -> str:
        """The view's owner path (``""`` without a view)."""
        return self.view.trace_owner_id if self.view else ""

    @property
    def owner_ordinal(self) -> int:
        """The view's ordinal (``-1`` without a view)."""
        return self.view.owner_ordinal if self.view else -1


VisibleRecord: TypeAlias = Record | RecordShape


def _fact_kind(envelope: RecordEnvelope, view: RecordView | None) -> str:
    if view is not None and view.kind_label:
        return view.kind_label
    return envelope.schema_ref


# --------------------------------------------------------------- cuts, anchors


@dataclass(frozen=True, slots=True)
class Cut:
    """An immutable read address: owner path ``target`` through one ordinal."""

    frontier_id: str
    target_trace_owner_id: str
    through_fact_id: str
    through_owner_ordinal: int
    publisher_trace_owner_id: str | None = None
    created_by_fact_id: str | None = None


@dataclass(frozen=True, slots=True)
class CutSpec:
    """What to publish as a cut (the intent defaults to ``frontier:<id>``)."""

    frontier_id: str
    target_trace_owner_id: str
    through_fact_id: str
    publisher_trace_owner_id: str | None = None
    append_intent_id: str | None = None
    caused_by: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ExternalAnchor:
    """A parent outside the slice: its shape without its payload."""

    ref: str
    anchor_kind: str = "fact"
    visible_shape: Mapping[str, object] = field(default_factory=dict)
    hidden_reason: str = "outside_frontier"


@dataclass(frozen=True, slots=True)
class ContextAnchor:
    """A retained context hidden by a shape-only read."""

    context_id: str
    visible_shape: Mapping[str, object] = field(default_factory=dict)
    hidden_reason: str = "hidden_by_visibility"


@dataclass(frozen=True, slots=True)
class WitnessAnchor:
    """A witness hidden by a shape-only read."""

    witness_ref: str
    visible_shape: Mapping[str, object] = field(default_factory=dict)
    hidden_reason: str = "hidden_by_visibility"


@dataclass(frozen=True, slots=True)
class TraceSlice:
    """A graph-shaped read: selected records, edges, support witnesses, anchors."""

    frontier: Cut | None = None
    visibility_profile: str = VisibilityProfile.PAYLOAD
    mode_filter: str = ModeFilter.BOTH
    facts_by_id: Mapping[str, VisibleRecord] = field(default_factory=dict)
    contexts_by_id: Mapping[str, RetainedContext] = field(default_factory=dict)
    owner_paths: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    causal_edges: tuple[tuple[str, str], ...] = ()
    external_anchors: tuple[ExternalAnchor, ...] = ()
    context_anchors: tuple[ContextAnchor, ...] = ()
    visible_witnesses_by_id: Mapping[str, VisibleRecord] = field(default_factory=dict)
    witness_anchors: tuple[WitnessAnchor, ...] = ()

    @property
    def visible_facts_by_id(self) -> Mapping[str, VisibleRecord]:
        """Alias of :attr:`facts_by_id`."""
        return self.facts_by_id

    def fact_ids(self) -> tuple[str, ...]:
        """Concatenate the owner paths in order (duplicates kept)."""
        return tuple(rid for ids in self.owner_paths.values() for rid in ids)


# Reference prototype names, kept as aliases.
FactDraft = RecordDraft
FactEnvelope = RecordEnvelope
FactBody = RecordBody
FactView = RecordView
Fact = Record
FactShape = RecordShape
VisibleFact = VisibleRecord
OwnerCutoff = Cut
OwnerCutoffSpec = CutSpec
