"""The ``apply_patch`` tool: a unified diff applied to a worktree by ``git apply``.

Git's own applier does the work, through goatherd's git runner (no hooks,
filters or external programs, ADR 0067). Before it runs, every path the
patch names (read by ``git apply --numstat``, so renames and copies count
both sides) is checked like any file tool's path: inside the worktree, not
in ``.git``, no symlink on the way that leads outside. A patch that makes a
symlink is refused, as is one that only touches a ``.git`` entry. ``git
apply`` checks every hunk before it writes anything, so a patch applies
whole or not at all; a hunk that does not match is refused naming its file,
its number in that file's section and its header.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from goatherd.application import GitError
from goatherd.infrastructure.sandbox.gitrunner import GitRunner
from goatherd.integrations.mcp.errors import ToolInputError
from goatherd.integrations.mcp.files import WorkspaceFiles

__all__ = ["MAX_PATCH_BYTES", "PatchedFile", "apply_patch"]

MAX_PATCH_BYTES: Final = 4 * 1024 * 1024
"""The largest patch ``apply_patch`` accepts (UTF-8 bytes)."""

_NO_FILE: Final = (
    "the patch changes no file (a unified diff names each file in --- a/PATH"
    " and +++ b/PATH lines)"
)
_SYMLINK_MODE: Final = re.compile(r"^(new file mode|new mode) 120000\b", re.MULTILINE)
_FAILED: Final = re.compile(r"^error: patch failed: (.+):(\d+)$", re.MULTILINE)
_HUNK: Final = re.compile(r"^@@ -(\d+)(?:,\d+)? \+\d+(?:,\d+)? @@.*$")
_SECTION: Final = re.compile(r"^(?:diff --git a/(.+) b/|\+\+\+ (?:b/)?(.+?)\t?$)")


@dataclass(frozen=True, slots=True)
class PatchedFile:
    """A file the patch changed: its path and lines added and deleted."""

    path: str
    added: int
    deleted: int


def apply_patch(worktree: Path, patch: str) -> tuple[PatchedFile, ...]:
    """Apply ``patch`` (a unified diff, paths as ``a/...`` ``b/...``) to ``worktree``.

    Raises:
        ToolInputError: the patch is empty, not a patch, names a path that is
            not the agent's, makes a symlink, or a hunk does not apply (then
            nothing was changed).
    """
    if not patch.strip():
        raise ToolInputError("patch is empty")
    data = patch.encode("utf-8")
    if not data.endswith(b"\n"):
        data += b"\n"
    if _SYMLINK_MODE.search(patch):
        raise ToolInputError("the patch makes a symlink; apply_patch does not")
    git = GitRunner(worktree)
    files = _numstat(git, data)
    checker = WorkspaceFiles(worktree)
    for item in files:
        checker.check_target(item.path)
    try:
        git.run("apply", "--whitespace=nowarn", "-", stdin=data)
    except GitError as error:
        raise ToolInputError(_refusal(patch, error.stderr)) from None
    return files


def _numstat(git: GitRunner, data: bytes) -> tuple[PatchedFile, ...]:
    """Every path the patch touches, with its counts (renames: both names)."""
    try:
        out = git.run("apply", "--numstat", "-z", "-", stdin=data)
    except GitError as error:
        if "No valid patches" in error.stderr:
            raise ToolInputError(_NO_FILE) from None
        raise ToolInputError(
            f"not a patch git can read: {_first(error.stderr)}"
        ) from None
    fields = out.split(b"\0")
    files: list[PatchedFile] = []
    index = 0
    while index < len(fields) and fields[index]:
        added, _, rest = fields[index].partition(b"\t")
        deleted, _, name = rest.partition(b"\t")
        names = [name]
        if not name:  # a rename or copy: the two names follow
            names = [fields[index + 1], fields[index + 2]]
            index += 2
        index += 1
        for raw in names:
            path = raw.decode("utf-8", "surrogateescape")
            files.append(PatchedFile(path, _count(added), _count(deleted)))
    if not files:
        raise ToolInputError(_NO_FILE)
    return tuple(files)


def _count(raw: bytes) -> int:
    return int(raw) if raw.isdigit() else 0


def _first(stderr: str) -> str:
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    return lines[0].removeprefix("error: ") if lines else "git apply failed"


def _refusal(patch: str, stderr: str) -> str:
    """Name the file and hunk git could not apply."""
    failed = _FAILED.search(stderr)
    if failed is None:
        return f"the patch does not apply, nothing was changed: {_first(stderr)}"
    path, line = failed.group(1), int(failed.group(2))
    number, header = _hunk_at(patch, path, line)
    which = f"hunk {number} ({header})" if number else f"the hunk at line {line}"
    return (
        f"the patch does not apply, nothing was changed: {path}: {which} does not"
        " match the file (read it again and rebuild the hunk)"
    )


def _hunk_at(patch: str, path: str, line: int) -> tuple[int, str]:
    """The number (1-based, within the file's section) and header of a hunk."""
    current = ""
    number = 0
    for text in patch.splitlines():
        section = _SECTION.match(text)
        if section is not None:
            name = section.group(1) or section.group(2) or ""
            if name != current:
                current, number = name, 0
            continue
        hunk = _HUNK.match(text)
        if hunk is None:
            continue
        number += 1
        start = int(hunk.group(1))
        if current == path and start == line:
            return number, text
    return 0, ""
