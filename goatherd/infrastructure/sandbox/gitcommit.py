"""Turning a settled workspace into a git commit, through the hardened runner.

``settle(..., commit=True)`` ends with a commit on the branch HEAD is on
(ADR 0084). It is made with plumbing only, never ``git commit``: a private
index seeded from HEAD's tree takes the working tree's entries of exactly the
settled paths, ``write-tree`` and ``commit-tree`` make the commit, and
``update-ref`` moves the branch from the HEAD it was built on (a branch that
moved meanwhile is refused, nothing is lost). Then the real index entries of
those paths are set to the commit's, so ``git status`` shows them clean; the
user's other staged or unstaged work is left as it was. Every call goes
through :class:`~goatherd.infrastructure.sandbox.gitrunner.GitRunner`: no
hook, fsmonitor, filter driver or other program the repository names runs.

The identity is the ``author`` given (``"Name <email>"``), else the
repository's ``user.name``/``user.email``, else the user's own git
configuration file (``$XDG_CONFIG_HOME/git/config``, ``~/.gitconfig``), read
as data. :func:`read_trailers` reads the ``Goatherd-*`` trailers of a commit
back (``goatherd show COMMIT``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from goatherd.application.errors import GitError, SettleCommitError
from goatherd.application.ports import StateCommit
from goatherd.infrastructure.sandbox.gitrunner import GitRunner, scratch_index
from goatherd.infrastructure.sandbox.gitstate import capture_tree, locate

__all__ = [
    "CommitTrailers",
    "HISTORY_DEPTH",
    "TRAILER_PREFIX",
    "check_committable",
    "commit_paths",
    "find_commit",
    "parse_identity",
    "read_trailers",
]

HISTORY_DEPTH: Final = 200
"""How many commits of HEAD's history :func:`find_commit` looks through."""
TRAILER_PREFIX: Final = "Goatherd-"
_IDENTITY = re.compile(r"\s*([^<>]*[^<>\s])\s*<([^<>\s]+)>\s*")
_LITERAL: Final = {"GIT_LITERAL_PATHSPECS": "1"}
_UNIT: Final = "\x1f"
_RECORD: Final = "\x1e"


@dataclass(frozen=True, slots=True)
class CommitTrailers:
    """A commit and the ``Goatherd-*`` trailers its message ends with.

    Attributes:
        sha: the commit's object id.
        subject: its message's first line.
        trailers: ``(key, value)`` in message order (``Goatherd-*`` only).
    """

    sha: str
    subject: str
    trailers: tuple[tuple[str, str], ...] = ()

    def get(self, key: str) -> str:
        """Return the last value of trailer ``key`` (``""``: none)."""
        found = [v for k, v in self.trailers if k.lower() == key.lower()]
        return found[-1] if found else ""


def parse_identity(text: str) -> tuple[str, str]:
    """Return ``(name, email)`` of ``"Name <email>"``.

    Raises:
        SettleCommitError: anything else (the message shows the form).
    """
    match = _IDENTITY.fullmatch(text)
    if match is None:
        raise SettleCommitError(
            f"author {text!r} is not of the form 'Name <email@example.com>'"
        )
    return match.group(1), match.group(2)


def _config_value(git: GitRunner, key: str) -> str:
    """``key`` from the repository's configuration, else the user's own file."""
    sources: list[tuple[str, ...]] = [()]
    xdg = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    for path in (Path(xdg) / "git" / "config", Path.home() / ".gitconfig"):
        if path.is_file():
            sources.append(("--file", str(path)))
    for source in sources:
        try:
            value = git.text("config", *source, "--get", key)
        except GitError as error:
            if error.returncode == 1:  # not set there
                continue
            raise
        if value.strip():
            return value.strip()
    return ""


def _identity_env(git: GitRunner, author: str | None) -> dict[str, str]:
    name = _config_value(git, "user.name")
    email = _config_value(git, "user.email")
    if author is not None:
        a_name, a_email = parse_identity(author)
        c_name, c_email = (name, email) if name and email else (a_name, a_email)
    elif name and email:
        a_name, a_email, c_name, c_email = name, email, name, email
    else:
        raise SettleCommitError(
            "no author identity: pass author='Name <email>' (--author) or set"
            " user.name and user.email in the repository's or your git config"
        )
    return {
        "GIT_AUTHOR_NAME": a_name,
        "GIT_AUTHOR_EMAIL": a_email,
        "GIT_COMMITTER_NAME": c_name,
        "GIT_COMMITTER_EMAIL": c_email,
    }


def _branch(git: GitRunner) -> str:
    try:
        return git.text("symbolic-ref", "-q", "HEAD")
    except GitError as error:
        if error.returncode == 1:
            raise SettleCommitError(
                f"HEAD of {git.cwd} is detached: check out the branch to commit"
                " onto first"
            ) from error
        raise


def _head(git: GitRunner, branch: str) -> str:
    try:
        return git.text("rev-parse", "--verify", "-q", branch + "^{commit}")
    except GitError as error:
        if error.returncode == 1:
            raise SettleCommitError(
                f"{branch} of {git.cwd} has no commit yet to commit onto"
            ) from error
        raise


def check_committable(git: GitRunner, author: str | None = None) -> None:
    """Refuse a detached HEAD, an unborn branch or a missing identity.

    Raises:
        SettleCommitError: naming which.
    """
    _head(git, _branch(git))
    _identity_env(git, author)


def find_commit(
    git: GitRunner, trailer: str, value: str, depth: int = HISTORY_DEPTH
) -> StateCommit | None:
    """Return the newest of HEAD's last ``depth`` commits with ``trailer: value``."""
    branch = _branch(git)
    head = _head(git, branch)
    fmt = (
        f"%H{_UNIT}%P{_UNIT}%T{_UNIT}"
        f"%(trailers:key={trailer},valueonly,separator=%x1f){_RECORD}"
    )
    out = git.text("log", f"-n{depth}", "--no-color", f"--format={fmt}", head)
    for entry in out.split(_RECORD):
        fields = entry.strip("\n").split(_UNIT)
        if len(fields) < 4:
            continue
        sha, parents, tree, *values = fields
        if value in (v.strip() for v in values):
            parent = parents.split(" ")[0] if parents else ""
            return StateCommit(sha, branch, parent, tree, _paths(git, parent, sha))
    return None


def _paths(git: GitRunner, parent: str, sha: str) -> tuple[str, ...]:
    if not parent:
        return ()
    out = git.run("diff-tree", "-r", "-z", "--no-renames", "--name-only", parent, sha)
    return tuple(
        sorted(p.decode("utf-8", "surrogateescape") for p in out.split(b"\0") if p)
    )


def _entries(git: GitRunner, tree: str, paths: Sequence[str]) -> dict[str, bytes]:
    """The ``ls-tree`` line of each of ``paths`` that ``tree`` holds."""
    out = git.run(
        "ls-tree", "-r", "-z", "--full-tree", tree, "--", *paths, env=_LITERAL
    )
    entries: dict[str, bytes] = {}
    for line in out.split(b"\0"):
        if b"\t" in line:
            path = line.split(b"\t", 1)[1].decode("utf-8", "surrogateescape")
            entries[path] = line
    return entries


def commit_paths(
    git: GitRunner,
    paths: Sequence[str],
    message: str,
    *,
    author: str | None = None,
) -> StateCommit:
    """Commit ``paths`` as the working tree holds them onto HEAD's branch.

    Raises:
        SettleCommitError: detached HEAD, no identity, nothing to commit, or
            the branch moved while the commit was being made.
    """
    branch = _branch(git)
    head = _head(git, branch)
    identity = _identity_env(git, author)
    wanted = sorted(set(paths))
    live = capture_tree(git)
    if live.head != head:
        raise SettleCommitError(f"{branch} moved while the commit was prepared")
    present = _entries(git, live.tree, wanted)
    zero = "0" * len(head)
    info = b"".join(
        present.get(path, f"0 {zero}\t{path}".encode("utf-8", "surrogateescape"))
        + b"\0"
        for path in wanted
    )
    with scratch_index(None) as scratch:
        git.run("read-tree", head, env=scratch.env)
        if info:
            git.run("update-index", "-z", "--index-info", env=scratch.env, stdin=info)
        tree = git.text("write-tree", env=scratch.env)
    if tree == git.text("rev-parse", head + "^{tree}"):
        raise SettleCommitError(
            f"nothing to commit: {branch} already holds"
            f" {', '.join(wanted) or 'every settled path'} as the settle left them"
        )
    body = message.encode("utf-8")
    sha = git.text("commit-tree", tree, "-p", head, env=identity, stdin=body)
    try:
        git.run("update-ref", "-m", "goatherd: settle as a commit", branch, sha, head)
    except GitError as error:
        if error.returncode is not None and error.returncode > 0:
            raise SettleCommitError(
                f"{branch} moved while the commit was made: {error.stderr}"
            ) from error
        raise
    _sync_index(git, sha, wanted)
    changed = _paths(git, head, sha)
    return StateCommit(sha, branch, head, tree, changed)


def _sync_index(git: GitRunner, sha: str, paths: Sequence[str]) -> None:
    """Set the real index entries of ``paths`` to the commit's (no work tree change)."""
    _, real_index = locate(git)
    if not paths or not real_index.exists():
        return
    git.run("reset", "-q", sha, "--", *paths, env=_LITERAL)


def read_trailers(git: GitRunner, revision: str) -> CommitTrailers:
    """Return the commit ``revision`` names and its ``Goatherd-*`` trailers.

    Raises:
        SettleCommitError: ``revision`` names no commit of the repository.
    """
    try:
        sha = git.text("rev-parse", "--verify", "-q", revision + "^{commit}")
    except GitError as error:
        if error.returncode is not None and error.returncode > 0:
            raise SettleCommitError(
                f"{revision!r} names no commit of {git.cwd}"
            ) from error
        raise
    fmt = f"%s{_UNIT}%(trailers:only,unfold,separator=%x1f)"
    subject, _, raw = git.text(
        "log", "-1", "--no-color", f"--format={fmt}", sha
    ).partition(_UNIT)
    pairs: list[tuple[str, str]] = []
    for line in raw.split(_UNIT):
        key, sep, value = line.partition(":")
        if sep and key.strip().startswith(TRAILER_PREFIX):
            pairs.append((key.strip(), value.strip()))
    return CommitTrailers(sha, subject, tuple(pairs))
