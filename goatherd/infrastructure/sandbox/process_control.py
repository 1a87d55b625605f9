"""How a confined command's whole process tree is killed: cgroup leaf or subreaper.

Every exec's processes die when the command exits, when it times out and
when the host dies (ADR 0031). Two mechanisms do it:

- ``cgroup``: a cgroup v2 leaf per exec below the host's own cgroup, where
  the host may create one (delegated to its user, or root); the command's
  process joins it before it runs and ``cgroup.kill`` ends every member.
- ``subreaper``: the launcher is a child subreaper (``PR_SET_CHILD_SUBREAPER``)
  and kills every descendant it finds below itself (stop all, then kill all).

``ProcessControl.AUTO`` takes the cgroup where it can and says why it could
not otherwise; ``CGROUP`` refuses to run without one (fail-closed);
``SUBREAPER`` never touches cgroups.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Final

from goatherd.application.errors import ContainmentError, ContainmentUnavailableError
from goatherd.infrastructure.sandbox.launch import cgroup

__all__ = [
    "ExecTree",
    "ProcessControl",
    "ProcessControlChoice",
    "describe_process_control",
    "open_exec_tree",
]

_EMPTY_SECONDS: Final = 10.0


class ProcessControl(enum.StrEnum):
    """Which mechanism kills a command's process tree."""

    AUTO = "auto"
    CGROUP = "cgroup"
    SUBREAPER = "subreaper"


@dataclass(frozen=True, slots=True)
class ProcessControlChoice:
    """The mechanism in use for an exec, and why.

    Attributes:
        mechanism: ``CGROUP`` or ``SUBREAPER`` (never ``AUTO``).
        reason: one line naming why (the cgroup directory, or why none).
    """

    mechanism: ProcessControl
    reason: str


@dataclass(frozen=True, slots=True)
class ExecTree:
    """One exec's process tree: its cgroup leaf, if it has one.

    Attributes:
        choice: the mechanism in use.
        leaf: the cgroup leaf (``None`` under the subreaper).
    """

    choice: ProcessControlChoice
    leaf: str | None = None

    def kill(self) -> None:
        """SIGKILL every process of the tree now (cgroup only; idempotent)."""
        if self.leaf is not None:
            cgroup.kill_leaf(self.leaf)

    def close(self) -> None:
        """Kill what is left, wait until the leaf is empty, remove it.

        Raises:
            ContainmentError: when processes survived ``cgroup.kill``.
        """
        if self.leaf is None:
            return
        cgroup.kill_leaf(self.leaf)
        if not cgroup.wait_leaf_empty(self.leaf, _EMPTY_SECONDS):
            left = cgroup.leaf_pids(self.leaf)
            raise ContainmentError(
                f"landlock: {len(left)} processes survived cgroup.kill in {self.leaf}"
            )
        cgroup.remove_leaf(self.leaf)


def _subreaper(reason: str) -> ExecTree:
    return ExecTree(ProcessControlChoice(ProcessControl.SUBREAPER, reason))


def open_exec_tree(mode: ProcessControl) -> ExecTree:
    """Prepare the process control of one exec (a fresh cgroup leaf, or none).

    Raises:
        ContainmentUnavailableError: ``CGROUP`` was required and no cgroup
            leaf can be made here.
    """
    if mode is ProcessControl.SUBREAPER:
        return _subreaper("subreaper: requested (ProcessControl.SUBREAPER)")
    try:
        parent = cgroup.delegated_cgroup()
        cgroup.sweep_stale_leaves(parent)
        leaf = cgroup.make_leaf(parent)
    except OSError as exc:
        why = exc.strerror or str(exc)
        if exc.filename:
            why = f"{exc.filename}: {why}"
        if mode is ProcessControl.CGROUP:
            raise ContainmentUnavailableError(
                f"landlock: process control 'cgroup' is required but no cgroup "
                f"leaf can be made here ({why}); refusing to run"
            ) from exc
        return _subreaper(f"subreaper: no cgroup v2 leaf can be made here ({why})")
    reason = f"cgroup: a cgroup v2 leaf per exec under {parent} (cgroup.kill)"
    return ExecTree(ProcessControlChoice(ProcessControl.CGROUP, reason), leaf)


def describe_process_control(mode: ProcessControl) -> ProcessControlChoice:
    """Return the mechanism an exec would use now (makes and removes a leaf).

    Raises:
        ContainmentUnavailableError: as :func:`open_exec_tree`.
    """
    tree = open_exec_tree(mode)
    tree.close()
    return tree.choice
