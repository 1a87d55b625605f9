"""Git's lock files after a crash: who may clear them, and when (ADR 0069).

Git guards the index, HEAD, refs, the config and a worktree being added
with lock files it removes when it ends, unless it is killed. A lock left by
a killed git makes every later git call in the repository fail. goatherd
clears such a lock only when it can tell that it was left by a git call of
its own that is gone:

* Every git call goatherd makes that may take a repository lock runs under
  ``guard``: an exclusive ``flock`` on ``goatherd-git.lock`` in the
  repository's common git directory, whose descriptor git inherits, so the
  lock is held until both the goatherd process and its git (and anything
  git started) are gone, and a journal ``goatherd-git.journal`` naming the
  call, written before git starts and removed once git has exited by itself.
* A later guarded call that gets the ``flock`` and finds the journal knows
  the call it names was cut short and that no git of goatherd's is still
  running in the repository. It then removes the repository's lock files,
  except while any live process has the file open or a live ``git`` process
  works in one of the repository's worktrees (a person's git), and finishes
  or undoes an interrupted ``worktree add`` / ``worktree remove``.

A lock file with no journal (made by another program) is never removed.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Final

__all__ = ["GUARD_FILE", "JOURNAL_FILE", "common_dir", "guard", "stale_locks"]

GUARD_FILE: Final = "goatherd-git.lock"
JOURNAL_FILE: Final = "goatherd-git.journal"
_WORKTREE_LOCK: Final = "goatherd-worktrees.lock"
_PATIENCE: Final = 20  # tries, 0.1 s apart, for live git processes to end
# Commands that take a repository lock when they do not use a scratch index.
_LOCKING: Final = frozenset(
    {"reset", "checkout", "read-tree", "checkout-index", "add", "update-ref",
     "update-index", "worktree", "commit", "merge", "stash"}
)  # fmt: skip


def _common_of(git_dir: Path) -> Path:
    """Return the common directory of ``git_dir`` (itself, or its ``commondir``)."""
    try:
        common = (git_dir / "commondir").read_text("utf-8").strip()
    except OSError:
        return git_dir
    return (git_dir / common).resolve()


def common_dir(cwd: Path) -> Path | None:
    """Return the common git directory of the work tree holding ``cwd``.

    Found by reading ``.git`` (a directory, or a file pointing at a linked
    worktree's git directory and its ``commondir``) without running git;
    ``None`` outside a repository.
    """
    here = cwd
    for candidate in (here, *here.parents):
        dot = candidate / ".git"
        if dot.is_dir():
            return dot
        if dot.is_file():
            try:
                line = dot.read_text("utf-8").strip()
            except OSError:
                return None
            if not line.startswith("gitdir:"):
                return None
            gitdir = (candidate / line.removeprefix("gitdir:").strip()).resolve()
            try:
                common = (gitdir / "commondir").read_text("utf-8").strip()
            except OSError:
                return gitdir
            return (gitdir / common).resolve()
    return None


def _needs_guard(args: Sequence[str], env: Mapping[str, str] | None) -> bool:
    if not args or args[0] not in _LOCKING:
        return False
    return not (env and "GIT_INDEX_FILE" in env)  # a scratch index is private


@contextmanager
def guard(
    cwd: Path,
    args: Sequence[str],
    env: Mapping[str, str] | None,
    *,
    git_dir: Path | None = None,
) -> Iterator[tuple[int, ...]]:
    """Hold the repository's git guard around one git call.

    Yields the descriptors the git child must inherit (none when the call
    takes no repository lock or ``cwd`` is in no repository). The journal is
    removed only when the body returns normally, i.e. git exited by itself;
    an exception (git killed, a timeout) leaves it for the next call.
    ``git_dir``: the git directory the caller validated and passes to git
    (its common directory is used; without it, the one ``cwd`` lies in).
    """
    if not _needs_guard(args, env):
        common = None
    elif git_dir is not None:
        common = _common_of(git_dir)
    else:
        common = common_dir(cwd)
    if common is None:
        yield ()
        return
    fd = os.open(common / GUARD_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        journal = common / JOURNAL_FILE
        if journal.exists() and not _recover(common, journal):
            # Not cleared yet (a person's git runs here): keep the journal of
            # the interrupted call for the next guarded call to finish.
            yield (fd,)
            return
        entry = {"pid": os.getpid(), "cwd": str(cwd), "args": list(args)}
        journal.write_text(json.dumps(entry), "utf-8")
        yield (fd,)
        journal.unlink(missing_ok=True)
    finally:
        os.close(fd)


def _recover(common: Path, journal: Path) -> bool:
    """Clear what the journal's interrupted call left; whether it could."""
    try:
        entry = json.loads(journal.read_text("utf-8"))
    except (OSError, ValueError):
        entry = {}
    tops = _worktree_tops(common)
    for _ in range(_PATIENCE):
        if not _live_git_in(tops):
            break
        time.sleep(0.1)  # goatherd's own unguarded reads end quickly
    else:
        return False  # a person's git may own what lies here: leave it
    for lock in stale_locks(common):
        with contextlib.suppress(FileNotFoundError):
            lock.unlink()
    args = [str(a) for a in entry.get("args", [])] if isinstance(entry, dict) else []
    if args[:2] == ["worktree", "add"] or args[:2] == ["worktree", "remove"]:
        target = Path(args[-2] if args[1] == "add" else args[-1])
        _undo_worktree(common, target)
    journal.unlink(missing_ok=True)
    return True


def _undo_worktree(common: Path, target: Path) -> None:
    """Remove a worktree an interrupted add or remove left half made.

    The add refused a non-empty target and the remove was asked to remove it
    with force, so whatever stands there is git's unfinished work; the
    caller's retry adds it again (or finds it gone).
    """
    admin = common / "worktrees"
    if admin.is_dir():
        for entry in admin.iterdir():
            try:
                pointer = (entry / "gitdir").read_text("utf-8").strip()
            except OSError:
                pointer = ""
            if pointer and Path(pointer).parent == target:
                shutil.rmtree(entry, ignore_errors=True)
    if target.is_dir() and not target.is_symlink():
        shutil.rmtree(target, ignore_errors=True)


def stale_locks(common: Path) -> list[Path]:
    """Return the lock files in ``common`` no live process has open.

    The ``*.lock`` files outside ``objects`` (index, HEAD, refs, config,
    packed-refs, shallow, each linked worktree's), and the ``locked`` marker
    of a worktree git was still initializing, except goatherd's own.
    """
    found: list[Path] = []
    for root, dirs, files in os.walk(common):
        if Path(root) == common and "objects" in dirs:
            dirs.remove("objects")
        for name in files:
            path = Path(root) / name
            if name in (GUARD_FILE, _WORKTREE_LOCK):
                continue
            if name.endswith(".lock") or (
                name == "locked" and path.parent.parent.name == "worktrees"
                and _initializing(path)
            ):  # fmt: skip
                found.append(path)
    held = _open_files()
    return [p for p in found if str(p) not in held]


def _initializing(path: Path) -> bool:
    try:
        return path.read_text("utf-8").strip() == "initializing"
    except OSError:
        return False


def _pids() -> Iterator[Path]:
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            yield proc


def _open_files() -> set[str]:
    held: set[str] = set()
    for proc in _pids():
        with contextlib.suppress(OSError):
            for fd in (proc / "fd").iterdir():
                with contextlib.suppress(OSError):
                    held.add(os.readlink(fd))
    return held


def _worktree_tops(common: Path) -> list[Path]:
    tops = [common.parent] if common.name == ".git" else []
    admin = common / "worktrees"
    if admin.is_dir():
        for entry in admin.iterdir():
            with contextlib.suppress(OSError):
                tops.append(Path((entry / "gitdir").read_text("utf-8").strip()).parent)
    tops.append(common)
    return [Path(os.path.realpath(t)) for t in tops]


def _live_git_in(tops: list[Path]) -> bool:
    """Whether a live ``git`` process (not a zombie) works under ``tops``."""
    for proc in _pids():
        try:
            if (proc / "comm").read_text().strip() != "git":
                continue
            stat = (proc / "stat").read_text()
            if stat[stat.rindex(")") + 2] == "Z":
                continue
            cwd = Path(os.readlink(proc / "cwd"))
        except (OSError, ValueError, IndexError):
            continue
        if any(cwd == top or top in cwd.parents for top in tops):
            return True
    return False
