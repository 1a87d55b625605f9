"""Reading, writing, editing and listing files inside one worktree, and nowhere else.

A path is relative to the worktree. It is checked lexically and resolved
(symlinks that stay inside are followed, one that leads outside is refused)
before anything is opened; then every component of the resolved path is
opened with ``O_NOFOLLOW`` relative to the directory before it, so a symlink
swapped in after the check fails the call instead of leading outside. A file
is read only when it is a regular file: the last component is checked with
``lstat`` before it is opened (a FIFO, socket, device or directory is refused
without opening it), opened with ``O_NONBLOCK`` (a FIFO swapped in after the
check cannot block the open) and checked again with ``fstat`` on the open
descriptor; its size is checked before a byte is read, and at most the limit
plus one byte is ever read, so a file that grows meanwhile is refused too. Writes
go to a new file beside the target, then replace it, so a reader never sees
half a file. The repository's ``.git`` entries are refused: the worktree's
history is the runtime's, not the agent's.
"""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import stat
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from goatherd.application import WorkspaceEscapeError
from goatherd.infrastructure.sandbox.paths import resolve_inside
from goatherd.integrations.mcp import searching
from goatherd.integrations.mcp.errors import ToolInputError

__all__ = [
    "FileEntry",
    "FileListing",
    "MAX_EDIT_BYTES",
    "MAX_LIST_ENTRIES",
    "MAX_READ_BYTES",
    "MAX_READ_FILE_BYTES",
    "MAX_SEARCH_FILES",
    "MAX_SEARCH_FILE_BYTES",
    "MAX_SEARCH_LINE_BYTES",
    "MAX_SEARCH_MATCHES",
    "MAX_TREE_DEPTH",
    "MAX_TREE_ENTRIES",
    "MAX_WRITE_BYTES",
    "SEARCH_SECONDS",
    "SearchMatch",
    "SearchResult",
    "TextRead",
    "TreeEntry",
    "TreeListing",
    "WorkspaceFiles",
    "shown_name",
]

MAX_READ_BYTES: Final = 256 * 1024
"""The most text one ``read_file`` returns (whole lines; ask again for more)."""
MAX_READ_FILE_BYTES: Final = 16 * 1024 * 1024
"""The largest file ``read_file`` reads (larger: refused before any byte is read)."""
MAX_WRITE_BYTES: Final = 4 * 1024 * 1024
"""The largest content ``write_file`` accepts (UTF-8 bytes)."""
MAX_EDIT_BYTES: Final = 8 * 1024 * 1024
"""The largest file ``edit_file`` rewrites."""
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

_DIRECTORY: Final = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE: Final = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
_SNIFF: Final = 8192


@dataclass(frozen=True, slots=True)
class TextRead:
    """Lines of a text file.

    Attributes:
        text: the lines returned, newlines kept.
        first_line: the 1-based number of the first line returned.
        last_line: the number of the last line returned (``first_line - 1``
            when none was).
        total_lines: how many lines the file has.
        size: the file's size in bytes.
    """

    text: str
    first_line: int
    last_line: int
    total_lines: int
    size: int


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


class WorkspaceFiles:
    """File operations confined to one worktree directory."""

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

    # ------------------------------------------------------------ read

    def read_text(self, path: str, first_line: int, max_lines: int) -> TextRead:
        """Return up to ``max_lines`` lines from ``first_line`` (1-based).

        At most :data:`MAX_READ_BYTES` are returned, in whole lines (a single
        longer line is cut).
        """
        data = self._read_bytes(path, limit=MAX_READ_FILE_BYTES, verb="read")
        text = _decoded(path, data)
        lines = text.splitlines(keepends=True)
        start = first_line - 1
        if start > len(lines) and lines:
            raise ToolInputError(
                f"{_named(path)} has {len(lines)} lines; start_line {first_line}"
                " is past its end"
            )
        chosen: list[str] = []
        used = 0
        for line in lines[start : start + max_lines]:
            size = len(line.encode("utf-8"))
            if used + size > MAX_READ_BYTES:
                if not chosen:
                    chosen.append(_cut(line, MAX_READ_BYTES))
                break
            chosen.append(line)
            used += size
        return TextRead(
            "".join(chosen), first_line, start + len(chosen), len(lines), len(data)
        )

    def _read_bytes(self, path: str, *, limit: int, verb: str) -> bytes:
        """Return the bytes of the regular file ``path``, at most ``limit`` of them.

        Never blocks on the file and never holds more than ``limit + 1`` bytes.
        """
        parts = self._relative(path)
        with self._opened(path, parts) as fd:
            info = os.fstat(fd)
            _regular(path, info.st_mode)
            hint = (
                f"files over {limit} bytes cannot be {verb} with this tool"
                " (use run with head, tail or sed)"
            )
            if info.st_size > limit:
                raise ToolInputError(f"{_named(path)} is {info.st_size} bytes; {hint}")
            chunks = []
            held = 0
            while held <= limit:
                chunk = os.read(fd, min(1 << 20, limit + 1 - held))
                if not chunk:
                    break
                chunks.append(chunk)
                held += len(chunk)
            if held > limit:
                raise ToolInputError(f"{_named(path)} grew while it was read; {hint}")
            return b"".join(chunks)

    @contextmanager
    def _opened(self, path: str, parts: list[str]) -> Iterator[int]:
        try:
            with self._directory(parts[:-1], create=False) as parent:
                found = os.stat(parts[-1], dir_fd=parent, follow_symlinks=False)
                _regular(path, found.st_mode)
                fd = os.open(parts[-1], _FILE, dir_fd=parent)
        except FileNotFoundError:
            raise ToolInputError(f"{_named(path)} does not exist") from None
        except NotADirectoryError:
            raise ToolInputError(
                f"{_named(path)}: a parent is not a directory, or is a symlink"
                " (not followed)"
            ) from None
        except OSError as error:
            raise ToolInputError(_os_message(path, error)) from None
        try:
            yield fd
        finally:
            os.close(fd)

    # ------------------------------------------------------------ write

    def write_text(self, path: str, content: str) -> tuple[int, bool]:
        """Write ``content`` (UTF-8) to ``path``; return its size and whether it is new.

        Missing parent directories are created; an existing file keeps its
        mode (an executable stays executable).
        """
        data = content.encode("utf-8")
        if len(data) > MAX_WRITE_BYTES:
            raise ToolInputError(
                f"content is {len(data)} bytes; write_file takes at most"
                f" {MAX_WRITE_BYTES}"
            )
        parts = self._relative(path)
        created = self._replace(path, parts, data, create_parents=True)
        return len(data), created

    def edit_text(self, path: str, old: str, new: str, replace_all: bool) -> int:
        """Replace ``old`` by ``new`` in ``path``; return how many were replaced."""
        if not old:
            raise ToolInputError("old_text is empty; use write_file to write a file")
        if old == new:
            raise ToolInputError("old_text and new_text are the same")
        data = self._read_bytes(path, limit=MAX_EDIT_BYTES, verb="edited")
        text = _decoded(path, data)
        count = text.count(old)
        if count == 0:
            raise ToolInputError(f"old_text does not occur in {_named(path)}")
        if count > 1 and not replace_all:
            raise ToolInputError(
                f"old_text occurs {count} times in {_named(path)}; include more context"
                " to make it unique, or pass replace_all"
            )
        edited = text.replace(old, new) if replace_all else text.replace(old, new, 1)
        data = edited.encode("utf-8")
        if len(data) > MAX_EDIT_BYTES:
            raise ToolInputError(
                f"the edit would make {_named(path)} {len(data)} bytes, over"
                f" {MAX_EDIT_BYTES}"
            )
        self._replace(path, self._relative(path), data, create_parents=False)
        return count if replace_all else 1

    def _replace(
        self, path: str, parts: list[str], data: bytes, *, create_parents: bool
    ) -> bool:
        name = parts[-1]
        try:
            with self._directory(parts[:-1], create=create_parents) as parent:
                return _replace_in(parent, name, path, data)
        except FileNotFoundError:
            raise ToolInputError(
                f"{_named(path)}: its directory does not exist"
            ) from None
        except NotADirectoryError:
            raise ToolInputError(
                f"{_named(path)}: a parent is not a directory, or is a symlink"
                " (not followed)"
            ) from None
        except OSError as error:
            raise ToolInputError(_os_message(path, error)) from None

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

    # ------------------------------------------------------------ patch paths

    def check_target(self, path: str) -> None:
        """Refuse ``path`` unless it stays inside the worktree, outside ``.git``.

        For a path a patch names: lexically inside, no ``.git`` component, and
        no symlink on the way that resolves outside. Nothing is opened.
        """
        self._relative(path)


def _gone(path: str) -> ToolInputError:
    return ToolInputError(f"{_named(path)} does not exist")


def _replace_in(parent: int, name: str, path: str, data: bytes) -> bool:
    try:
        existing = os.stat(name, dir_fd=parent, follow_symlinks=False)
    except FileNotFoundError:
        existing = None
    if existing is not None and not stat.S_ISREG(existing.st_mode):
        kind = "a symlink" if stat.S_ISLNK(existing.st_mode) else "not a regular file"
        raise ToolInputError(f"{_named(path)} is {kind}; it is not replaced")
    mode = stat.S_IMODE(existing.st_mode) if existing is not None else 0o644
    temporary = f".{name}.goatherd-{os.getpid()}-{os.urandom(4).hex()}"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(temporary, flags, mode, dir_fd=parent)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fchmod(fd, mode)
        finally:
            os.close(fd)
        os.replace(temporary, name, src_dir_fd=parent, dst_dir_fd=parent)
    except BaseException:
        with suppress(FileNotFoundError):
            os.unlink(temporary, dir_fd=parent)
        raise
    return existing is None


def _regular(path: str, mode: int) -> None:
    """Refuse ``path`` unless ``mode`` is a regular file's (nothing is opened)."""
    if stat.S_ISREG(mode):
        return
    kind = (
        "a FIFO"
        if stat.S_ISFIFO(mode)
        else "a socket"
        if stat.S_ISSOCK(mode)
        else "a device"
        if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
        else "a directory"
        if stat.S_ISDIR(mode)
        else "a symlink"
        if stat.S_ISLNK(mode)
        else "not a regular file"
    )
    raise ToolInputError(f"{_named(path)} is {kind}, not a regular file; not read")


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


def _no_git(path: str, candidate: str) -> None:
    if ".git" in candidate.replace("\\", "/").split("/"):
        raise ToolInputError(f"path {path!r} is inside .git, which is not the agent's")


def _decoded(path: str, data: bytes) -> str:
    if b"\0" in data[:_SNIFF]:
        raise ToolInputError(f"{_named(path)} is a binary file ({len(data)} bytes)")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ToolInputError(
            f"{_named(path)} is not UTF-8 text (byte {error.start}); it is not shown"
        ) from None


def _cut(line: str, limit: int) -> str:
    return line.encode("utf-8")[:limit].decode("utf-8", errors="ignore")


def _os_message(path: str, error: OSError) -> str:
    if error.errno == errno.ELOOP:
        return f"{_named(path)}: a symlink was swapped in on the way; not followed"
    if error.errno == errno.EISDIR:
        return f"{_named(path)} is a directory"
    if error.errno in (errno.EACCES, errno.EPERM):
        return f"{_named(path)}: permission denied"
    return f"{_named(path)}: {error.strerror or error}"
