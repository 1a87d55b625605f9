"""Path-level conflict detection for three-way delta application.

Two change sets are taken against the same base. A path both sides changed
to different results conflicts; so does a path one side made a file while the
other put files beneath it (a file/directory clash).
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["conflicting_paths"]


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
