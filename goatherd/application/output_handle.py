"""The seed's output-level API: the :class:`RetainedOutput` handle.

An output id plus the :class:`~goatherd.application.RuntimeContext` its
commands run with, like :class:`~goatherd.application.Scope` (whose ``seal``
returns one): every property reads the caught-up runtime model, ``settle``
runs the settle command and returns its ``returns.Result``. It imports the
commands and the runtime model, never ``handles``.
"""

from __future__ import annotations

from datetime import datetime

from returns.result import Result, safe

from goatherd.application.commands import outputs
from goatherd.application.commands.context import RuntimeContext
from goatherd.application.commands.settle_commit import (
    CommitRequest,
    commit_request,
    recorded_commit,
)
from goatherd.application.failures import (
    SETTLE_FAILURES,
    SettleFailure,
)
from goatherd.application.ports import truncate_diff
from goatherd.domain import (
    OutputState,
    RetainedOutputAggregate,
    SettlementAction,
    WorkspaceState,
    owner_of_output,
    scope_id_for,
)

__all__ = [
    "RetainedOutput",
]


class RetainedOutput:
    """A sealed result, settle-able exactly once (a handle reading the trace).

    Identity and lifecycle (``id``, ``scope_id``, ``state``, ``action``,
    ``claimed_by``) are properties; what was sealed (``workspace()``,
    ``baseline()``, ``changes()``, ``diff()``) and when (``sealed_at()``,
    ``settled_at()``) are methods, as the seed has them: they read records
    and the blob store, and ``diff`` takes a bound.
    """

    def __init__(self, context: RuntimeContext, output_id: str) -> None:
        """Bind the handle (``seal`` or ``ScopeManager.output`` make one)."""
        self._ctx = context
        self._id = output_id

    def __repr__(self) -> str:
        """Show the id and state."""
        return f"RetainedOutput({self._id!r}, state={self.state.value!r})"

    def __eq__(self, other: object) -> bool:
        """Handles on the same output are equal."""
        return isinstance(other, RetainedOutput) and other._id == self._id

    def __hash__(self) -> int:
        """Hash by id."""
        return hash(self._id)

    def _value(self) -> RetainedOutputAggregate:
        self._ctx.model.refresh()
        return self._ctx.model.output(self._id)

    @property
    def id(self) -> str:
        """``out:<owner>:<seq>``."""
        return self._id

    @property
    def scope_id(self) -> str:
        """The scope that sealed it."""
        return scope_id_for(self._value().scope_owner or owner_of_output(self._id))

    @property
    def state(self) -> OutputState:
        """The consume-once state."""
        return self._value().state

    @property
    def action(self) -> SettlementAction | None:
        """The verb that consumed it (``None`` until settled)."""
        return self._value().action

    @property
    def claimed_by(self) -> str:
        """The settle intent holding the effect claim (``""``: none)."""
        return self._value().claimed_by

    def workspace(self) -> WorkspaceState:
        """The sealed workspace state."""
        return self._value().workspace

    def baseline(self) -> WorkspaceState:
        """The fork baseline the changes are against."""
        return self._value().baseline

    def changes(self) -> list[dict[str, str]]:
        """The frozen ``{path, kind}`` changes, in diff order (a copy)."""
        return [dict(c) for c in self._value().changes]

    def diff(self, max_lines: int = 0) -> str:
        """The unified diff against the baseline, read from the blob store.

        Sealing stores it cut at the blob limit; ``max_lines > 0`` keeps only
        that many lines (and marks the cut).

        Raises:
            BlobIntegrityError: the stored bytes are missing or do not match.
        """
        return truncate_diff(outputs.output_diff(self._ctx, self._value()), max_lines)

    def sealed_at(self) -> datetime | None:
        """When its sealed record committed (``None``: not known)."""
        return self._ctx.trace.intent_committed_at(self._value().sealed_intent)

    def settled_at(self) -> datetime | None:
        """When its settlement committed (``None`` until settled)."""
        intent = self._value().settled_intent
        return self._ctx.trace.intent_committed_at(intent) if intent else None

    def settle(
        self,
        action: str,
        *,
        seq: int | None = None,
        commit: bool = False,
        message: str | None = None,
        author: str | None = None,
    ) -> Result[None, SettleFailure]:
        """Consume the output exactly once with ``action``.

        ``commit``, ``message`` and ``author`` as for ``ScopeManager.settle``.

        Raises:
            ValueError: ``message`` or ``author`` without ``commit=True``.
        """
        request = commit_request(commit, message, author)
        return self._settle(action, seq, request)

    @safe(exceptions=SETTLE_FAILURES)
    def _settle(
        self, action: str, seq: int | None, request: CommitRequest | None
    ) -> None:
        outputs.settle(self._ctx, self._id, action, seq, request)

    def commit(self) -> str | None:
        """The git commit a ``settle(..., commit=True)`` recorded (``None``: none)."""
        found = recorded_commit(self._ctx, output_id=self._id)
        return found.commit if found is not None else None
