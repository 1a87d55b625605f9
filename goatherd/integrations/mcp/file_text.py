"""A worktree file's text: read, written whole, and edited.

``FileText`` reads lines of a regular file (never blocking on it, never
holding more than its limit), writes a file through a new file beside it
that then replaces it, and replaces exact text in a file; the size limits of
those (``MAX_READ_BYTES``, ``MAX_READ_FILE_BYTES``, ``MAX_WRITE_BYTES``,
``MAX_EDIT_BYTES``) and ``TextRead`` live here. Imports ``file_paths``.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import Final

from goatherd.integrations.mcp.errors import ToolInputError
from goatherd.integrations.mcp.file_paths import WorktreePaths, _named, _os_message

__all__ = [
    "FileText",
    "MAX_EDIT_BYTES",
    "MAX_READ_BYTES",
    "MAX_READ_FILE_BYTES",
    "MAX_WRITE_BYTES",
    "TextRead",
]

MAX_READ_BYTES: Final = 256 * 1024
"""The most text one ``read_file`` returns (whole lines; ask again for more)."""
MAX_READ_FILE_BYTES: Final = 16 * 1024 * 1024
"""The largest file ``read_file`` reads (larger: refused before any byte is read)."""
MAX_WRITE_BYTES: Final = 4 * 1024 * 1024
"""The largest content ``write_file`` accepts (UTF-8 bytes)."""
MAX_EDIT_BYTES: Final = 8 * 1024 * 1024
"""The largest file ``edit_file`` rewrites."""
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


class FileText(WorktreePaths):
    """Reading, writing and editing the text of the worktree's files."""

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
