"""Upcasters: retired schema refs read as today's events.

Older traces hold records under refs the runtime no longer writes:

- the ``shepherd.*`` prefix of every runtime ref (the runtime's first name);
- ``goatherd.checkpoint.created.v1`` / ``restored.v1``, whose payload named
  git's ``stash_sha`` and ``head_sha`` instead of a backend-neutral state;
- ``goatherd.tree.captured.v1`` / ``applied.v1`` (the same, for workspace
  captures), later ``goatherd.workspace.*``.

Each upcaster maps the stored payload to the current class's payload (the
retired keys stay as extensions, so nothing is lost); the record keeps its
stored id. A v1 checkpoint carries no state digest and no snapshot digest:
it reads as ``state_digest=""``, which the runtime never restores (nothing
could check the bytes it would apply).

The seed also placed ``scope.forked``/``merged``/``discarded`` on the
parent's path only, without ``parent_owner``: that is a layout, not a
schema, and the runtime fold reads it (see ``goatherd.domain.runtime_state``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from goatherd.domain.events.base import RuntimeEvent, register_upcaster
from goatherd.domain.events.checkpoint import CheckpointCreated, CheckpointRestored
from goatherd.domain.events.output import OutputSealed, OutputSettled
from goatherd.domain.events.run import RunCompleted, SupervisorIntervened
from goatherd.domain.events.scope import (
    GuidanceInjected,
    MergeProposed,
    ScopeDiscarded,
    ScopeForked,
    ScopeHalted,
    ScopeMerged,
    SupervisorDecided,
    WorkspaceApplied,
    WorkspaceCaptured,
)

__all__ = ["GIT_BACKEND", "upcast_git_checkpoint", "upcast_git_tree"]

GIT_BACKEND: Final = "git"
_SAME_SHAPE: Final[tuple[type[RuntimeEvent], ...]] = (
    ScopeForked,
    ScopeMerged,
    ScopeDiscarded,
    ScopeHalted,
    GuidanceInjected,
    WorkspaceCaptured,
    WorkspaceApplied,
    MergeProposed,
    SupervisorDecided,
    CheckpointCreated,
    CheckpointRestored,
    OutputSealed,
    OutputSettled,
    RunCompleted,
    SupervisorIntervened,
)


def _same(payload: Mapping[str, Any], owner: str) -> dict[str, Any]:
    del owner
    return dict(payload)


def _text(payload: Mapping[str, Any], key: str) -> str:
    value = payload.get(key, "")
    if not isinstance(value, str):
        raise TypeError(f"payload.{key} must be a string")
    return value


def upcast_git_tree(payload: Mapping[str, Any], owner: str) -> dict[str, Any]:
    """Read a ``tree.captured/applied.v1`` payload as a workspace record."""
    del owner
    out = dict(payload)
    out.update(backend=GIT_BACKEND, revision=_text(payload, "head_sha"))
    out["state_digest"] = ""
    return out


def upcast_git_checkpoint(payload: Mapping[str, Any], owner: str) -> dict[str, Any]:
    """Read a ``checkpoint.created/restored.v1`` payload as its v2 shape."""
    out = upcast_git_tree(payload, owner)
    out["checkpoint_id"] = _text(payload, "checkpoint_id")
    return out


def _register() -> None:
    for cls in _SAME_SHAPE:
        register_upcaster(
            "shepherd." + cls.SCHEMA.removeprefix("goatherd."), cls, _same
        )
    for prefix in ("goatherd.", "shepherd."):
        register_upcaster(
            f"{prefix}tree.captured.v1", WorkspaceCaptured, upcast_git_tree
        )
        register_upcaster(f"{prefix}tree.applied.v1", WorkspaceApplied, upcast_git_tree)
        register_upcaster(
            f"{prefix}checkpoint.created.v1", CheckpointCreated, upcast_git_checkpoint
        )
        register_upcaster(
            f"{prefix}checkpoint.restored.v1", CheckpointRestored, upcast_git_checkpoint
        )


_register()
