"""A worktree's paths: checked, resolved, and opened without following symlinks.

``WorktreePaths`` (the base of ``WorkspaceFiles``) turns a path the agent
names into the resolved components below the worktree (refusing ``.git`` and
anything outside), and opens directories component by component with
``O_NOFOLLOW``. The helpers every file operation's messages use
(``_named``, ``shown_name``, ``_os_message``) live here too. Imports the
sandbox's path guard and the MCP errors only.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Final

from goatherd.application import WorkspaceEscapeError
from goatherd.infrastructure.sandbox.paths import resolve_inside
from goatherd.integrations.mcp.errors import ToolInputError

__all__ = [
    "WorktreePaths",
    "_DIRECTORY",
    "_named",
    "_os_message",
    "shown_name",
]

_DIRECTORY: Final = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class WorktreePaths:
    """The worktree's root and the confined paths below it."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        """Work in ``root`` (the worktree)."""
        self._root = Path(root)

    # ------------------------------------------------------------ paths

    def _relative(self, path: str, *, allow_root: bool = False) -> list[str]:
        """Return the resolved path's components below the root, or refuse."""
        if not isinstance(path, str):
            raise ToolInputError(f"path must be a string, got {type(path).__name__}")
        _no_git(path, path)
        try:
            full = resolve_inside(self._root, path, allow_root=allow_root)
        except WorkspaceEscapeError as error:
            raise ToolInputError(str(error)) from None
        real_root = os.path.realpath(self._root)
        relative = os.path.relpath(os.path.realpath(full), real_root)
        parts = [] if relative == "." else relative.split(os.sep)
        _no_git(path, "/".join(parts))
        if not parts and not allow_root:
            raise ToolInputError(f"path {path!r} names the worktree itself, not a file")
        return parts

    def _entry(self, path: str) -> list[str]:
        """Like :meth:`_relative`, but the last component is not followed.

        For operations on the entry itself (delete, rename): a symlink inside
        the worktree is the agent's to remove or move, wherever it points.
        """
        if not isinstance(path, str):
            raise ToolInputError(f"path must be a string, got {type(path).__name__}")
        head, _, name = path.replace("\\", "/").rstrip("/").rpartition("/")
        if name in ("", ".", ".."):
            raise ToolInputError(
                f"path {path!r} does not name an entry of the worktree"
            )
        _no_git(path, name)
        return [*self._relative(head, allow_root=True), name]

    @contextmanager
    def _directory(self, parts: list[str], *, create: bool) -> Iterator[int]:
        """Yield a descriptor of the directory ``parts`` names (no symlinks)."""
        fd = os.open(self._root, _DIRECTORY)
        try:
            for part in parts:
                try:
                    child = os.open(part, _DIRECTORY, dir_fd=fd)
                except FileNotFoundError:
                    if not create:
                        raise
                    os.mkdir(part, 0o777, dir_fd=fd)
                    child = os.open(part, _DIRECTORY, dir_fd=fd)
                os.close(fd)
                fd = child
            yield fd
        finally:
            os.close(fd)

    # ------------------------------------------------------------ patch paths

    def check_target(self, path: str) -> None:
        """Refuse ``path`` unless it stays inside the worktree, outside ``.git``.

        For a path a patch names: lexically inside, no ``.git`` component, and
        no symlink on the way that resolves outside. Nothing is opened.
        """
        self._relative(path)


def _named(path: str) -> str:
    """Return ``path`` for a one-line message: as a literal when it is not plain."""
    return path if path.isprintable() else repr(path)


def shown_name(name: str) -> str:
    r"""Return a file name as valid text: bytes that are not UTF-8 as ``\xNN``.

    Names come from the file system decoded with ``surrogateescape``; a name
    that is not UTF-8 then holds lone surrogates, which neither the trace nor
    JSON accepts.
    """
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def _no_git(path: str, candidate: str) -> None:
    if ".git" in candidate.replace("\\", "/").split("/"):
        raise ToolInputError(f"path {path!r} is inside .git, which is not the agent's")


def _os_message(path: str, error: OSError) -> str:
    if error.errno == errno.ELOOP:
        return f"{_named(path)}: a symlink was swapped in on the way; not followed"
    if error.errno == errno.EISDIR:
        return f"{_named(path)} is a directory"
    if error.errno in (errno.EACCES, errno.EPERM):
        return f"{_named(path)}: permission denied"
    return f"{_named(path)}: {error.strerror or error}"
