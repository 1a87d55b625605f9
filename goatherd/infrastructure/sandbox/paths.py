"""Workspace path checks shared by the sandbox backends.

A caller-supplied path is relative to the workspace root and must stay inside
it: no NUL, no absolute path, no ``..`` component, and (on a real filesystem)
no symlink on the way that resolves outside. Lexical checks alone are not a
jail (a later symlink can still escape); these checks refuse obvious escapes
before any I/O happens.
"""

from __future__ import annotations

import os
from pathlib import Path, PureWindowsPath

from goatherd.application.errors import WorkspaceEscapeError

__all__ = ["clean_relative", "resolve_inside"]


def clean_relative(path: str, *, allow_root: bool = False) -> str:
    """Return ``path`` normalized to ``a/b/c`` form, or raise.

    ``allow_root`` accepts ``""`` and ``.`` (returned as ``""``), for a cwd.

    Raises:
        WorkspaceEscapeError: for NUL, an absolute path, ``..``, or the root
            itself when ``allow_root`` is false.
    """
    if "\0" in path:
        raise WorkspaceEscapeError(path, "contains a NUL byte")
    if path.startswith(("/", "\\")) or PureWindowsPath(path).drive:
        raise WorkspaceEscapeError(path, "is absolute")
    parts = [part for part in path.split("/") if part not in ("", ".")]
    if parts and (parts[0].startswith("\\") or PureWindowsPath(parts[0]).drive):
        # "./C:" and "./\\x" normalize to absolute paths: refuse them as such.
        raise WorkspaceEscapeError(path, "is absolute")
    if ".." in parts:
        raise WorkspaceEscapeError(path, "has a '..' component")
    if not parts and not allow_root:
        raise WorkspaceEscapeError(path, "names the workspace root, not a file")
    return "/".join(parts)


def resolve_inside(root: Path, path: str, *, allow_root: bool = False) -> Path:
    """Return ``root / path`` after checking it cannot leave ``root``.

    Symlinks are resolved, so a link pointing outside the workspace is
    refused even when the path itself looks harmless.

    Raises:
        WorkspaceEscapeError: as :func:`clean_relative`, or when the resolved
            path lies outside ``root``.
    """
    relative = clean_relative(path, allow_root=allow_root)
    full = root / relative if relative else root
    real_root = os.path.realpath(root)
    real = os.path.realpath(full)
    if real != real_root and not real.startswith(real_root + os.sep):
        raise WorkspaceEscapeError(path, "resolves outside the workspace (symlink)")
    return full
