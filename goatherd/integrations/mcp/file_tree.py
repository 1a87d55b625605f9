"""A worktree's entries: removed, renamed, listed, walked and searched.

``FileTree`` deletes and moves entries (a symlink itself, never its target),
lists a directory, walks a tree to a bounded depth, and searches the
worktree's lines in a child process (``searching``) killed after a time
limit; the result types and the limits of those (``MAX_LIST_ENTRIES``,
``MAX_SEARCH_*``, ``SEARCH_SECONDS``, ``MAX_TREE_*``) live here. Imports
``file_paths``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys
from dataclasses import dataclass
from typing import Final

from goatherd.integrations.mcp import searching
from goatherd.integrations.mcp.errors import ToolInputError
from goatherd.integrations.mcp.file_paths import (
    _DIRECTORY,
    WorktreePaths,
    _named,
    _os_message,
    shown_name,
)

__all__ = [
    "FileEntry",
    "FileListing",
    "FileTree",
    "MAX_LIST_ENTRIES",
    "MAX_SEARCH_FILES",
    "MAX_SEARCH_FILE_BYTES",
    "MAX_SEARCH_LINE_BYTES",
    "MAX_SEARCH_MATCHES",
    "MAX_TREE_DEPTH",
    "MAX_TREE_ENTRIES",
    "SEARCH_SECONDS",
    "SearchMatch",
    "SearchResult",
    "TreeEntry",
    "TreeListing",
]

MAX_LIST_ENTRIES: Final = 2000
"""The most entries one ``list_files`` returns."""


MAX_SEARCH_MATCHES: Final = 2000
"""The most matching lines one ``search`` may be asked for."""
MAX_SEARCH_FILES: Final = 20_000
"""The most files one ``search`` reads."""
MAX_SEARCH_FILE_BYTES: Final = 4 * 1024 * 1024
"""Files larger than this are skipped by ``search``."""
MAX_SEARCH_LINE_BYTES: Final = 500
"""A matching line is returned cut to this many bytes."""
SEARCH_SECONDS: Final = 10.0
"""A ``search`` still running after this long is killed (its matches so far kept)."""
MAX_TREE_DEPTH: Final = 20
"""The deepest ``tree`` may be asked to go."""
MAX_TREE_ENTRIES: Final = 2000
"""The most entries one ``tree`` may be asked for."""


@dataclass(frozen=True, slots=True)
class FileEntry:
    """One listed entry: a path relative to the worktree, its kind and size."""

    path: str
    kind: str
    size: int


@dataclass(frozen=True, slots=True)
class FileListing:
    """Listed entries, in path order; ``truncated`` when the cap was reached."""

    entries: tuple[FileEntry, ...]
    truncated: bool


@dataclass(frozen=True, slots=True)
class SearchMatch:
    """One matching line: its file (relative to the worktree), number and text."""

    path: str
    line: int
    text: str


@dataclass(frozen=True, slots=True)
class SearchResult:
    """What a search found.

    Attributes:
        matches: the matching lines, in path then line order.
        files_searched: how many files were read.
        files_skipped: binary, too large, or not readable.
        truncated: the search stopped before the end (see ``reason``).
        reason: why it stopped early (``""``: it did not).
    """

    matches: tuple[SearchMatch, ...]
    files_searched: int
    files_skipped: int
    truncated: bool
    reason: str


@dataclass(frozen=True, slots=True)
class TreeEntry:
    """One entry of a tree: path, kind, depth (1: in the start) and symlink target."""

    path: str
    kind: str
    depth: int
    size: int = 0
    target: str = ""


@dataclass(frozen=True, slots=True)
class TreeListing:
    """A tree's entries in walk order; ``truncated`` when a cap cut it short."""

    entries: tuple[TreeEntry, ...]
    truncated: bool


class FileTree(WorktreePaths):
    """Deleting, moving, listing, walking and searching the worktree's entries."""

    # ------------------------------------------------------------ list

    def delete(self, path: str, recursive: bool) -> str:
        """Remove ``path`` (a directory only when ``recursive``); return its kind.

        Nothing is followed: a symlink is removed, not its target, and a
        directory's contents are removed through descriptors below the
        worktree.
        """
        parts = self._entry(path)
        try:
            with self._directory(parts[:-1], create=False) as parent:
                info = os.stat(parts[-1], dir_fd=parent, follow_symlinks=False)
                if stat.S_ISDIR(info.st_mode):
                    if not recursive:
                        raise ToolInputError(
                            f"{_named(path)} is a directory; pass recursive to"
                            " remove it with everything in it"
                        )
                    shutil.rmtree(parts[-1], dir_fd=parent)
                    return "directory"
                os.unlink(parts[-1], dir_fd=parent)
                return _kind(info.st_mode)
        except FileNotFoundError:
            raise _gone(path) from None
        except NotADirectoryError:
            raise _gone(path) from None
        except OSError as error:
            raise ToolInputError(_os_message(path, error)) from None

    def move(self, source: str, destination: str) -> str:
        """Rename ``source`` to ``destination`` (which must not exist); return its kind.

        Missing parent directories of ``destination`` are made.
        """
        src = self._entry(source)
        dst = self._entry(destination)
        if dst[: len(src)] == src:
            raise ToolInputError(
                f"cannot move {_named(source)} into itself ({_named(destination)})"
            )
        try:
            with (
                self._directory(src[:-1], create=False) as here,
                self._directory(dst[:-1], create=True) as there,
            ):
                info = os.stat(src[-1], dir_fd=here, follow_symlinks=False)
                try:
                    os.stat(dst[-1], dir_fd=there, follow_symlinks=False)
                except FileNotFoundError:
                    pass
                else:
                    raise ToolInputError(
                        f"{_named(destination)} exists; delete it first or pick"
                        " another name"
                    )
                os.rename(src[-1], dst[-1], src_dir_fd=here, dst_dir_fd=there)
                return _kind(info.st_mode)
        except (FileNotFoundError, NotADirectoryError):
            raise _gone(source) from None
        except OSError as error:
            raise ToolInputError(_os_message(source, error)) from None

    def list_entries(self, path: str, recursive: bool) -> FileListing:
        """List a directory (``""``: the worktree), ``.git`` left out."""
        parts = self._relative(path, allow_root=True)
        prefix = "/".join(parts)
        entries: list[FileEntry] = []
        try:
            with self._directory(parts, create=False) as fd:
                truncated = _walk(fd, prefix, recursive, entries)
        except FileNotFoundError:
            raise ToolInputError(f"{_named(path or '.')} does not exist") from None
        except NotADirectoryError:
            raise ToolInputError(f"{_named(path)} is not a directory") from None
        except OSError as error:
            raise ToolInputError(_os_message(path, error)) from None
        return FileListing(tuple(entries), truncated)

    # ------------------------------------------------------------ search

    def search(
        self,
        pattern: str,
        path: str = "",
        *,
        glob: str = "",
        ignore_case: bool = False,
        max_matches: int = 200,
        seconds: float = SEARCH_SECONDS,
    ) -> SearchResult:
        """Return the lines matching ``pattern`` under ``path`` (a directory or file).

        The search runs in a child process killed after ``seconds``; what it
        found by then is returned, ``truncated``.
        """
        try:
            re.compile(pattern, re.IGNORECASE if ignore_case else 0)
        except re.error as error:
            raise ToolInputError(
                f"pattern is not a valid regular expression: {error}"
            ) from None
        parts = self._relative(path, allow_root=True)
        request = {
            "root": str(self._root),
            "parts": parts,
            "pattern": pattern,
            "glob": glob,
            "ignore_case": ignore_case,
            "max_matches": max_matches,
            "max_files": MAX_SEARCH_FILES,
            "max_line_bytes": MAX_SEARCH_LINE_BYTES,
            "max_file_bytes": MAX_SEARCH_FILE_BYTES,
        }
        argv = [sys.executable, "-I", "-S", searching.__file__]
        try:
            done = subprocess.run(  # noqa: S603 - this interpreter, a fixed script
                argv,
                input=json.dumps(request).encode("utf-8"),
                capture_output=True,
                timeout=seconds,
                check=False,
            )
        except subprocess.TimeoutExpired as timed_out:
            reason = (
                f"the search outran its {seconds:g} s limit (a pattern that"
                " backtracks heavily, or a large tree: narrow path or glob)"
            )
            return _search_result(timed_out.stdout or b"", reason)
        if done.returncode != 0:
            raise ToolInputError(_search_failure(path, done.stderr))
        return _search_result(done.stdout, "")

    # ------------------------------------------------------------ tree

    def tree(self, path: str, depth: int, max_entries: int) -> TreeListing:
        """Walk ``path`` (``""``: the worktree) ``depth`` levels down, without ``.git``.

        Symlinks are listed with their target, never followed.
        """
        parts = self._relative(path, allow_root=True)
        entries: list[TreeEntry] = []
        try:
            with self._directory(parts, create=False) as fd:
                truncated = _tree(fd, "/".join(parts), 1, depth, max_entries, entries)
        except FileNotFoundError:
            raise ToolInputError(f"{_named(path or '.')} does not exist") from None
        except NotADirectoryError:
            raise ToolInputError(f"{_named(path)} is not a directory") from None
        except OSError as error:
            raise ToolInputError(_os_message(path, error)) from None
        return TreeListing(tuple(entries), truncated)


def _gone(path: str) -> ToolInputError:
    return ToolInputError(f"{_named(path)} does not exist")


def _walk(fd: int, prefix: str, recursive: bool, out: list[FileEntry]) -> bool:
    """Append the directory's entries (depth first, sorted); True when capped.

    The tree walk with no depth limit when ``recursive`` (else one level),
    its entries as listed files.
    """
    found: list[TreeEntry] = []
    depth = sys.maxsize if recursive else 1
    capped = _tree(fd, prefix, 1, depth, MAX_LIST_ENTRIES - len(out), found)
    out.extend(FileEntry(entry.path, entry.kind, entry.size) for entry in found)
    return capped


def _search_result(output: bytes, reason: str) -> SearchResult:
    """Read the engine's JSON lines (a last line cut by a kill is dropped)."""
    matches: list[SearchMatch] = []
    end: dict[str, object] = {}
    for raw in output.splitlines():
        try:
            item = json.loads(raw)
        except ValueError:
            continue
        if "match" in item:
            found, number, text = item["match"]
            matches.append(SearchMatch(str(found), int(number), str(text)))
        elif "end" in item:
            end = item["end"]
    ended = str(end.get("ended", "killed"))
    if not reason and ended != "complete":
        reason = {
            "max_matches": f"stopped at {len(matches)} matches (max_matches)",
            "max_files": f"stopped after {MAX_SEARCH_FILES} files: narrow path or glob",
        }.get(ended, ended)
    searched, skipped = end.get("files", 0), end.get("skipped", 0)
    return SearchResult(
        tuple(matches),
        searched if isinstance(searched, int) else 0,
        skipped if isinstance(skipped, int) else 0,
        bool(reason),
        reason,
    )


def _search_failure(path: str, stderr: bytes) -> str:
    last = stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or ["?"]
    if "FileNotFoundError" in last[0]:
        return f"{_named(path or '.')} does not exist"
    if "NotADirectoryError" in last[0] or "ELOOP" in last[0] or "Errno 40" in last[0]:
        return f"{_named(path)}: a symlink or not a directory on the way (not followed)"
    return f"search failed: {last[0]}"


def _tree(
    fd: int,
    prefix: str,
    level: int,
    depth: int,
    cap: int,
    out: list[TreeEntry],
) -> bool:
    """Append the directory's entries (sorted, depth first); True when capped."""
    with os.scandir(fd) as scan:
        found = sorted(scan, key=lambda entry: entry.name)
    for entry in found:
        if entry.name == ".git":
            continue
        if len(out) >= cap:
            return True
        name = shown_name(entry.name)
        relative = f"{prefix}/{name}" if prefix else name
        info = entry.stat(follow_symlinks=False)
        kind = _kind(info.st_mode)
        target = ""
        if kind == "symlink":
            target = shown_name(os.readlink(entry.name, dir_fd=fd))
        size = info.st_size if kind == "file" else 0
        out.append(TreeEntry(relative, kind, level, size, target))
        if kind == "directory" and level < depth:
            child = os.open(entry.name, _DIRECTORY, dir_fd=fd)
            try:
                if _tree(child, relative, level + 1, depth, cap, out):
                    return True
            finally:
                os.close(child)
    return False


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "directory"
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISLNK(mode):
        return "symlink"
    return "other"
