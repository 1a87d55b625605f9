"""The merge gate: proposals, the diff classifier and the built-in reviewers.

A :class:`MergeProposal` is what a reviewer sees: the child scope, the digest
of the baseline its changes are against, and the changes. A reviewer is a
callable returning ``None`` to approve or the denial reason. Glob patterns
follow Go's ``path.Match`` (``*`` and ``?`` never cross ``/``), not
``fnmatch``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Final, TypeAlias

from goatherd.domain.arguments import string_tuple
from goatherd.domain.canonical import canonical_digest
from goatherd.domain.runtime_errors import RuntimeRuleError

__all__ = [
    "CHANGE_CREATE",
    "CHANGE_DELETE",
    "CHANGE_MODIFY",
    "DestructivePathReviewer",
    "DraftsOnlyReviewer",
    "MergeProposal",
    "MergeReviewer",
    "ProposedChange",
    "SupervisorDeniedError",
    "changes_payload",
    "classify_changes",
    "diff_digest",
    "glob_match",
]

CHANGE_CREATE: Final = "create"
CHANGE_MODIFY: Final = "modify"
CHANGE_DELETE: Final = "delete"
_DEV_NULL: Final = "/dev/null"


@dataclass(frozen=True, slots=True)
class ProposedChange:
    """One workspace change a merge would introduce.

    Attributes:
        path: the workspace-relative path.
        kind: ``create``, ``modify`` or ``delete``.
        diff: the hunk section (modify/delete) or the added content (create).
    """

    path: str
    kind: str
    diff: str = ""


@dataclass(frozen=True, slots=True)
class MergeProposal:
    """A child's changes against its fork baseline, for review.

    Attributes:
        child_scope_id: the scope whose work would be merged.
        baseline_digest: the digest of the fork-time parent state.
        changes: every changed file, in diff order then file-list order.
        diff: the unified diff (bounded by the proposal's line limit).
    """

    child_scope_id: str
    baseline_digest: str
    changes: tuple[ProposedChange, ...] = ()
    diff: str = ""

    @property
    def paths(self) -> tuple[str, ...]:
        """The changed paths, in order."""
        return tuple(change.path for change in self.changes)


MergeReviewer: TypeAlias = Callable[[MergeProposal], str | None]
"""Approve with ``None``; deny with the reason (recorded in the trace)."""


class SupervisorDeniedError(RuntimeRuleError):
    """A reviewer denied a merge; the parent was not touched.

    Attributes:
        reason: the reviewer's reason.
        changes: the changes the proposal carried.
    """

    def __init__(self, reason: str, changes: Sequence[ProposedChange] = ()) -> None:
        """Build ``merge review denied: <reason> (changed paths: a, b)``."""
        message = f"merge review denied: {reason}"
        if changes:
            message += f" (changed paths: {', '.join(c.path for c in changes)})"
        super().__init__(message)
        self.reason = reason
        self.changes = tuple(changes)


# ------------------------------------------------------------ classification


@dataclass(slots=True)
class _Section:
    old: str = ""
    new: str = ""
    lines: list[str] = field(default_factory=list)


def _strip_prefix(path: str) -> str:
    path = path.split("\t", 1)[0]
    if path == _DEV_NULL:
        return path
    for prefix in ("a/", "b/"):
        if path.startswith(prefix):
            return path[len(prefix) :]
    return path


def _parse_sections(diff: str) -> list[_Section]:
    sections: list[_Section] = []
    current: _Section | None = None
    in_hunk = False
    for line in diff.split("\n"):
        if line.startswith("diff --git "):
            old, _, new = line[len("diff --git ") :].partition(" ")
            current = _Section(_strip_prefix(old), _strip_prefix(new))
            sections.append(current)
            in_hunk = False
        elif not in_hunk and line.startswith(("--- ", "+++ ")):
            if current is None:
                current = _Section()
                sections.append(current)
            if line.startswith("--- "):
                current.old = _strip_prefix(line[4:])
            else:
                current.new = _strip_prefix(line[4:])
        elif current is not None and (in_hunk or line.startswith("@@ ")):
            in_hunk = True
            current.lines.append(line)
    return sections


def _change_of(section: _Section) -> ProposedChange | None:
    usable_new = section.new and section.new != _DEV_NULL
    path = section.new if usable_new else section.old
    if not path or path == _DEV_NULL:
        return None
    if section.old == _DEV_NULL:
        added = [ln[1:] for ln in section.lines if ln.startswith("+")]
        return ProposedChange(path, CHANGE_CREATE, "\n".join(added))
    kind = CHANGE_DELETE if section.new == _DEV_NULL else CHANGE_MODIFY
    return ProposedChange(path, kind, "\n".join(section.lines))


def classify_changes(
    diff: str, files: Sequence[str] = ()
) -> tuple[ProposedChange, ...]:
    """Classify a unified diff into changes (runtime-spec 7.3).

    Every path in ``files`` the diff does not show is kept as a ``modify``
    with an empty diff, so nothing escapes review.
    """
    changes: list[ProposedChange] = []
    seen: set[str] = set()
    sections = _parse_sections(diff) if diff.strip() else []
    for section in sections:
        change = _change_of(section)
        if change is not None and change.path not in seen:
            seen.add(change.path)
            changes.append(change)
    for path in files:
        if path not in seen:
            seen.add(path)
            changes.append(ProposedChange(path, CHANGE_MODIFY, ""))
    return tuple(changes)


def changes_payload(changes: Sequence[ProposedChange]) -> list[dict[str, str]]:
    """Return the ``[{path, kind}]`` form records carry (diffs never stored)."""
    return [{"path": c.path, "kind": c.kind} for c in changes]


def diff_digest(diff: str) -> str:
    """Return the canonical digest of ``{"diff": diff}``."""
    return canonical_digest({"diff": diff}, root="diff")


# ------------------------------------------------------------ glob matching


def _class_to_regex(pattern: str, start: int) -> tuple[str, int] | None:
    """Translate a ``[...]`` class starting after ``[``; ``None`` if malformed."""
    parts: list[str] = []
    i, negated = start, False
    if i < len(pattern) and pattern[i] == "^":
        negated, i = True, i + 1
    while True:
        if i < len(pattern) and pattern[i] == "]" and parts:
            return ("[^" if negated else "[") + "".join(parts) + "]", i + 1
        lo = _class_char(pattern, i)
        if lo is None:
            return None
        char_lo, i = lo
        if i < len(pattern) and pattern[i] == "-":
            hi = _class_char(pattern, i + 1)
            if hi is None or hi[0] < char_lo:
                return None
            char_hi, i = hi
            parts.append(f"{re.escape(char_lo)}-{re.escape(char_hi)}")
        else:
            parts.append(re.escape(char_lo))


def _class_char(pattern: str, i: int) -> tuple[str, int] | None:
    if i >= len(pattern) or pattern[i] in "-]":
        return None
    if pattern[i] == "\\":
        if i + 1 >= len(pattern):
            return None
        return pattern[i + 1], i + 2
    return pattern[i], i + 1


def _glob_regex(pattern: str) -> re.Pattern[str] | None:
    out, i = [], 0
    while i < len(pattern):
        char = pattern[i]
        if char == "*":
            out.append("[^/]*")
            i += 1
        elif char == "?":
            out.append("[^/]")
            i += 1
        elif char == "[":
            translated = _class_to_regex(pattern, i + 1)
            if translated is None:
                return None
            out.append(translated[0])
            i = translated[1]
        elif char == "\\":
            if i + 1 >= len(pattern):
                return None
            out.append(re.escape(pattern[i + 1]))
            i += 2
        else:
            out.append(re.escape(char))
            i += 1
    return re.compile("".join(out), re.DOTALL)


def glob_match(pattern: str, path: str) -> bool:
    r"""Match ``path`` against ``pattern`` with Go ``path.Match`` semantics.

    ``*`` matches any run of non-``/`` characters, ``?`` one non-``/``
    character, ``[...]`` a class (``^`` negates, ``a-z`` ranges), ``\``
    escapes. A malformed pattern never matches.
    """
    compiled = _glob_regex(pattern)
    return compiled is not None and compiled.fullmatch(path) is not None


# ------------------------------------------------------------ reviewers


@dataclass(frozen=True, slots=True)
class DestructivePathReviewer:
    """Deny any change touching a path that matches one of ``patterns``.

    A pattern ending in ``/`` matches everything beneath that directory;
    otherwise it is a glob matched against the full path or the basename
    (``*.pem`` matches ``ca.pem`` and ``keys/ca.pem``). Empty patterns are
    skipped; an empty list denies nothing.
    """

    patterns: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        """Refuse a bare string where the patterns' collection is expected."""
        patterns = string_tuple(self.patterns, "DestructivePathReviewer patterns")
        object.__setattr__(self, "patterns", patterns)

    def __call__(self, proposal: MergeProposal) -> str | None:
        """Return the first denial reason, or ``None`` to approve."""
        for change in proposal.changes:
            for pattern in self.patterns:
                if pattern and _path_matches(pattern, change.path):
                    return (
                        f'change to "{change.path}" matches destructive-path'
                        f' pattern "{pattern}"'
                    )
        return None


def _path_matches(pattern: str, path: str) -> bool:
    if pattern.endswith("/"):
        return path.startswith(pattern)
    basename = path.rsplit("/", 1)[-1]
    return glob_match(pattern, path) or glob_match(pattern, basename)


@dataclass(frozen=True, slots=True)
class DraftsOnlyReviewer:
    """Deny any change outside ``prefix`` (an empty prefix approves everything)."""

    prefix: str = ""

    def __call__(self, proposal: MergeProposal) -> str | None:
        """Return the first denial reason, or ``None`` to approve."""
        if not self.prefix:
            return None
        for change in proposal.changes:
            inside = change.path == self.prefix or change.path.startswith(
                self.prefix.rstrip("/") + "/"
            )
            if not inside:
                return (
                    f'change to "{change.path}" is outside the drafts prefix'
                    f' "{self.prefix}"'
                )
        return None
