"""Coerce a call's context to its operation and check authority (kernel-spec 4.4).

The context type is checked first, then trust. Every check runs before the
store touches any state.
"""

from __future__ import annotations

from dataclasses import replace

from goatherd.domain.contexts import (
    AppendContext,
    OperationContext,
    OperationKind,
    ReadContext,
)
from goatherd.domain.errors import ContextTypeError, ReadRequestError, TraceStoreError
from goatherd.domain.records import (
    TRUSTED_AUTHORITY,
    VISIBILITY_PROFILES,
    VisibilityProfile,
)

__all__ = ["append_context", "publish_context", "read_context"]


def append_context(context: object) -> OperationContext:
    """Return the ``append`` operation context of a write call, trust checked.

    Raises:
        ContextTypeError: a :class:`ReadContext` or a non-context was passed
            (a :class:`TraceStoreError` and a :class:`TypeError`).
        TraceStoreError: an operation context for another operation, or an
            untrusted writer.
    """
    return _write_context(context, OperationKind.APPEND)


def publish_context(context: object) -> OperationContext:
    """Return the ``publish_cut`` operation context of a publish call, trust checked.

    Append authority does not cross-authorize publication.
    """
    return _write_context(context, OperationKind.PUBLISH_CUT)


def read_context(context: object, visibility: str | None = None) -> OperationContext:
    """Return the ``read`` operation context of a read call, authorized.

    A ``visibility`` override keeps the actor and presented refs and replaces
    only the profile.

    Raises:
        TraceStoreError: a non-read context, or ``full_internal`` without the
            trusted authority among the presented refs.
        ReadRequestError: an unknown visibility profile.
    """
    if isinstance(context, ReadContext):
        operation = context.to_operation_context()
    elif isinstance(context, OperationContext) and context.operation == "read":
        operation = context
    else:
        raise TraceStoreError(
            "read operation requires OperationContext(operation='read')"
        )
    if visibility is not None:
        operation = replace(operation, visibility_profile=visibility)
    profile = operation.visibility_profile
    if profile not in VISIBILITY_PROFILES:
        raise ReadRequestError(f"unknown visibility profile: {profile}")
    if (
        profile == VisibilityProfile.FULL_INTERNAL
        and TRUSTED_AUTHORITY not in operation.presented_authority_refs
    ):
        raise TraceStoreError("full_internal reads require trusted internal witness")
    return operation


def _write_context(context: object, operation: str) -> OperationContext:
    if isinstance(context, AppendContext):
        coerced = context.to_operation_context(operation)
    elif isinstance(context, OperationContext):
        if context.operation != operation:
            raise TraceStoreError(
                f"{operation} operation requires "
                f"OperationContext(operation='{operation}')"
            )
        coerced = context
    elif isinstance(context, ReadContext):
        raise ContextTypeError("a ReadContext cannot authorize a write")
    else:
        raise ContextTypeError(
            f"expected an AppendContext or OperationContext, got "
            f"{type(context).__name__}"
        )
    if not coerced.write_trusted:
        raise TraceStoreError("Slice A append requires trusted internal witness")
    return coerced
