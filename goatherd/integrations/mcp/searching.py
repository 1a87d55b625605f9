"""The ``search`` tool's engine: a regular expression over a worktree, bounded.

It runs as its own short-lived process (``python -I searching.py``, the
standard library only), so the server bounds a search by time: a pattern
that backtracks for ever on some line is killed at the deadline, and the
matches printed before it are kept. The request arrives as one JSON object
on stdin; each match leaves as one JSON line as soon as it is found, then a
last line says how the search ended.

The walk opens every directory with ``O_NOFOLLOW`` relative to the one
before it, so it never leaves the directory it was started in: symlinks are
skipped (neither followed nor searched), and so are ``.git``, everything that
is not a regular file or a directory, files over the byte limit and binary
files (a NUL in the first 8 KiB). Lines are read as UTF-8 (bad bytes
replaced) and a matching line is returned cut to the byte limit.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import stat
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final, TextIO

__all__ = ["SearchRequest", "main", "search"]

_DIRECTORY: Final = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE: Final = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
_SNIFF: Final = 8192


@dataclass(frozen=True, slots=True)
class SearchRequest:
    """What to search and how much of it.

    Attributes:
        root: the worktree (the walk never leaves it).
        parts: the components of the directory or file below ``root`` to search.
        pattern: a Python regular expression.
        glob: only files whose name or relative path matches it (``""``: all).
        ignore_case: match without regard to case.
        max_matches: stop after this many matching lines.
        max_files: stop after reading this many files.
        max_line_bytes: cut a returned line to this many bytes.
        max_file_bytes: skip files larger than this.
    """

    root: str
    parts: tuple[str, ...]
    pattern: str
    glob: str
    ignore_case: bool
    max_matches: int
    max_files: int
    max_line_bytes: int
    max_file_bytes: int


def _opened_start(request: SearchRequest) -> tuple[int, str, bool]:
    """Open the start below the root: a descriptor, its path, whether a file."""
    fd = os.open(request.root, _DIRECTORY)
    for index, part in enumerate(request.parts):
        info = os.stat(part, dir_fd=fd, follow_symlinks=False)
        last = index == len(request.parts) - 1
        if last and stat.S_ISREG(info.st_mode):
            child = os.open(part, _FILE, dir_fd=fd)
            os.close(fd)
            return child, "/".join(request.parts), True
        child = os.open(part, _DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = child
    return fd, "/".join(request.parts), False


def _wanted(request: SearchRequest, relative: str, name: str) -> bool:
    if not request.glob:
        return True
    return fnmatch.fnmatchcase(name, request.glob) or fnmatch.fnmatchcase(
        relative, request.glob
    )


def _files(fd: int, prefix: str) -> Iterator[tuple[int, str, str]]:
    """Yield ``(parent fd, name, relative path)`` of regular files, depth first."""
    with os.scandir(fd) as scan:
        found = sorted(scan, key=lambda entry: entry.name)
    for entry in found:
        if entry.name == ".git":
            continue
        relative = f"{prefix}/{entry.name}" if prefix else entry.name
        try:
            mode = entry.stat(follow_symlinks=False).st_mode
        except OSError:
            continue
        if stat.S_ISREG(mode):
            yield fd, entry.name, relative
        elif stat.S_ISDIR(mode):
            try:
                child = os.open(entry.name, _DIRECTORY, dir_fd=fd)
            except OSError:
                continue
            try:
                yield from _files(child, relative)
            finally:
                os.close(child)


def _read(fd: int, limit: int) -> bytes | None:
    """The file's bytes, or ``None`` when it is not a regular file within the limit."""
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_size > limit:
        return None
    data = os.read(fd, limit + 1)
    if len(data) > limit or b"\0" in data[:_SNIFF]:
        return None
    return data


def _shown(name: str) -> str:
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def _cut(line: str, limit: int) -> str:
    data = line.encode("utf-8")
    if len(data) <= limit:
        return line
    return data[:limit].decode("utf-8", errors="ignore") + " [... line cut]"


def search(request: SearchRequest, out: TextIO) -> None:
    """Write each match of ``request`` to ``out`` as a JSON line, then the end."""
    flags = re.IGNORECASE if request.ignore_case else 0
    regex = re.compile(request.pattern, flags)
    matches = files = skipped = 0
    ended = "complete"

    def report(path: str, data: bytes) -> bool:
        nonlocal matches
        text = data.decode("utf-8", errors="replace")
        for number, line in enumerate(text.splitlines(), start=1):
            if regex.search(line) is None:
                continue
            if matches >= request.max_matches:
                return False
            shown = _cut(line, request.max_line_bytes)
            out.write(json.dumps({"match": [_shown(path), number, shown]}) + "\n")
            out.flush()
            matches += 1
        return True

    fd, start, is_file = _opened_start(request)
    try:
        if is_file:
            data = _read(fd, request.max_file_bytes)
            files = 1
            if data is None:
                skipped = 1
            elif not report(start, data):
                ended = "max_matches"
        else:
            for parent, name, relative in _files(fd, start):
                if not _wanted(request, relative, name):
                    continue
                if files >= request.max_files:
                    ended = "max_files"
                    break
                files += 1
                try:
                    handle = os.open(name, _FILE, dir_fd=parent)
                except OSError:
                    skipped += 1
                    continue
                try:
                    data = _read(handle, request.max_file_bytes)
                finally:
                    os.close(handle)
                if data is None:
                    skipped += 1
                    continue
                if not report(relative, data):
                    ended = "max_matches"
                    break
    finally:
        os.close(fd)
    end = {"ended": ended, "files": files, "skipped": skipped}
    out.write(json.dumps({"end": end}) + "\n")
    out.flush()


def main() -> int:
    """Read a request from stdin, search, write JSON lines to stdout."""
    fields = json.load(sys.stdin)
    fields["parts"] = tuple(fields["parts"])
    search(SearchRequest(**fields), sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
