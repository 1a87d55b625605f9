"""Git workspace states: content-addressed capture, validation, exact restore.

A capture stages the whole working tree (untracked files, deletions, binary
files, modes) into a private scratch index seeded from a copy of the real
one, writes its tree, and wraps it in a commit with a fixed author, committer
and date whose parent is HEAD, so identical content at the same HEAD gives
the identical state (ADR 0006). The caller's index and working tree are
never touched by capture or by the read-only helpers here.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from goatherd.application.errors import (
    GitError,
    InvalidWorkspaceStateError,
    SandboxError,
)
from goatherd.domain.workspace import WorkspaceState
from goatherd.infrastructure.sandbox.gitlocks import common_dir
from goatherd.infrastructure.sandbox.gitrunner import (
    GitRunner,
    RawChange,
    parse_raw_changes,
    scratch_index,
)

__all__ = [
    "CAPTURE_IDENTITY",
    "Captured",
    "GIT_BACKEND",
    "GitTreeState",
    "capture_state",
    "capture_tree",
    "changes_between",
    "locate",
    "materialize",
    "resolve_state",
]

GIT_BACKEND: Final = "git"
CAPTURE_IDENTITY: Final = {
    "GIT_AUTHOR_NAME": "goatherd",
    "GIT_AUTHOR_EMAIL": "goatherd@localhost",
    "GIT_AUTHOR_DATE": "@0 +0000",
    "GIT_COMMITTER_NAME": "goatherd",
    "GIT_COMMITTER_EMAIL": "goatherd@localhost",
    "GIT_COMMITTER_DATE": "@0 +0000",
}
_MESSAGE: Final = b"goatherd workspace capture\n"
_OID = re.compile(r"[0-9a-f]{40}([0-9a-f]{24})?")
_KEYS: Final = ("head_sha", "tree_sha", "commit_sha")
_STAGE: Final = "goatherd-stage-"


@dataclass(frozen=True, slots=True)
class Captured:
    """The working tree as a tree object, at a HEAD."""

    head: str
    tree: str


@dataclass(frozen=True, slots=True)
class GitTreeState:
    """A validated git state: its HEAD, its HEAD's tree, its tree and commit."""

    head: str
    head_tree: str
    tree: str
    commit: str


def _not_a_worktree(workdir: Path, exc: GitError) -> SandboxError:
    if "ambiguous argument 'HEAD'" in exc.stderr:
        return SandboxError(f"git sandbox: {workdir} has no commits yet ({exc.stderr})")
    return SandboxError(
        f"git sandbox: {workdir} is not a git working tree: {exc.stderr}"
    )


def locate(git: GitRunner) -> tuple[str, Path]:
    """Return (HEAD, real index path), checking ``git.cwd`` is a work tree top."""
    if not git.cwd.is_dir():
        raise SandboxError(f"git sandbox: {git.cwd} does not exist")
    try:
        top, index, head = git.text(
            "rev-parse", "--show-toplevel", "--git-path", "index", "HEAD"
        ).split("\n")
    except GitError as exc:
        if exc.returncode is None or exc.returncode < 0:
            raise  # git was killed or timed out: the work tree is not at fault
        raise _not_a_worktree(git.cwd, exc) from exc
    if os.path.realpath(top) != os.path.realpath(git.cwd):
        raise SandboxError(
            f"git sandbox: {git.cwd} is inside the git work tree {top}, not its top"
        )
    return head, git.cwd / index


def capture_tree(git: GitRunner) -> Captured:
    """Write the working tree's content as a tree without touching the index."""
    head, real_index = locate(git)
    with scratch_index(real_index) as scratch:
        if not scratch.seeded:
            git.run("read-tree", head, env=scratch.env)
        git.run("add", "-A", env=scratch.env)
        tree = git.text("write-tree", env=scratch.env)
    return Captured(head, tree)


def capture_state(git: GitRunner) -> WorkspaceState:
    """Capture the workspace as a content-addressed :class:`WorkspaceState`."""
    captured = capture_tree(git)
    commit = git.run(
        "commit-tree", captured.tree, "-p", captured.head, "-F", "-",
        env=CAPTURE_IDENTITY, stdin=_MESSAGE,
    )  # fmt: skip
    data = {
        "head_sha": captured.head,
        "tree_sha": captured.tree,
        "commit_sha": commit.decode().strip(),
    }
    return WorkspaceState(backend=GIT_BACKEND, revision=captured.head, data=data)


def _fields(state: WorkspaceState) -> tuple[str, str, str]:
    if state.backend != GIT_BACKEND:
        raise InvalidWorkspaceStateError(
            f'cannot apply state from backend "{state.backend}" to a git sandbox'
        )
    data = state.data or {}
    values = [data.get(key) for key in _KEYS]
    for key, value in zip(_KEYS, values, strict=True):
        if not isinstance(value, str) or not _OID.fullmatch(value):
            raise InvalidWorkspaceStateError(
                f"corrupt git state: data.{key} is not an object id ({value!r})"
            )
    head, tree, commit = (str(v) for v in values)
    if state.revision != head:
        raise InvalidWorkspaceStateError(
            "corrupt git state: revision does not match data.head_sha"
        )
    return head, tree, commit


def resolve_state(git: GitRunner, state: WorkspaceState) -> GitTreeState:
    """Check ``state`` belongs to this repository, before anything is touched.

    Raises:
        InvalidWorkspaceStateError: another backend, another repository (an
            object is missing), or corrupt data (wrong keys, a commit whose
            tree or parent disagrees with the recorded ones).
    """
    head, tree, commit = _fields(state)
    query = (
        f"{head}\n{head}^{{tree}}\n{tree}\n{commit}\n{commit}^{{tree}}\n{commit}^1\n"
    )
    answer = git.text(
        "cat-file", "--batch-check=%(objectname) %(objecttype)", stdin=query.encode()
    )
    rows = [line.split(" ") for line in answer.split("\n")]
    for row in rows[:4]:
        if row[-1] == "missing":
            raise InvalidWorkspaceStateError(
                "git state is from another repository "
                f"(object {row[0]} is missing here)"
            )
    kinds = [row[1] for row in rows[:4]]
    if kinds != ["commit", "tree", "tree", "commit"]:
        raise InvalidWorkspaceStateError(
            f"corrupt git state: object kinds {kinds} are not commit/tree/commit"
        )
    if rows[4][0] != tree or rows[5][0] != head:
        raise InvalidWorkspaceStateError(
            "corrupt git state: the capture commit's tree or parent does not match"
        )
    return GitTreeState(head=head, head_tree=rows[1][0], tree=tree, commit=commit)


def changes_between(
    git: GitRunner, old_tree: str, new_tree: str
) -> dict[str, RawChange]:
    """Return the per-path changes from ``old_tree`` to ``new_tree``."""
    raw = git.run("diff-tree", "-r", "-z", "--no-renames", old_tree, new_tree)
    return parse_raw_changes(raw)


def _remove(workdir: Path, path: str) -> None:
    target = workdir / path
    if target.is_symlink() or target.is_file():
        target.unlink()
    parent = target.parent
    while parent != workdir:
        try:
            parent.rmdir()
        except OSError:
            break
        parent = parent.parent


def materialize(git: GitRunner, tree: str, changes: Iterable[RawChange]) -> None:
    """Make the working tree's ``changes`` paths match ``tree`` (index untouched).

    Deletions are removed (and emptied directories with them); every other
    path is checked out from ``tree`` through a scratch index into a staging
    directory beside the git directory, then renamed into place one by one,
    so a kill at any point leaves each path either as it was or as ``tree``
    has it, never half written (a retry then sees only finished paths).
    """
    changes = list(changes)
    for change in changes:
        if change.deleted:
            _remove(git.cwd, change.path)
    written = [c.path for c in changes if not c.deleted]
    if not written:
        return
    common = common_dir(git.cwd) or git.cwd
    _sweep_stages(common)
    stage = Path(tempfile.mkdtemp(prefix=f"{_STAGE}{os.getpid()}-", dir=common))
    try:
        with scratch_index(None) as scratch:
            git.run("read-tree", tree, env=scratch.env)
            paths = b"".join(
                p.encode("utf-8", "surrogateescape") + b"\0" for p in written
            )
            git.run(
                "checkout-index", "-f", "-z", "--stdin", f"--prefix={stage}/",
                env=scratch.env, stdin=paths,
            )  # fmt: skip
        for path in written:
            target = git.cwd / path
            target.parent.mkdir(parents=True, exist_ok=True)
            if target.is_dir() and not target.is_symlink():
                shutil.rmtree(target)
            os.replace(stage / path, target)
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def _sweep_stages(common: Path) -> None:
    """Remove staging directories a killed goatherd process left behind."""
    for entry in common.glob(f"{_STAGE}*"):
        pid = entry.name.removeprefix(_STAGE).split("-")[0]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            shutil.rmtree(entry, ignore_errors=True)
