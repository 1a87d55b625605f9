"""The expected failures of each runtime command: closed, documented unions.

Each public command of :class:`goatherd.application.ScopeManager` returns
``Result[value, <Command>Failure]``; the union below is everything it can
fail with on purpose (a broken rule, a sandbox failure, a lost optimistic
race after retries, an intent replayed with different content). Anything
else is a bug or an outage (``StoreUnavailableError``) and raises.
The ``*_FAILURES`` tuples are what the command catches
(``returns.result.safe(exceptions=...)``).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Final, ParamSpec, TypeAlias, TypeVar

from returns.result import Result, safe

from goatherd.application.errors import SandboxError
from goatherd.domain import (
    AppendIntentConflictError,
    BlobIntegrityError,
    CanonicalEncodingError,
    CheckpointNotFoundError,
    CheckpointNotRestorableError,
    CheckpointScopeMismatchError,
    InconsistentTraceError,
    NoBaselineError,
    NotAChildError,
    OrdinalConflictError,
    OutputConsumedError,
    OutputNotFoundError,
    ParentMovedError,
    RecordDecodeError,
    RecordInputError,
    ReservedSchemaError,
    RestoreEffectLandedError,
    RootScopeError,
    RuntimeRuleError,
    ScopeExistsError,
    ScopeNotFoundError,
    ScopeStateError,
    SettleEffectLandedError,
    SnapshotTooLargeError,
    TraceStoreError,
    UnknownSettlementActionError,
    WorkspaceBusyError,
)

__all__ = [
    "CHECKPOINT_FAILURES",
    "CREATE_FAILURES",
    "CheckpointFailure",
    "CreateFailure",
    "FACT_FAILURES",
    "FORK_FAILURES",
    "FactFailure",
    "ForkFailure",
    "HALT_FAILURES",
    "HaltFailure",
    "LIFECYCLE_FAILURES",
    "LifecycleFailure",
    "PROPOSE_FAILURES",
    "ProposeFailure",
    "RECORD_FAILURES",
    "RESTORE_FAILURES",
    "RecordFailure",
    "RestoreFailure",
    "RuntimeFailure",
    "SEAL_FAILURES",
    "SETTLE_FAILURES",
    "SealFailure",
    "SettleFailure",
    "WORKSPACE_FAILURES",
    "WorkspaceFailure",
    "command",
]

_P = ParamSpec("_P")
_T = TypeVar("_T")
_E = TypeVar("_E", bound=Exception)

RuntimeFailure: TypeAlias = RuntimeRuleError | SandboxError | TraceStoreError
"""Any runtime command's expected failure (the union of the unions below)."""

_Race: TypeAlias = AppendIntentConflictError | OrdinalConflictError

CreateFailure: TypeAlias = ScopeExistsError | _Race
"""``create``: the owner is a scope already."""

ForkFailure: TypeAlias = (
    ScopeNotFoundError
    | ScopeStateError
    | ScopeExistsError
    | InconsistentTraceError
    | SandboxError
    | _Race
)
"""``fork``/``fork_isolated``: unknown or inactive parent, taken child, a
failed baseline capture."""

LifecycleFailure: TypeAlias = (
    ScopeNotFoundError
    | ScopeStateError
    | NotAChildError
    | RootScopeError
    | InconsistentTraceError
    | SandboxError
    | _Race
)
"""``merge``/``discard``: unknown scopes, a state or the tree forbids it, a
failed teardown of an owned sandbox (after the record)."""

HaltFailure: TypeAlias = (
    ScopeNotFoundError | ScopeStateError | InconsistentTraceError | SandboxError | _Race
)
"""``halt``: unknown scope, a merged scope, a failed teardown."""

FactFailure: TypeAlias = (
    ScopeNotFoundError
    | ScopeStateError
    | InconsistentTraceError
    | ReservedSchemaError
    | RecordInputError
    | RecordDecodeError
    | CanonicalEncodingError
    | _Race
)
"""``inject``/``append_fact``/``record_run_completed``: unknown or (inject)
inactive scope, a reserved or empty schema, a payload that is not plain JSON
(or not a run record)."""

WorkspaceFailure: TypeAlias = (
    ScopeNotFoundError
    | ScopeStateError
    | InconsistentTraceError
    | WorkspaceBusyError
    | SandboxError
)
"""``capture_workspace``/``apply_workspace``/``diff_workspace``."""

CheckpointFailure: TypeAlias = (
    ScopeNotFoundError
    | ScopeStateError
    | InconsistentTraceError
    | SnapshotTooLargeError
    | SandboxError
    | _Race
)
"""``create_checkpoint``."""

RestoreFailure: TypeAlias = (
    CheckpointNotFoundError
    | ScopeNotFoundError
    | ScopeStateError
    | InconsistentTraceError
    | CheckpointScopeMismatchError
    | CheckpointNotRestorableError
    | WorkspaceBusyError
    | BlobIntegrityError
    | RestoreEffectLandedError
    | SandboxError
    | _Race
)
"""``restore_checkpoint``: unknown, used, invalid, claimed by another attempt,
unverifiable bytes, a busy workspace, a failed apply (which burns it), a
reset that landed without its record (``RestoreEffectLandedError``: finish it
under its ``seq``)."""

ProposeFailure: TypeAlias = (
    ScopeNotFoundError
    | ScopeStateError
    | InconsistentTraceError
    | NoBaselineError
    | SandboxError
)
"""``propose_merge``."""

RecordFailure: TypeAlias = (
    ScopeNotFoundError
    | ScopeStateError
    | RootScopeError
    | InconsistentTraceError
    | _Race
)
"""``record_merge_proposal``/``record_merge_decision``."""

SealFailure: TypeAlias = (
    ScopeNotFoundError
    | ScopeStateError
    | InconsistentTraceError
    | NoBaselineError
    | SandboxError
    | _Race
)
"""``seal``."""

SettleFailure: TypeAlias = (
    OutputNotFoundError
    | OutputConsumedError
    | UnknownSettlementActionError
    | ScopeNotFoundError
    | ScopeStateError
    | RootScopeError
    | NotAChildError
    | ParentMovedError
    | WorkspaceBusyError
    | InconsistentTraceError
    | BlobIntegrityError
    | SettleEffectLandedError
    | SandboxError
    | _Race
)
"""``settle``: unknown or consumed output (``OutputClaimedError`` is an
``OutputConsumedError``), unknown verb, scopes that forbid it, the parent off
its baseline (select), a busy workspace (apply), a conflict or unsupported
backend (``ApplyConflictError``/``UnsupportedError`` are ``SandboxError``s),
an effect that landed without its record."""

_RACES: Final = (AppendIntentConflictError, OrdinalConflictError)
CREATE_FAILURES: Final[tuple[type[CreateFailure], ...]] = (ScopeExistsError, *_RACES)
FORK_FAILURES: Final[tuple[type[ForkFailure], ...]] = (
    ScopeNotFoundError,
    ScopeStateError,
    ScopeExistsError,
    InconsistentTraceError,
    SandboxError,
    *_RACES,
)
LIFECYCLE_FAILURES: Final[tuple[type[LifecycleFailure], ...]] = (
    ScopeNotFoundError,
    ScopeStateError,
    NotAChildError,
    RootScopeError,
    InconsistentTraceError,
    SandboxError,
    *_RACES,
)
HALT_FAILURES: Final[tuple[type[HaltFailure], ...]] = (
    ScopeNotFoundError,
    ScopeStateError,
    InconsistentTraceError,
    SandboxError,
    *_RACES,
)
FACT_FAILURES: Final[tuple[type[FactFailure], ...]] = (
    ScopeNotFoundError,
    ScopeStateError,
    InconsistentTraceError,
    ReservedSchemaError,
    RecordInputError,
    RecordDecodeError,
    CanonicalEncodingError,
    *_RACES,
)
WORKSPACE_FAILURES: Final[tuple[type[WorkspaceFailure], ...]] = (
    ScopeNotFoundError,
    ScopeStateError,
    InconsistentTraceError,
    WorkspaceBusyError,
    SandboxError,
)
CHECKPOINT_FAILURES: Final[tuple[type[CheckpointFailure], ...]] = (
    ScopeNotFoundError,
    ScopeStateError,
    InconsistentTraceError,
    SnapshotTooLargeError,
    SandboxError,
    *_RACES,
)
RESTORE_FAILURES: Final[tuple[type[RestoreFailure], ...]] = (
    CheckpointNotFoundError,
    ScopeNotFoundError,
    ScopeStateError,
    InconsistentTraceError,
    CheckpointScopeMismatchError,
    CheckpointNotRestorableError,
    WorkspaceBusyError,
    BlobIntegrityError,
    RestoreEffectLandedError,
    SandboxError,
    *_RACES,
)
PROPOSE_FAILURES: Final[tuple[type[ProposeFailure], ...]] = (
    ScopeNotFoundError,
    ScopeStateError,
    InconsistentTraceError,
    NoBaselineError,
    SandboxError,
)
RECORD_FAILURES: Final[tuple[type[RecordFailure], ...]] = (
    ScopeNotFoundError,
    ScopeStateError,
    RootScopeError,
    InconsistentTraceError,
    *_RACES,
)
SEAL_FAILURES: Final[tuple[type[SealFailure], ...]] = (
    ScopeNotFoundError,
    ScopeStateError,
    InconsistentTraceError,
    NoBaselineError,
    SandboxError,
    *_RACES,
)
SETTLE_FAILURES: Final[tuple[type[SettleFailure], ...]] = (
    OutputNotFoundError,
    OutputConsumedError,
    UnknownSettlementActionError,
    ScopeNotFoundError,
    ScopeStateError,
    RootScopeError,
    NotAChildError,
    ParentMovedError,
    WorkspaceBusyError,
    InconsistentTraceError,
    BlobIntegrityError,
    SettleEffectLandedError,
    SandboxError,
    *_RACES,
)


def command(
    exceptions: tuple[type[_E], ...], failure: str
) -> Callable[[Callable[_P, _T]], Callable[_P, Result[_T, _E]]]:
    """Make a command return ``Result[value, failure]`` for ``exceptions``.

    ``returns.result.safe`` does the catching; this also gives the wrapper a
    signature whose return annotation is the ``Result`` (``failure`` names
    the union above), so ``help()`` and ``inspect.signature`` show what the
    command really returns instead of the wrapped function's own annotation.
    """

    def decorate(func: Callable[_P, _T]) -> Callable[_P, Result[_T, _E]]:
        wrapped = safe(exceptions=exceptions)(func)
        signature = inspect.signature(func)
        value = signature.return_annotation
        name = value if isinstance(value, str) else getattr(value, "__name__", value)
        shown = f"Result[{name}, {failure}]"
        wrapped.__signature__ = signature.replace(  # type: ignore[attr-defined]
            return_annotation=shown
        )
        wrapped.__annotations__ = {**func.__annotations__, "return": shown}
        return wrapped

    return decorate
