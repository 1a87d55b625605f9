"""Bad input refused at the door, the same way on every backend (issue 13 item 4).

:func:`check_batch` checks every field of an append batch before anything
else runs: its type, no NUL character (PostgreSQL cannot store one in text;
SQLite can, so a SQLite trace could not move), valid text, and its size
against the store's :class:`AppendLimits`. Read arguments get the same
treatment (:func:`check_text`, :func:`check_int`). Each refusal is one line
naming the field (``groups[0].fact_drafts[2].schema_ref``) and what is wrong,
and nothing is written.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, cast

from goatherd.domain.errors import BatchShapeError, ReadRequestError
from goatherd.domain.records import (
    AppendBatch,
    AppendGroup,
    RecordDraft,
    RetainedContext,
    RetainedContextDraft,
)

__all__ = [
    "AppendLimits",
    "DEFAULT_LIMITS",
    "INT64_MAX",
    "check_batch",
    "check_expected_heads",
    "check_int",
    "check_text",
]

INT64_MAX: Final = 2**63 - 1


@dataclass(frozen=True, slots=True)
class AppendLimits:
    """The largest input an append accepts.

    Attributes:
        identifier_bytes: any id, owner, schema, kind label, context ref,
            substrate or containment, in UTF-8 bytes (default 1 KiB).
        payload_bytes: one payload's stored JSON (default 8 MiB).
        batch_payload_bytes: all payloads of one batch (default 64 MiB).
    """

    identifier_bytes: int = 1024
    payload_bytes: int = 8 << 20
    batch_payload_bytes: int = 64 << 20

    def __post_init__(self) -> None:
        """Refuse a limit that is not a positive integer."""
        for name in ("identifier_bytes", "payload_bytes", "batch_payload_bytes"):
            value = getattr(self, name)
            if type(value) is not int or value <= 0:
                raise ValueError(
                    f"AppendLimits.{name} must be a positive int, got {value!r}"
                )


DEFAULT_LIMITS: Final = AppendLimits()


def check_batch(batch: object, limits: AppendLimits = DEFAULT_LIMITS) -> None:
    """Check the type, text and size of every field of an append batch.

    Raises:
        BatchShapeError: the first bad field, named by its path.
    """
    if not isinstance(batch, AppendBatch):
        raise BatchShapeError(f"batch must be an AppendBatch, got {_kind(batch)}")
    size = limits.identifier_bytes
    if _batch_fits(batch, size):
        return
    # Something is off (or merely unusual: non-ASCII text, a subclass): walk
    # the batch again naming each field, and raise on the first bad one.
    _text(batch.append_intent_id, "append_intent_id", size)
    _text(batch.atomicity, "atomicity", size)
    for index, group in enumerate(_items(batch.groups, "groups", AppendGroup)):
        _group(cast("AppendGroup", group), f"groups[{index}]", size)


def _batch_fits(batch: AppendBatch, size: int) -> bool:
    """Whether every field is plain ASCII text within ``size`` (no NUL) and typed.

    The common case, checked without building a field path per value (the
    paths are for the error message only). ``False`` does not mean the batch
    is bad: the naming walk then decides, and raises what it finds.
    """
    if not (_fits(batch.append_intent_id, size) and _fits(batch.atomicity, size)):
        return False
    groups: object = batch.groups
    if type(groups) is not tuple and type(groups) is not list:
        return False
    for group in groups:
        if type(group) is not AppendGroup:
            return False
        context = group.retained_context
        if not (
            _fits(group.trace_owner_id, size)
            and _all_fit(group.causal_parents, size)
            and (
                context is None
                or _fits(context, size)
                or (
                    type(context) is RetainedContextDraft and _draft_fits(context, size)
                )
            )
        ):
            return False
        drafts: object = group.fact_drafts
        if type(drafts) is not tuple and type(drafts) is not list:
            return False
        for draft in drafts:
            if not (
                type(draft) is RecordDraft
                and _fits(draft.mode, size)
                and _fits(draft.schema_ref, size)
                and _fits(draft.kind_label, size)
                and (
                    draft.append_local_id is None or _fits(draft.append_local_id, size)
                )
                and _all_fit(draft.caused_by_fact_ids, size)
                and _all_fit(draft.caused_by_local_refs, size)
            ):
                return False
    return True


def _draft_fits(value: RetainedContextDraft, size: int) -> bool:
    return (
        _all_fit(value.active_binding_refs, size)
        and _all_fit(value.capability_witness_refs, size)
        and _all_fit(value.semantic_environment_refs, size)
        and _all_fit(value.visibility_policy_refs, size)
        and _fits(value.substrate_ref, size)
        and _fits(value.containment, size)
        and (value.reuse_context_id is None or _fits(value.reuse_context_id, size))
    )


def _all_fit(values: object, size: int) -> bool:
    if type(values) is not tuple and type(values) is not list:
        return False
    return all(_fits(value, size) for value in values)


def _fits(value: object, size: int) -> bool:
    # ASCII: its UTF-8 length is its length, and it holds no lone surrogate.
    return (
        type(value) is str
        and len(value) <= size
        and value.isascii()
        and "\x00" not in value
    )


def _group(group: AppendGroup, path: str, size: int) -> None:
    _text(group.trace_owner_id, f"{path}.trace_owner_id", size)
    _context(group.retained_context, f"{path}.retained_context", size)
    _ids(group.causal_parents, f"{path}.causal_parents", size)
    drafts = _items(group.fact_drafts, f"{path}.fact_drafts", RecordDraft)
    for index, draft in enumerate(drafts):
        _draft(cast("RecordDraft", draft), f"{path}.fact_drafts[{index}]", size)


def _draft(draft: RecordDraft, path: str, size: int) -> None:
    _text(draft.mode, f"{path}.mode", size)
    _text(draft.schema_ref, f"{path}.schema_ref", size)
    _text(draft.kind_label, f"{path}.kind_label", size)
    if draft.append_local_id is not None:
        _text(draft.append_local_id, f"{path}.append_local_id", size)
    _ids(draft.caused_by_fact_ids, f"{path}.caused_by_fact_ids", size)
    _ids(draft.caused_by_local_refs, f"{path}.caused_by_local_refs", size)


def _context(value: object, path: str, size: int) -> None:
    if value is None:
        return
    if isinstance(value, str):
        _text(value, path, size)
        return
    if not isinstance(value, RetainedContextDraft | RetainedContext):
        raise BatchShapeError(
            f"{path} must be a RetainedContextDraft, a RetainedContext, a context "
            f"id or None, got {_kind(value)}"
        )
    for name in (
        "active_binding_refs",
        "capability_witness_refs",
        "semantic_environment_refs",
        "visibility_policy_refs",
    ):
        _ids(getattr(value, name), f"{path}.{name}", size)
    _text(value.substrate_ref, f"{path}.substrate_ref", size)
    _text(value.containment, f"{path}.containment", size)
    if isinstance(value, RetainedContext):
        _text(value.context_id, f"{path}.context_id", size)
    elif value.reuse_context_id is not None:
        _text(value.reuse_context_id, f"{path}.reuse_context_id", size)


def _items(value: object, path: str, kind: type) -> tuple[object, ...] | list[object]:
    if not isinstance(value, tuple | list):
        raise BatchShapeError(f"{path} must be a tuple, got {_kind(value)}")
    for index, item in enumerate(value):
        if not isinstance(item, kind):
            raise BatchShapeError(
                f"{path}[{index}] must be a {kind.__name__}, got {_kind(item)}"
            )
    return value


def _ids(value: object, path: str, size: int) -> None:
    if not isinstance(value, tuple | list):
        raise BatchShapeError(f"{path} must be a tuple of strings, got {_kind(value)}")
    for index, item in enumerate(value):
        _text(item, f"{path}[{index}]", size)


def _text(value: object, path: str, size: int) -> None:
    problem = _text_problem(value, size)
    if problem is not None:
        raise BatchShapeError(f"{path} {problem}")


def _text_problem(value: object, size: int) -> str | None:
    if not isinstance(value, str):
        return f"must be a string, got {_kind(value)}"
    if "\x00" in value:
        return "contains NUL (U+0000), which no trace backend stores in text"
    if value.isascii():
        length = len(value)
    else:
        try:
            length = len(value.encode("utf-8"))
        except UnicodeEncodeError as error:
            bad = value[error.start]
            return f"is not valid text (lone surrogate U+{ord(bad):04X})"
    if length > size:
        return f"is {length} bytes, over the store's {size}-byte limit"
    return None


def _kind(value: object) -> str:
    return type(value).__name__


def check_payload_size(path: str, size: int, limits: AppendLimits) -> None:
    """Refuse a payload whose stored JSON is over the limit.

    Raises:
        BatchShapeError: naming the draft and both sizes.
    """
    if size > limits.payload_bytes:
        raise BatchShapeError(
            f"{path}.payload is {size} bytes of JSON, over the store's "
            f"{limits.payload_bytes}-byte payload limit; store large content "
            "elsewhere and record a reference"
        )


def check_expected_heads(heads: object) -> None:
    """Check ``expected_heads``: owner ids mapped to ordinals.

    Raises:
        BatchShapeError: a non-mapping, a bad owner id or a bad ordinal.
    """
    if heads is None:
        return
    if not isinstance(heads, Mapping):
        raise BatchShapeError(f"expected_heads must be a mapping, got {_kind(heads)}")
    for owner, head in heads.items():
        _text(owner, "expected_heads key", INT64_MAX)
        if type(head) is not int or not 0 <= head <= INT64_MAX:
            raise BatchShapeError(
                f"expected_heads[{owner!r}] must be an int from 0 to 2**63-1, "
                f"got {head!r:.40}"
            )


def check_text(value: object, name: str) -> str:
    """Return a read argument that must be text (no NUL, valid), or refuse it.

    Raises:
        ReadRequestError: naming the argument.
    """
    problem = _text_problem(value, INT64_MAX)
    if problem is not None:
        raise ReadRequestError(f"{name} {problem}")
    assert isinstance(value, str)
    return value


def check_int(value: object, name: str, low: int, high: int = INT64_MAX) -> int:
    """Return a read argument that must be an int in ``[low, high]``, or refuse it.

    Raises:
        ReadRequestError: naming the argument and the range.
    """
    if type(value) is not int or not low <= value <= high:
        shown = f"{value!r}" if type(value) is not int else f"{value}"
        raise ReadRequestError(
            f"{name} must be an int from {low} to {_bound(high)}, got {shown:.60}"
        )
    return value


def _bound(value: int) -> str:
    return "2**63-1" if value == INT64_MAX else str(value)
