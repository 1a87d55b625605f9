"""The exception to the command block: ``rm -r`` of the agent's own worktree paths.

``own_removal_targets`` returns the worktree paths a line removes when its
only destructive commands are plain ``rm`` of literal relative paths (no
glob, variable, ``~``, ``..``, absolute path, ``.git`` or ``cd``), else
``None`` (ADR 0086). Reads text only; imports ``shell``, ``command_options``
and ``destructive``.
"""

from __future__ import annotations

import os
import posixpath
from typing import Final

from goatherd.integrations.mcp.command_options import _getopt
from goatherd.integrations.mcp.destructive import _RM_LONGS, _judge
from goatherd.integrations.mcp.shell import ShellSyntaxError, Word, parse_commands

__all__ = [
    "own_removal_targets",
]

_RM_OWN_SHORTS: Final = frozenset("rRfvdiI")
_RM_OWN_LONGS: Final = frozenset(
    {"force", "recursive", "dir", "verbose", "interactive", "one-file-system"}
)
_CHANGES_DIRECTORY: Final = frozenset({"cd", "pushd", "popd"})


def own_removal_targets(command: str, cwd: str = "") -> tuple[str, ...] | None:
    """The worktree paths a line removes, when its only destructive parts do that.

    Returns the targets (relative to the worktree root, normalized) when
    every destructive command of ``command`` is a plain ``rm`` (no wrapper)
    whose options are the usual ones and whose operands are literal paths
    relative to ``cwd`` (itself relative to the worktree): no glob, variable
    or substitution, no ``~``, ``..`` or absolute path, nothing in ``.git``,
    not the worktree itself. ``None`` otherwise, and when the line changes
    directory (``cd``): the targets could not be resolved. This reads text
    only; the caller checks that each target resolves inside the worktree.
    """
    try:
        commands = parse_commands(command)
    except ShellSyntaxError:
        return None
    base = _relative_cwd(cwd)
    if base is None:
        return None
    targets: list[str] = []
    for simple in commands:
        words = list(simple.words)
        first = words[0].literal if words else ""
        if first is None or os.path.basename(first) in _CHANGES_DIRECTORY:
            return None
        if _judge(words, 0) is None:
            continue
        if os.path.basename(first) != "rm":
            return None
        found = _plain_rm(words[1:], base)
        if found is None:
            return None
        targets.extend(found)
    return tuple(targets) if targets else None


def _relative_cwd(cwd: str) -> str | None:
    if cwd.startswith("/") or "\0" in cwd:
        return None
    parts = [part for part in cwd.split("/") if part not in ("", ".")]
    if ".." in parts or ".git" in parts:
        return None
    return "/".join(parts)


def _plain_rm(args: list[Word], base: str) -> list[str] | None:
    parsed = _getopt(args, _RM_LONGS)
    if parsed.computed or not parsed.shorts <= _RM_OWN_SHORTS:
        return None
    if not parsed.longs <= _RM_OWN_LONGS or not parsed.operands:
        return None
    targets = []
    for operand in parsed.operands:
        text = operand.literal
        if text is None or not text or text.startswith(("/", "~")):
            return None
        parts = [part for part in text.split("/") if part not in ("", ".")]
        if not parts or ".." in parts or ".git" in parts or "\0" in text:
            return None
        target = posixpath.join(base, *parts) if base else "/".join(parts)
        targets.append(target)
    return targets
