"""The git sandbox's states: capture, apply, diff, and the three-way delta merge.

:class:`GitApply` captures the working tree as a content-addressed state,
applies one exactly, diffs one against the working tree, and merges a
delta's changes into the working tree per path and line by line with
``git merge-file`` (ADR 0083), every git call through the checked runner
of :class:`~.gitworkdir.GitWorkdir`. It imports the application's ports and
errors, the domain's workspace state, :mod:`.gitrunner`, :mod:`.gitstate`,
:mod:`.merge` and :mod:`.gitworkdir`.
"""

from __future__ import annotations

from collections.abc import Iterable

from goatherd.application.errors import ApplyConflictError, ConflictHunk
from goatherd.application.ports import truncate_diff
from goatherd.domain.workspace import WorkspaceState
from goatherd.infrastructure.sandbox.gitrunner import RawChange, nul_list, scratch_index
from goatherd.infrastructure.sandbox.gitstate import (
    GitTreeState,
    capture_state,
    capture_tree,
    changes_between,
    locate,
    materialize,
    resolve_state,
)
from goatherd.infrastructure.sandbox.gitworkdir import GitWorkdir
from goatherd.infrastructure.sandbox.merge import (
    CLASH,
    Side,
    conflicting_paths,
    merge_lines,
    merge_reason,
)

__all__ = ["GitApply"]

_DIFF_FLAGS = (
    "--no-ext-diff",
    "--no-textconv",
    "--no-color",
    "--no-renames",
    "--src-prefix=a/",
)


class GitApply(GitWorkdir):
    """Capture, apply, diff and merge states on the working tree."""

    # ------------------------------------------------------------ states
    def capture(self) -> WorkspaceState:
        """Capture the working tree (index and files untouched)."""
        return capture_state(self._git)

    def apply(self, state: WorkspaceState) -> None:
        """Reset the working tree exactly to ``state`` (reusable).

        The state is validated before anything changes. Then HEAD is reset
        to the captured HEAD (rolling back later commits), untracked files
        are cleaned (ignored ones stay), and the captured tree's paths are
        written; the index is left at the captured HEAD, so the captured
        changes show as unstaged.
        """
        resolved = resolve_state(self._git, state)
        changes = changes_between(self._git, resolved.head_tree, resolved.tree)
        with self._lock:
            self._git.run("reset", "-q", "--hard", resolved.head)
            self._git.run("clean", "-fdq")
            materialize(self._git, resolved.tree, changes.values())

    def diff(self, state: WorkspaceState, max_lines: int = 0) -> tuple[str, list[str]]:
        """Diff the captured tree against the working tree now (read-only)."""
        resolved = resolve_state(self._git, state)
        head, real_index = locate(self._git)
        with scratch_index(real_index) as scratch:
            if not scratch.seeded:
                self._git.run("read-tree", head, env=scratch.env)
            self._git.run("add", "-A", env=scratch.env)
            base = ("diff", "--cached", *_DIFF_FLAGS, "--dst-prefix=b/", resolved.tree)
            names = self._git.run(*base, "--name-only", "-z", env=scratch.env)
            text = self._git.run(*base, env=scratch.env)
        decoded = text.decode("utf-8", "replace")
        return truncate_diff(decoded, max_lines), nul_list(names)

    def apply_delta(
        self, delta: WorkspaceState, base: WorkspaceState | None = None
    ) -> None:
        """Merge ``delta``'s changes since ``base`` into the working tree.

        ``base`` defaults to the HEAD the delta was captured on. Paths only
        the delta changed are written (the index is not touched, so staged
        work survives); paths both sides changed identically are fine; a text
        file both sides changed differently is merged line by line with
        ``git merge-file`` and written merged (ADR 0083).

        Raises:
            ApplyConflictError: naming the paths, and the line hunks, git's
                merge could not reconcile; the working tree is untouched.
        """
        theirs, todo, merged = self._plan_delta(delta, base)
        if not todo:
            return
        with self._lock:
            materialize(self._git, merged or theirs.tree, todo)

    def check_delta(
        self, delta: WorkspaceState, base: WorkspaceState | None = None
    ) -> None:
        """Raise what :meth:`apply_delta` would raise, changing nothing."""
        self._plan_delta(delta, base)

    def _plan_delta(
        self, delta: WorkspaceState, base: WorkspaceState | None
    ) -> tuple[GitTreeState, list[RawChange], str]:
        """Return the delta, the paths to write and the merged tree (or "")."""
        theirs = resolve_state(self._git, delta)
        base_tree = resolve_state(self._git, base).tree if base else theirs.head_tree
        ours = capture_tree(self._git)
        their_changes = changes_between(self._git, base_tree, theirs.tree)
        our_changes = changes_between(self._git, base_tree, ours.tree)
        both = conflicting_paths(their_changes, our_changes)
        todo = [c for p, c in their_changes.items() if our_changes.get(p) != c]
        if not both:
            return theirs, todo, ""
        reasons: dict[str, str] = {}
        hunks: list[ConflictHunk] = []
        written: dict[str, RawChange] = {}
        for path in both:
            mine, new = our_changes.get(path), their_changes.get(path)
            if mine is None or new is None:
                reasons[path] = CLASH
                continue
            reason = self._reason(mine, new)
            if reason:
                reasons[path] = reason
                continue
            result = merge_lines(
                path, self._blob(new.old_sha), self._blob(mine.sha), self._blob(new.sha)
            )
            if result.hunks:
                hunks += result.hunks
                continue
            sha = self._git.text("hash-object", "-w", "--no-filters", "--stdin",
                                 stdin=result.data)  # fmt: skip
            written[path] = RawChange(path, mine.mode, sha, new.old_mode, new.old_sha)
        if reasons or hunks:
            raise ApplyConflictError(
                both, "the delta and the workspace both changed", hunks=hunks,
                reasons=reasons,
            )  # fmt: skip
        return theirs, todo, self._merged_tree(theirs.tree, written.values())

    def _reason(self, mine: RawChange, new: RawChange) -> str | None:
        def side(mode: str, sha: str) -> Side | None:
            if mode == "000000":
                return None
            data = self._blob(sha) if mode.startswith("100") else b""
            return Side(int(mode, 8), data)

        return merge_reason(
            side(new.old_mode, new.old_sha),
            side(mine.mode, mine.sha),
            side(new.mode, new.sha),
            clash=False,
        )

    def _blob(self, sha: str) -> bytes:
        return self._git.run("cat-file", "blob", sha)

    def _merged_tree(self, tree: str, merged: Iterable[RawChange]) -> str:
        """Return ``tree`` with the merged paths' blobs in place."""
        info = b"".join(
            f"{c.mode} {c.sha}\t".encode() + c.path.encode("utf-8", "surrogateescape")
            + b"\0"
            for c in merged
        )  # fmt: skip
        with scratch_index(None) as scratch:
            self._git.run("read-tree", tree, env=scratch.env)
            self._git.run("update-index", "-z", "--index-info", env=scratch.env,
                          stdin=info)  # fmt: skip
            return self._git.text("write-tree", env=scratch.env)
