"""Path-level diff rendering and three-way merging over file maps.

Used by the memory backend (its whole engine) and shaped after git's output:
``diff --git`` headers, mode lines, ``Binary files ... differ`` for binary
content, unified hunks for text.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["FileEntry", "clashing_paths", "render_diff", "three_way"]


@dataclass(frozen=True, slots=True)
class FileEntry:
    """A file's content and git-style mode (``0o100644`` or ``0o100755``)."""

    data: bytes
    mode: int


def _text(data: bytes) -> list[str] | None:
    if b"\0" in data:
        return None
    try:
        return data.decode("utf-8").splitlines()
    except UnicodeDecodeError:
        return None


def _file_diff(path: str, old: FileEntry | None, new: FileEntry | None) -> list[str]:
    lines = [f"diff --git a/{path} b/{path}"]
    if old is None and new is not None:
        lines.append(f"new file mode {new.mode:o}")
    elif new is None and old is not None:
        lines.append(f"deleted file mode {old.mode:o}")
    elif old is not None and new is not None and old.mode != new.mode:
        lines += [f"old mode {old.mode:o}", f"new mode {new.mode:o}"]
    old_data = b"" if old is None else old.data
    new_data = b"" if new is None else new.data
    if old is not None and new is not None and old_data == new_data:
        return lines
    source = "/dev/null" if old is None else f"a/{path}"
    target = "/dev/null" if new is None else f"b/{path}"
    old_lines, new_lines = _text(old_data), _text(new_data)
    if old_lines is None or new_lines is None:
        return [*lines, f"Binary files {source} and {target} differ"]
    hunks = difflib.unified_diff(old_lines, new_lines, source, target, lineterm="")
    return lines + list(hunks)


def render_diff(
    before: Mapping[str, FileEntry], after: Mapping[str, FileEntry]
) -> tuple[str, list[str]]:
    """Return the unified diff from ``before`` to ``after`` and the changed paths."""
    paths = sorted(
        p for p in before.keys() | after.keys() if before.get(p) != after.get(p)
    )
    lines: list[str] = []
    for path in paths:
        lines += _file_diff(path, before.get(path), after.get(path))
    return ("\n".join(lines) + "\n" if lines else ""), paths


def clashing_paths(files: Mapping[str, FileEntry]) -> list[str]:
    """Return paths that are also a directory prefix of another path."""
    prefixes = {
        p.rsplit("/", depth)[0] for p in files for depth in range(1, p.count("/") + 1)
    }
    return sorted(prefixes & files.keys())


def three_way(
    base: Mapping[str, FileEntry],
    ours: Mapping[str, FileEntry],
    theirs: Mapping[str, FileEntry],
) -> tuple[dict[str, FileEntry], list[str]]:
    """Merge ``theirs``' changes since ``base`` into ``ours``, path by path.

    Returns the merged files and the conflicting paths (sorted; the merge is
    only valid when there are none). A path both sides changed identically
    is not a conflict.
    """
    merged = dict(ours)
    conflicts: list[str] = []
    for path in base.keys() | theirs.keys():
        was, mine, new = base.get(path), ours.get(path), theirs.get(path)
        if new == was or mine == new:
            continue
        if mine != was:
            conflicts.append(path)
        elif new is None:
            del merged[path]
        else:
            merged[path] = new
    if not conflicts:
        conflicts = clashing_paths(merged)
    return merged, sorted(conflicts)
