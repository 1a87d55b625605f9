"""Retained-output events: sealed, claimed, settled.

An output's records sit on the output's own path (``out:<owner>:<seq>``, its
stream) and on the sealing scope's path. ``run_output.sealed`` freezes the
state, the baseline and the change list (and, in newer records, the digest of
the unified diff kept in the blob store). ``run_output.claimed`` is appended
before a select or apply changes the parent's workspace: it also sits on the
parent's path and names the workspace state it was decided against, so two
settles into one parent cannot both win. ``run_output.settled`` consumes the
output; after an apply it records the base it landed on and the result.
``run_output.committed`` follows a settlement asked to end as a git commit: it
names the commit made on the parent's branch (ADR 0084).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from goatherd.domain.events.base import (
    RuntimeEvent,
    count_contradiction,
    register_event,
    state_contradiction,
)
from goatherd.domain.records import RecordMode
from goatherd.domain.settlement import SettlementAction
from goatherd.domain.workspace import WorkspaceState

__all__ = ["OutputClaimed", "OutputCommitted", "OutputSealed", "OutputSettled"]

_DECL: Final = RecordMode.DECLARATION
_CAPT: Final = RecordMode.CAPTURE


@register_event
@dataclass(frozen=True, kw_only=True)
class OutputSealed(RuntimeEvent):
    """A scope's workspace was sealed as an output.

    Attributes:
        output_id: ``out:<owner>:<seq>``.
        scope: the sealing scope's id.
        backend: the sealed state's backend.
        revision: the sealed state's revision.
        state_digest: the sealed state's digest.
        baseline_digest: the fork baseline's digest.
        change_count: how many changes.
        state: the sealed state.
        baseline: the fork baseline.
        changes: ``{path, kind}`` per change, in diff order.
        diff_blob: the blob address (``sha256:<hex>``) of the stored unified diff.
        diff_truncated: whether the stored diff was cut at the blob limit.
    """

    SCHEMA = "goatherd.run_output.sealed.v1"
    MODE = _DECL
    KIND_LABEL = "run_output:sealed"

    output_id: str
    scope: str
    backend: str
    revision: str
    state_digest: str
    baseline_digest: str
    change_count: int
    state: WorkspaceState
    baseline: WorkspaceState
    changes: tuple[Mapping[str, str], ...]
    diff_blob: str | None = None
    diff_truncated: bool | None = None

    def contradiction(self) -> str | None:
        """Refuse digests, backend, revision or a count its own fields disagree with."""
        return (
            state_contradiction(
                "state", self.state, self.state_digest, self.backend, self.revision
            )
            or state_contradiction("baseline", self.baseline, self.baseline_digest)
            or count_contradiction(self.change_count, self.changes)
        )


@register_event
@dataclass(frozen=True, kw_only=True)
class OutputClaimed(RuntimeEvent):
    """A settle claimed the output before its workspace effect.

    Attributes:
        output_id: the output.
        action: the claiming settle's verb.
        settle_intent: the claiming settle's append-intent id.
        parent_owner: the parent whose workspace the effect changes (absent
            in older records).
        base_digest: the parent's workspace digest the claim was decided on.
    """

    SCHEMA = "goatherd.run_output.claimed.v1"
    MODE = _DECL
    KIND_LABEL = "run_output:claimed"

    output_id: str
    action: SettlementAction
    settle_intent: str
    parent_owner: str | None = None
    base_digest: str | None = None


@register_event
@dataclass(frozen=True, kw_only=True)
class OutputSettled(RuntimeEvent):
    """An output was consumed (caused by its sealed record).

    Attributes:
        output_id: the output.
        action: the verb.
        state_digest: the sealed state's digest.
        parent_owner: the parent the effect landed on (select/apply).
        base_digest: the parent's digest the effect was applied onto.
        result_digest: the parent's digest after the effect.
    """

    SCHEMA = "goatherd.run_output.settled.v1"
    MODE = _CAPT
    KIND_LABEL = "run_output:settled"

    output_id: str
    action: SettlementAction
    state_digest: str
    parent_owner: str | None = None
    base_digest: str | None = None
    result_digest: str | None = None


@register_event
@dataclass(frozen=True, kw_only=True)
class OutputCommitted(RuntimeEvent):
    """A settled output's effect was committed on the parent's branch.

    It sits on the output's path and the parent workspace's, after the
    settlement (its cause, on the output's path). The commit's message ends
    with the trailers ``Goatherd-Output`` (this output) and
    ``Goatherd-Trace-Head`` (the settlement record's id).

    Attributes:
        output_id: the output.
        settle_intent: the settle attempt that asked for the commit.
        commit: the commit's object id.
        branch: the branch it was made on (``refs/heads/...``).
        parent_commit: the commit it was made on top of.
        tree: the commit's tree.
        paths: the paths it changed, sorted.
        state_digest: the parent's workspace digest once committed.
        adopted: the commit was found on the branch (made by an attempt that
            died before this record), not made by the recording attempt.
    """

    SCHEMA = "goatherd.run_output.committed.v1"
    MODE = _CAPT
    KIND_LABEL = "run_output:committed"

    output_id: str
    settle_intent: str
    commit: str
    branch: str
    parent_commit: str
    tree: str
    paths: tuple[str, ...]
    state_digest: str
    adopted: bool = False
