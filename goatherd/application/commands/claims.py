"""A claim is the end of the race: no scope it needs may end under it.

A settle (select/apply) or a restore appends its claim before it touches a
workspace; from then on it always finishes (ADR 0068). Every command that
ends a scope (halt, discard, merge, a settle that discards its child) asks
:func:`check_no_claim_needs` inside its decision: the scope may not end while
an unfinished claim names it as the settled child, the parent the effect
lands on, the restored scope or the owner of the claimed workspace. The
decision also guards the heads of the workspace paths it read, so a claim
committing between the check and the append makes the append conflict and
the command decide again (and be refused); the claim guards the ending
scopes' paths the same way.
"""

from __future__ import annotations

from goatherd.application.runtime_model import RuntimeModel
from goatherd.domain import ScopeAggregate, ScopeClaimedError

__all__ = ["check_no_claim_needs"]


def check_no_claim_needs(
    model: RuntimeModel,
    scope: ScopeAggregate,
    subject: str,
    *,
    allow: str = "",
) -> tuple[str, ...]:
    """Refuse ending ``scope`` while an unfinished claim needs it.

    ``allow`` names a claim holder the ending itself finishes (a claimant
    ending its own output with ``discarded``). Returns the workspace owners
    whose heads the ending decision must guard.

    Raises:
        ScopeClaimedError: an unfinished claim needs the scope.
    """
    owner = scope.owner
    spaces = [model.workspace_owner(owner)]
    if scope.parent_owner is not None:
        spaces.append(model.workspace_owner(scope.parent_owner))
    guards = tuple(dict.fromkeys(spaces))
    for ws_owner in guards:
        holder = model.scope(ws_owner).workspace_claim
        if not holder or holder == allow:
            continue
        needs, claimed_by, finish, kind, seq = _claim_of(model, holder, ws_owner)
        if owner in needs:
            raise ScopeClaimedError(
                subject,
                scope.scope_id,
                scope.state,
                holder,
                claimed_by,
                finish,
                kind=kind,
                seq=seq,
            )
    return guards


def _claim_of(
    model: RuntimeModel, holder: str, ws_owner: str
) -> tuple[set[str], str, str, str, int | None]:
    """Return what ``holder``'s claim needs and who finishes it, and how.

    The owners it needs, its claimant, the command that finishes it, the kind
    of holder and the claimant's ``seq``.
    """
    out = model.output(holder)
    if out.exists and out.claimed_by:
        seq = out.claimed_by.rpartition(":")[2]
        # The intent is "<owner>:settle:<verb>:<seq>" and an owner may itself
        # contain ":settle:": the verb is what follows the last one.
        verb = out.claimed_by.rsplit(":settle:", 1)[-1].rpartition(":")[0]
        needs = {out.scope_owner, out.claim_parent, ws_owner}
        finish = f"goatherd settle {holder} {verb} --resume {seq}"
        return needs, out.claimed_by, finish, "output", _int(seq)
    cp = model.checkpoint(holder)
    if cp.exists and cp.claimed_by:
        needs = {cp.scope_owner, ws_owner}
        finish = f"goatherd restore {holder} --resume {cp.claimed_by}"
        claimant = f"restore attempt {cp.claimed_by}"
        return needs, claimant, finish, "checkpoint", _int(str(cp.claimed_by))
    # A claim whose holder the fold cannot read: refuse every ending there.
    everyone = {ws_owner, *_everyone(model, ws_owner)}
    return everyone, holder, "its claimant's retry", "", None


def _int(text: str) -> int | None:
    try:
        return int(text)
    except ValueError:
        return None


def _everyone(model: RuntimeModel, ws_owner: str) -> set[str]:
    return {
        s.owner for s in model.scopes() if model.workspace_owner(s.owner) == ws_owner
    }
