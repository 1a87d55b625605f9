"""Refusals that name the command to type (ADR 0085).

The runtime's errors speak the API (``seq=7001``, "the same verb again");
the domain knows no command line. At the CLI boundary,
:func:`refusal` turns each such error into one line that ends with the exact
``goatherd`` command that would work next, with the ``--db`` and
``--workspace`` options the user typed, so that it can be pasted as it
stands. :func:`goatherd.cli.common.recovered` applies it to every error that
leaves a lifecycle command, while the command's folded model is still open
(a busy workspace's claimant is looked up there).
"""

from __future__ import annotations

import argparse
import os
import shlex
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from goatherd.cli.exits import CommandError
from goatherd.cli.parser import DB_ENV

if TYPE_CHECKING:
    from goatherd.application.runtime_model import RuntimeModel

__all__ = ["command", "refusal", "typed_options"]

_PRESENT: Final = {
    "selected": "select",
    "applied": "apply",
    "released": "release",
    "discarded": "discard",
}
_SCOPES: Final = "`goatherd scopes`"


def typed_options(args: argparse.Namespace, *, workspace: bool = True) -> list[str]:
    """Return the ``--db`` and ``--workspace`` options as the user gave them.

    ``--db`` is left out when it came from ``$GOATHERD_DB`` (the same
    variable serves the next command); ``workspace=False`` leaves out
    ``--workspace`` (for a command that takes none).
    """
    options: list[str] = []
    db = getattr(args, "db", None)
    if db and db != os.environ.get(DB_ENV):
        options += ["--db", db]
    for spec in (getattr(args, "workspace", None) or []) if workspace else []:
        options += ["--workspace", spec]
    return options


def command(args: argparse.Namespace, *words: str, workspace: bool = True) -> str:
    """Return ``goatherd WORDS... OPTIONS``, quoted for a POSIX shell, in backticks."""
    options = typed_options(args, workspace=workspace)
    line = shlex.join(["goatherd", *words, *options])
    return f"`{line}`"


def _before(text: str, marker: str) -> str:
    """``text`` up to ``marker`` (all of it when the marker is absent)."""
    head, found, _ = text.partition(marker)
    return head if found else text


def _claim_of_intent(claimed_by: str) -> tuple[str, str]:
    """Return ``(verb, seq)`` of a settle intent ``<owner>:settle:<verb>:<seq>``."""
    rest = claimed_by.rpartition(":settle:")[2]
    verb, _, seq = rest.rpartition(":")
    return _PRESENT.get(verb, verb), seq


def _settle_claim(args: argparse.Namespace, output_id: str, claimed_by: str) -> str:
    verb, seq = _claim_of_intent(claimed_by)
    finish = command(args, "settle", output_id, verb, "--resume", seq)
    end = command(args, "settle", output_id, "release", "--resume", seq)
    if verb == "release":
        return f"finish it: {finish}"
    return f"finish it: {finish}, or end it: {end}"


def _holder_claim(
    args: argparse.Namespace, holder: str, model: RuntimeModel | None
) -> str:
    """How to finish the claim ``holder`` (an output or checkpoint) holds."""
    if model is not None:
        out = model.output(holder)
        if out.exists and out.claimed_by:
            return _settle_claim(args, holder, out.claimed_by)
        cp = model.checkpoint(holder)
        if cp.exists and cp.claimed_by:
            resume = command(args, "restore", holder, "--resume", str(cp.claimed_by))
            return f"finish it: {resume}"
    return f"{_SCOPES} shows who holds it"


def refusal(
    error: BaseException, args: argparse.Namespace, model: RuntimeModel | None = None
) -> CommandError | None:
    """Return the CLI's one-line refusal for a runtime error, or ``None``.

    ``None``: the error is not one whose next step is a command (an outage,
    a bug, a refusal that already says what to do). The most specific
    translation wins (an ``OutputClaimedError`` is an ``OutputConsumedError``).
    """
    for kind, translate in _translations():
        if isinstance(error, kind):
            message = translate(error, args, model)
            return None if message is None else CommandError(message)
    return None


_Translate = Callable[[Any, argparse.Namespace, "RuntimeModel | None"], "str | None"]


def _translations() -> list[tuple[type[BaseException], _Translate]]:
    """Each refusal's translation, most specific type first."""
    from goatherd.application.errors import ApplyConflictError, SettleCommitError
    from goatherd.domain.runtime_errors import (
        CheckpointClaimedError,
        CheckpointNotRestorableError,
        InconsistentTraceError,
        OutputClaimedError,
        OutputConsumedError,
        ParentMovedError,
        RestoreEffectLandedError,
        ScopeClaimedError,
        ScopeStateError,
        SettleEffectLandedError,
        SnapshotReleasedError,
        WorkspaceBusyError,
    )

    return [
        (SettleEffectLandedError, _settle_landed),
        (RestoreEffectLandedError, _restore_landed),
        (OutputClaimedError, _output_claimed),
        (OutputConsumedError, _output_consumed),
        (CheckpointClaimedError, _checkpoint_claimed),
        (SnapshotReleasedError, _as_is),  # the restore command reports it
        (CheckpointNotRestorableError, _checkpoint_used),
        (ParentMovedError, _parent_moved),
        (WorkspaceBusyError, _workspace_busy),
        (ScopeClaimedError, _scope_claimed),
        (ScopeStateError, _scope_state),
        (ApplyConflictError, _apply_conflict),
        (SettleCommitError, _settle_commit),
        (InconsistentTraceError, _inconsistent),
    ]


def _as_is(error: Any, args: argparse.Namespace, model: RuntimeModel | None) -> None:
    return None


def _settle_landed(
    error: Any, args: argparse.Namespace, model: RuntimeModel | None
) -> str:
    verb = _PRESENT.get(error.action, error.action)
    seq = str(error.seq)
    base = _before(str(error), "; finish it with seq=")
    commit = ["--commit"] if getattr(args, "commit", False) else []
    finish = command(args, "settle", error.output_id, verb, "--resume", seq, *commit)
    ends = [e.strip() for e in error.ending.split(" or ") if e.strip()]
    endings = " or ".join(
        command(args, "settle", error.output_id, end, "--resume", seq) for end in ends
    )
    return f"{base}; finish it: {finish}" + (f", or end it: {endings}" if ends else "")


def _restore_landed(
    error: Any, args: argparse.Namespace, model: RuntimeModel | None
) -> str:
    base = _before(str(error), "; finish it with seq=")
    resume = command(args, "restore", error.checkpoint_id, "--resume", str(error.seq))
    return f"{base}; finish it: {resume}"


def _output_claimed(
    error: Any, args: argparse.Namespace, model: RuntimeModel | None
) -> str:
    _, seq = _claim_of_intent(error.claimed_by)
    how = _settle_claim(args, error.output_id, error.claimed_by)
    return (
        f"output {error.output_id} is claimed by settle attempt {seq}"
        f" ({error.claimed_by}), whose effect may have landed; only that"
        f" attempt may finish or end it: {how}"
    )


def _output_consumed(
    error: Any, args: argparse.Namespace, model: RuntimeModel | None
) -> str:
    return f"{error}; {_SCOPES} lists the outputs still unconsumed"


def _checkpoint_claimed(
    error: Any, args: argparse.Namespace, model: RuntimeModel | None
) -> str:
    resume = command(
        args, "restore", error.checkpoint_id, "--resume", str(error.claimed_by)
    )
    return f"{error}; only that attempt may finish it: {resume}"


def _checkpoint_used(
    error: Any, args: argparse.Namespace, model: RuntimeModel | None
) -> str:
    return f"{error}; {_SCOPES} lists the checkpoints still valid"


def _parent_moved(
    error: Any, args: argparse.Namespace, model: RuntimeModel | None
) -> str:
    base = _before(str(error), "; use SettleApply")
    apply = command(args, "settle", error.output_id, "apply")
    return f"{base}; apply it onto the moved parent instead: {apply}"


def _workspace_busy(
    error: Any, args: argparse.Namespace, model: RuntimeModel | None
) -> str:
    base = _before(str(error), "; retry once it settles")
    how = _holder_claim(args, error.holder, model)
    return f"{base}; retry once it settles, or {how}"


def _scope_claimed(
    error: Any, args: argparse.Namespace, model: RuntimeModel | None
) -> str:
    base = _before(str(error), f" ({error.finish})")
    return f"{base}: {_holder_claim(args, error.holder, model)}"


def _scope_state(
    error: Any, args: argparse.Namespace, model: RuntimeModel | None
) -> str:
    return f"{error}; {_SCOPES} shows each scope's state"


def _apply_conflict(
    error: Any, args: argparse.Namespace, model: RuntimeModel | None
) -> str | None:
    output = getattr(args, "output", None)
    if not isinstance(output, str):
        return None  # not a settle: the caller's message stands
    diff = command(args, "diff", output)
    end = command(args, "settle", output, "release")
    return f"{error}; {diff} shows the output's changes; end it with {end}"


def _settle_commit(
    error: Any, args: argparse.Namespace, model: RuntimeModel | None
) -> str | None:
    output = error.output_id or getattr(args, "output", "")
    if not output:
        return None
    verb = _PRESENT.get(getattr(args, "action", ""), getattr(args, "action", ""))
    base = _before(str(error), "; the settlement stands")
    base = _before(base, "; nothing was settled")
    if error.settled:
        retry = command(
            args, "settle", output, verb, "--resume", str(error.seq), "--commit"
        )
        return f"{base}; the settlement stands: once fixed, commit it with {retry}"
    plain = command(args, "settle", output, verb)
    return (
        f"{base}; nothing was settled: fix it and retry, or settle without a"
        f" commit: {plain}"
    )


def _inconsistent(
    error: Any, args: argparse.Namespace, model: RuntimeModel | None
) -> str:
    verify = command(args, "verify", workspace=False)
    recover = command(args, "recover", workspace=False)
    return f"{error}; {verify} and {recover} name the records"
