"""Settle as a commit: the landed winner becomes one git commit, recorded once.

``settle(..., commit=True)`` is a settle (select or apply) followed by a
commit on the branch the parent's workspace has checked out (ADR 0084):

- Before the effect, on a first attempt, the parent's sandbox must be a
  :class:`~goatherd.application.ports.StateCommitter` on a branch with a known
  identity; otherwise :class:`SettleCommitError` says why and nothing is
  settled.
- After the settlement is recorded, the committer commits exactly the
  output's changed paths as the workspace holds them (the user's other
  uncommitted work stays uncommitted), with the trailers
  ``Goatherd-Output: <output id>``, ``Goatherd-Scope: <scope id>`` and
  ``Goatherd-Trace-Head: <settlement record id>``.
- Then ``run_output.committed`` (on the output's and the parent workspace's
  paths) and ``workspace.applied`` (the workspace's digest at the new HEAD)
  are appended under the intent ``<settle intent>:commit``.

Exactly once: a retry under the same ``seq`` skips a recorded commit; when the
commit was made but not recorded (a crash between the two), the retry finds
it by its ``Goatherd-Output`` trailer in the branch's recent history and
records it (``adopted``) instead of committing again.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from goatherd.application.commands.context import RuntimeContext
from goatherd.application.commands.scopes import parent_of
from goatherd.application.decisions import Decision
from goatherd.application.errors import SettleCommitError
from goatherd.application.ports import Sandbox, StateCommit, StateCommitter
from goatherd.domain import (
    OutputCommitted,
    RetainedOutputAggregate,
    SettlementAction,
    WorkspaceApplied,
    decode_fact,
    scope_id_for,
)

__all__ = [
    "CommitRequest",
    "HEAD_TRAILER",
    "OUTPUT_TRAILER",
    "SCOPE_TRAILER",
    "check_before_settle",
    "commit_intent",
    "commit_message",
    "commit_request",
    "commit_settled",
    "recorded_commit",
]

OUTPUT_TRAILER: Final = "Goatherd-Output"
SCOPE_TRAILER: Final = "Goatherd-Scope"
HEAD_TRAILER: Final = "Goatherd-Trace-Head"
_EFFECTS: Final = (SettlementAction.SELECT, SettlementAction.APPLY)
_TRAILER_LINE = re.compile(r"[A-Za-z0-9][A-Za-z0-9-]*: .*")


@dataclass(frozen=True, slots=True)
class CommitRequest:
    """How the settled winner is committed.

    Attributes:
        message: the commit message (``None``: one naming the output); the
            trailers are appended to it.
        author: ``"Name <email>"`` (``None``: the repository's identity).
    """

    message: str | None = None
    author: str | None = None


def commit_request(
    commit: bool, message: str | None, author: str | None
) -> CommitRequest | None:
    """Return the request ``settle``'s keywords make (``None``: no commit).

    Raises:
        ValueError: ``message`` or ``author`` without ``commit``.
    """
    if commit:
        return CommitRequest(message, author)
    if message is not None or author is not None:
        raise ValueError("settle: message= and author= go with commit=True")
    return None


def commit_intent(settle_intent: str) -> str:
    """Return ``<settle intent>:commit``, the intent of the commit's record."""
    return f"{settle_intent}:commit"


def _committer(
    sandbox: Sandbox, output_id: str, settled: bool, seq: int
) -> StateCommitter:
    if isinstance(sandbox, StateCommitter):
        return sandbox
    raise SettleCommitError(
        f"the parent's workspace is a {sandbox.backend()} sandbox, which cannot"
        " commit (only a git sandbox can)",
        output_id=output_id,
        settled=settled,
        seq=seq,
    )


def _effect_verb(
    output_id: str, verb: SettlementAction, settled: bool, seq: int
) -> None:
    if verb not in _EFFECTS:
        raise SettleCommitError(
            f"{verb.value} leaves the parent's workspace as it is; only select"
            " and apply have something to commit",
            output_id=output_id,
            settled=settled,
            seq=seq,
        )


def check_before_settle(
    ctx: RuntimeContext,
    out: RetainedOutputAggregate,
    verb: SettlementAction,
    request: CommitRequest,
    seq: int,
) -> None:
    """Refuse, before anything is claimed, a settle that could not commit.

    Raises:
        SettleCommitError: a verb with no effect, a parent workspace that is
            no git branch, or no identity; nothing was settled.
        RootScopeError, NoSandboxError: as the settle itself would.
    """
    _effect_verb(out.output_id, verb, False, seq)
    parent_owner = parent_of(ctx.scope(out.scope_owner))
    sandbox = ctx.sandbox(parent_owner, f"parent of {scope_id_for(out.scope_owner)}")
    committer = _committer(sandbox, out.output_id, False, seq)
    try:
        committer.check_committable(request.author)
    except SettleCommitError as error:
        raise SettleCommitError(
            error.reason, output_id=out.output_id, settled=False, seq=seq
        ) from error


def commit_message(
    out: RetainedOutputAggregate, verb: SettlementAction, message: str | None
) -> str:
    """Return the commit message: ``message`` (or a default) and the trailers."""
    scope_id = scope_id_for(out.scope_owner)
    if message is None or not message.strip():
        count = len(out.change_paths)
        noun = "path" if count == 1 else "paths"
        message = (
            f"goatherd: {verb.value} {out.output_id}\n\n"
            f"The sealed work of {scope_id}, {count} changed {noun}, settled"
            f" with {verb.value}."
        )
    trailers = (
        f"{OUTPUT_TRAILER}: {out.output_id}\n"
        f"{SCOPE_TRAILER}: {scope_id}\n"
        f"{HEAD_TRAILER}: {out.settled_record}\n"
    )
    text = message.strip("\n")
    last = text.rsplit("\n\n", 1)[-1].splitlines()
    joins = "\n\n" not in text and len(last) == 1 and ":" not in last[0]
    if not joins and last and all(_TRAILER_LINE.fullmatch(x) for x in last):
        return f"{text}\n{trailers}"  # extend the message's own trailer block
    return f"{text}\n\n{trailers}"


def commit_settled(
    ctx: RuntimeContext,
    output_id: str,
    verb: SettlementAction,
    intent: str,
    request: CommitRequest,
) -> str:
    """Commit the settled output's paths once and record it; return the sha.

    Raises:
        SettleCommitError: with ``settled=True``: nothing to commit, the
            branch moved, detached HEAD or no identity found now, a workspace
            that cannot commit.
        NoSandboxError, SandboxError, TraceStoreError: as recording does.
    """
    seq = int(intent.rpartition(":")[2])
    _effect_verb(output_id, verb, True, seq)
    done = intent_commit(ctx, commit_intent(intent))
    if done is not None:
        return done
    ctx.model.refresh()
    out = ctx.model.output(output_id)
    parent_owner = parent_of(ctx.scope(out.scope_owner))
    sandbox = ctx.sandbox(parent_owner, f"parent of {scope_id_for(out.scope_owner)}")
    committer = _committer(sandbox, output_id, True, seq)
    try:
        made = committer.find_commit(OUTPUT_TRAILER, output_id)
        adopted = made is not None
        if made is None:
            message = commit_message(out, verb, request.message)
            made = committer.commit_paths(
                out.change_paths, message, author=request.author
            )
            ctx.fault("after-git-commit", commit_intent(intent))
    except SettleCommitError as error:
        raise SettleCommitError(
            error.reason, output_id=output_id, settled=True, seq=seq
        ) from error
    state = sandbox.capture()
    commit: StateCommit = made

    def decide() -> Decision:
        current = ctx.model.output(output_id)
        ws_owner = ctx.model.workspace_owner(parent_owner)
        applied = WorkspaceApplied(
            backend=state.backend, revision=state.revision, state_digest=state.digest()
        )
        event = OutputCommitted(
            caused_by=(current.settled_record,),
            output_id=output_id,
            settle_intent=intent,
            commit=commit.sha,
            branch=commit.branch,
            parent_commit=commit.parent,
            tree=commit.tree,
            paths=tuple(commit.paths),
            state_digest=state.digest(),
            adopted=adopted,
        )
        return Decision().place(applied, ws_owner).place(event, output_id, ws_owner)

    ctx.record(commit_intent(intent), decide)
    return commit.sha


def intent_commit(ctx: RuntimeContext, intent: str) -> str | None:
    """Return the commit sha the committed ``intent`` recorded (``None``: none)."""
    if ctx.trace.read_append_intent(intent) is None:
        return None
    found = recorded_commit(ctx, intent_filter=intent)
    return found.commit if found is not None else ""


def recorded_commit(
    ctx: RuntimeContext, *, output_id: str = "", intent_filter: str = ""
) -> OutputCommitted | None:
    """Return the ``run_output.committed`` event of an output (or of an intent)."""
    after = -1
    while True:
        rows = ctx.trace.read_log(after, 1000, schema_refs=(OutputCommitted.SCHEMA,))
        if not rows:
            return None
        for row in rows:
            after = row.position
            if intent_filter and row.append_intent_id != intent_filter:
                continue
            event = decode_fact(row.record, row.position, row.append_intent_id).event
            if not isinstance(event, OutputCommitted):
                continue
            if output_id and event.output_id != output_id:
                continue
            return event
