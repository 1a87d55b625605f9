"""Three-way merging of deltas: path-level classification, git's line merge.

Two change sets are taken against the same base. A path only one side changed
takes that side; a path both sides changed identically is fine. A path both
sides changed differently is merged line by line with ``git merge-file`` (git's
own merge machinery, ADR 0083) when it is a regular text file on all three
sides with one mode; anything else (binary content, a mode change, a deletion
against a modification, an addition on both sides, a symlink or a file against
a directory) is a conflict with its reason. ``git merge-file`` runs on
temporary copies in a fresh directory outside any repository, through the
hardened runner, so no repository configuration, attribute, merge driver or
filter takes part.
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from goatherd.application.errors import ConflictHunk, LineRange
from goatherd.infrastructure.sandbox.gitrunner import GitRunner

__all__ = [
    "CLASH",
    "LineMerge",
    "Side",
    "conflicting_paths",
    "merge_lines",
    "merge_reason",
]

CLASH: Final = "a file on one side, a directory on the other"
_MARKER: Final = 41  # longer than any marker a file is likely to hold
_OURS: Final = b"<" * _MARKER
_BASE: Final = b"|" * _MARKER
_SPLIT: Final = b"=" * _MARKER
_THEIRS: Final = b">" * _MARKER
_BINARY_PROBE: Final = 8000  # git's own heuristic: a NUL in the first 8000 bytes
_REGULAR: Final = frozenset({0o100644, 0o100755})


def _parents(path: str) -> list[str]:
    parts = path.split("/")
    return ["/".join(parts[:depth]) for depth in range(1, len(parts))]


def conflicting_paths(
    theirs: Mapping[str, object], ours: Mapping[str, object]
) -> list[str]:
    """Return the sorted paths where ``theirs`` and ``ours`` disagree.

    Values are the per-path results (equal values mean the same change).
    """
    conflicts = {p for p, change in theirs.items() if p in ours and ours[p] != change}
    our_dirs = {parent for p in ours for parent in _parents(p)}
    their_dirs = {parent for p in theirs for parent in _parents(p)}
    conflicts |= {p for p in theirs if p in our_dirs and ours.get(p) != theirs[p]}
    conflicts |= {p for p in ours if p in their_dirs and theirs.get(p) != ours[p]}
    return sorted(conflicts)


@dataclass(frozen=True, slots=True)
class Side:
    """A path's entry on one side of a merge: its git mode (an int) and bytes."""

    mode: int
    data: bytes


def merge_reason(
    base: Side | None, ours: Side | None, theirs: Side | None, *, clash: bool
) -> str | None:
    """Return why a path both sides changed cannot be line-merged, or ``None``."""
    if clash:
        return CLASH
    if ours is None or theirs is None:
        return "deleted on one side, changed on the other"
    if base is None:
        return "added on both sides with different content"
    if ours.mode != theirs.mode:
        return "mode changed"
    if ours.mode not in _REGULAR or base.mode not in _REGULAR:
        return "not a regular file"
    if any(b"\0" in s.data[:_BINARY_PROBE] for s in (base, ours, theirs)):
        return "binary file"
    return None


@dataclass(frozen=True, slots=True)
class LineMerge:
    """The result of git's line merge: merged bytes, or the conflicting hunks."""

    data: bytes
    hunks: tuple[ConflictHunk, ...]


def merge_lines(path: str, base: bytes, ours: bytes, theirs: bytes) -> LineMerge:
    """Merge ``theirs``' line changes since ``base`` into ``ours`` with git.

    Raises:
        GitError: when ``git merge-file`` fails (its conflict count is an answer).
    """
    with tempfile.TemporaryDirectory(prefix="goatherd-merge-") as scratch:
        top = Path(scratch)
        for name, data in (("ours", ours), ("base", base), ("theirs", theirs)):
            (top / name).write_bytes(data)
        runner = GitRunner(top)
        # No repository is discovered above the scratch directory.
        env = {"GIT_CEILING_DIRECTORIES": str(top.parent)}
        args = (
            "merge-file", "-p", f"--marker-size={_MARKER}",
            "-L", "ours", "-L", "base", "-L", "theirs", "ours", "base", "theirs",
        )  # fmt: skip
        status, merged = runner.run_status(*args, env=env, answers=range(1, 128))
    if status:
        return LineMerge(b"", _hunks(path, merged))
    return LineMerge(merged, ())


def _hunks(path: str, merged: bytes) -> tuple[ConflictHunk, ...]:
    """Read the conflict regions (with both sides' line numbers) from markers."""
    hunks: list[ConflictHunk] = []
    our_line = their_line = 1
    section = ""
    our_start = their_start = our_count = their_count = 0
    for line in merged.splitlines():
        if section == "" and line.startswith(_OURS):
            section, our_start, their_start = "ours", our_line, their_line
            our_count = their_count = 0
        elif section and line.startswith(_BASE):
            section = "base"
        elif section and line.startswith(_SPLIT):
            section = "theirs"
        elif section and line.startswith(_THEIRS):
            hunks.append(
                ConflictHunk(
                    path,
                    LineRange(our_start, our_count),
                    LineRange(their_start, their_count),
                )
            )
            our_line += our_count
            their_line += their_count
            section = ""
        elif section == "ours":
            our_count += 1
        elif section == "theirs":
            their_count += 1
        elif section == "":
            our_line += 1
            their_line += 1
    return tuple(hunks)
