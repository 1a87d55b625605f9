"""Three-way merging of git trees, line by line on git's own merge machinery.

Two change sets are taken against one base tree: the workspace's (ours) and
the delta's (theirs). A path only one side changed takes that side; a path
both sides changed identically is fine. A path both sides changed
differently is merged by ``git merge-file`` when it is a text file on all
three sides with the mode both sides kept (a regular file, executable or
not); its conflicts are named as hunks, located with ``git diff -U0`` of the
same blobs. Everything else both sides changed differently (binary content,
a mode change, a deletion, an addition on both sides, a symlink, a
submodule, a file/directory clash) conflicts as a whole path.

``merge-file`` is given the three blobs as files in a private temporary
directory, so no attribute, filter or merge driver of the repository is
consulted (ADR 0083); the runner's safe configuration applies as to every
call (ADR 0067).
"""

from __future__ import annotations

import os
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from goatherd.application.errors import GitError
from goatherd.application.ports import ConflictHunk, LineRange
from goatherd.infrastructure.sandbox.gitrunner import (
    GitRunner,
    RawChange,
    scratch_index,
)
from goatherd.infrastructure.sandbox.gitstate import changes_between
from goatherd.infrastructure.sandbox.merge import conflicting_paths

__all__ = ["TreeMerge", "merge_trees", "merged_tree"]

_TEXT_MODES: Final = frozenset({"100644", "100755"})
_HUNK = re.compile(rb"@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
_DIFF_FLAGS: Final = (
    "--no-ext-diff",
    "--no-textconv",
    "--no-color",
    "--no-renames",
    "--text",
    "--no-indent-heuristic",
    "--diff-algorithm=myers",
    "-U0",
)
# merge-file exits with the number of conflicts, capped at 127; above that
# (255: -1) it failed.
_MAX_CONFLICTS: Final = 127


@dataclass(frozen=True, slots=True)
class TreeMerge:
    """The outcome of a three-way tree merge.

    Attributes:
        todo: the changes to make in the workspace (against ``tree``).
        merged: the blobs ``merge-file`` produced, by path (mode, object id);
            empty unless the merge was written.
        conflicts: every conflicting path, sorted.
        hunks: the line conflicts, by path then position.
    """

    todo: list[RawChange] = field(default_factory=list)
    merged: dict[str, tuple[str, str]] = field(default_factory=dict)
    conflicts: list[str] = field(default_factory=list)
    hunks: list[ConflictHunk] = field(default_factory=list)


def _mergeable(ours: RawChange | None, theirs: RawChange | None) -> bool:
    """Whether both sides kept a regular file's mode and only its content moved."""
    if ours is None or theirs is None or ours.added or theirs.added:
        return False
    if ours.deleted or theirs.deleted:
        return False
    return ours.old_mode in _TEXT_MODES and ours.old_mode == ours.mode == theirs.mode


def _blob(git: GitRunner, sha: str) -> bytes:
    return git.run("cat-file", "blob", sha)


def merge_trees(
    git: GitRunner, base_tree: str, ours_tree: str, theirs_tree: str, *, write: bool
) -> TreeMerge:
    """Merge ``theirs_tree``'s changes since ``base_tree`` into ``ours_tree``.

    With ``write`` the merged blobs are stored (``hash-object -w``) and
    ``todo`` lists every change to make; without it only the conflicts are
    worked out (nothing is written). A merged file identical to ours needs
    no change (an apply that already stands).
    """
    theirs = changes_between(git, base_tree, theirs_tree)
    ours = changes_between(git, base_tree, ours_tree)
    conflicts: set[str] = set()
    hunks: list[ConflictHunk] = []
    merged: dict[str, tuple[str, str]] = {}
    for path in conflicting_paths(theirs, ours):
        mine, new = ours.get(path), theirs.get(path)
        if mine is None or new is None or not _mergeable(mine, new):
            conflicts.add(path)
            continue
        result = _merge_file(git, new.old_sha, mine.sha, new.sha)
        if result is None:
            conflicts.add(path)
        elif isinstance(result, bytes):
            if write:
                merged[path] = (mine.mode, _store(git, result))
        else:
            conflicts.add(path)
            hunks += _hunks(git, path, new.old_sha, mine.sha, new.sha)
    if conflicts:
        return TreeMerge(conflicts=sorted(conflicts), hunks=hunks)
    if not write:
        return TreeMerge()
    # Past the conflicts, a path both sides changed differently was merged.
    todo = [c for p, c in theirs.items() if ours.get(p) != c and p not in merged]
    todo += [
        RawChange(path, mode, sha)
        for path, (mode, sha) in merged.items()
        if sha != ours[path].sha
    ]
    return TreeMerge(todo=todo, merged=merged)


def _merge_file(
    git: GitRunner, base: str, ours: str, theirs: str
) -> bytes | int | None:
    """Merge three blobs: the merged bytes, the conflict count, or ``None``.

    ``None``: a side is binary (git merges text only).
    """
    blobs = [_blob(git, sha) for sha in (ours, base, theirs)]
    if any(b"\0" in data for data in blobs):
        return None
    with tempfile.TemporaryDirectory(prefix="goatherd-merge-") as directory:
        names = []
        for name, data in zip(("ours", "base", "theirs"), blobs, strict=True):
            target = Path(directory) / name
            target.write_bytes(data)
            names.append(os.fspath(target))
        labels = ("-L", "workspace", "-L", "base", "-L", "delta")
        try:
            return git.run("merge-file", "-p", "-q", *labels, *names)
        except GitError as error:
            code = error.returncode
            if code is not None and 0 < code <= _MAX_CONFLICTS:
                return code
            raise


def _store(git: GitRunner, data: bytes) -> str:
    return git.text("hash-object", "-w", "--no-filters", "--stdin", stdin=data)


@dataclass(frozen=True, slots=True)
class _Hunk:
    """One ``-U0`` hunk: base lines ``[start, end)`` replaced by ``lines``."""

    side: int  # 0: ours, 1: theirs
    start: int
    end: int
    lines: tuple[bytes, ...]

    @property
    def growth(self) -> int:
        return len(self.lines) - (self.end - self.start)


def _diff_hunks(git: GitRunner, side: int, base: str, new: str) -> list[_Hunk]:
    raw = git.run("diff", *_DIFF_FLAGS, base, new)
    hunks: list[_Hunk] = []
    start = end = 0
    lines: list[bytes] = []
    in_hunk = False
    for line in raw.split(b"\n"):
        match = _HUNK.match(line)
        if match:
            if in_hunk:
                hunks.append(_Hunk(side, start, end, tuple(lines)))
            first, count = int(match[1]), int(match[2] or b"1")
            start = first if count == 0 else first - 1
            end, lines, in_hunk = start + count, [], True
        elif in_hunk and line.startswith(b"+"):
            lines.append(line[1:])
    if in_hunk:
        hunks.append(_Hunk(side, start, end, tuple(lines)))
    return hunks


def _range(start: int, count: int) -> LineRange:
    """Turn a 0-based ``[start, start + count)`` into a hunk-header range."""
    return LineRange(start + 1 if count else start, count)


def _hunks(
    git: GitRunner, path: str, base: str, ours: str, theirs: str
) -> list[ConflictHunk]:
    """Name the regions where both sides' changes overlap or touch.

    git's merge refuses two changes unless unchanged lines separate them; a
    run of changes chained that way is one conflict. Identical changes on
    both sides are not conflicts.
    """
    every = sorted(
        _diff_hunks(git, 0, base, ours) + _diff_hunks(git, 1, base, theirs),
        key=lambda h: (h.start, h.end, h.side),
    )
    clusters: list[list[_Hunk]] = []
    for hunk in every:
        if clusters and hunk.start <= max(h.end for h in clusters[-1]):
            clusters[-1].append(hunk)
        else:
            clusters.append([hunk])
    found: list[ConflictHunk] = []
    growth = [0, 0]  # lines each side added before the current cluster
    for cluster in clusters:
        sides = {h.side for h in cluster}
        start = cluster[0].start
        end = max(h.end for h in cluster)
        inside = [sum(h.growth for h in cluster if h.side == s) for s in (0, 1)]
        same = len(cluster) == 2 and cluster[0].lines == cluster[1].lines
        same = same and (cluster[0].start, cluster[0].end) == (
            cluster[1].start,
            cluster[1].end,
        )
        if len(sides) == 2 and not same:
            found.append(
                ConflictHunk(
                    path,
                    _range(start, end - start),
                    _range(start + growth[0], end - start + inside[0]),
                    _range(start + growth[1], end - start + inside[1]),
                )
            )
        growth = [growth[s] + inside[s] for s in (0, 1)]
    return found


def merged_tree(git: GitRunner, tree: str, merged: dict[str, tuple[str, str]]) -> str:
    """Return ``tree`` with the ``merged`` blobs in place (a new tree object)."""
    if not merged:
        return tree
    with scratch_index(None) as scratch:
        git.run("read-tree", tree, env=scratch.env)
        info = b"".join(
            f"{mode} {sha}\t".encode() + path.encode("utf-8", "surrogateescape") + b"\0"
            for path, (mode, sha) in sorted(merged.items())
        )
        git.run("update-index", "-z", "--index-info", env=scratch.env, stdin=info)
        return git.text("write-tree", env=scratch.env)
