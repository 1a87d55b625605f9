"""The ``memory`` sandbox: a real in-process workspace of files.

It has the git backend's semantics without a disk: a :class:`MemoryRepository`
holds content-addressed blobs, trees and commits shared by every sandbox
opened on it (the analogue of worktrees sharing one object store); a
:class:`MemorySandbox` is one working copy with a head commit. Capture is
content-addressed (identical files at the same head give identical states),
apply is reusable and exact, diff is against the captured tree, and delta
apply is a path-level three-way merge. It cannot execute commands.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field

from goatherd.application.errors import (
    ApplyConflictError,
    ConflictHunk,
    InvalidWorkspaceStateError,
    SandboxConfigError,
    SandboxError,
    UnsupportedError,
)
from goatherd.application.ports import (
    CONTAINMENT_BUFFERED,
    ExecRequest,
    ExecResult,
    SandboxCapabilities,
    SandboxSpec,
    truncate_diff,
)
from goatherd.domain.workspace import WorkspaceState
from goatherd.infrastructure.sandbox.merge import (
    CLASH,
    Side,
    merge_lines,
    merge_reason,
)
from goatherd.infrastructure.sandbox.paths import clean_relative
from goatherd.infrastructure.sandbox.registry import register_sandbox
from goatherd.infrastructure.sandbox.textdiff import (
    FileEntry,
    clashing_paths,
    render_diff,
    three_way,
)

__all__ = [
    "MEMORY_BACKEND",
    "MemoryRepository",
    "MemorySandbox",
    "MemorySandboxConfig",
]

MEMORY_BACKEND = "memory"
_REGULAR = 0o100644
_EXECUTABLE = 0o100755

Tree = dict[str, tuple[int, str]]


def _blob_id(data: bytes) -> str:
    return hashlib.sha256(b"blob\0" + data).hexdigest()


def _tree_id(tree: Mapping[str, tuple[int, str]]) -> str:
    text = "\n".join(
        f"{mode:o} {blob} {path}" for path, (mode, blob) in sorted(tree.items())
    )
    return hashlib.sha256(b"tree\0" + text.encode("utf-8")).hexdigest()


def _commit_id(parent: str, tree: str) -> str:
    return hashlib.sha256(f"commit\0{parent}\0{tree}".encode()).hexdigest()


class MemoryRepository:
    """The object store memory sandboxes share: blobs, trees and commits.

    Objects are never deleted, so a captured state outlives the sandbox that
    captured it, as git objects outlive a removed worktree.
    """

    def __init__(self, files: Mapping[str, bytes] | None = None) -> None:
        """Start a repository whose first commit holds ``files`` (mode 0644)."""
        self._lock = threading.Lock()
        self._blobs: dict[str, bytes] = {}
        self._trees: dict[str, Tree] = {}
        self._commits: dict[str, tuple[str, str]] = {}
        entries = {
            clean_relative(p): FileEntry(d, _REGULAR) for p, d in (files or {}).items()
        }
        self.head = self.commit(self.store(entries), parent="")

    def store(self, files: Mapping[str, FileEntry]) -> str:
        """Store the files' blobs and their tree; return the tree id."""
        tree: Tree = {}
        with self._lock:
            for path, entry in files.items():
                blob = _blob_id(entry.data)
                self._blobs.setdefault(blob, entry.data)
                tree[path] = (entry.mode, blob)
            tree_id = _tree_id(tree)
            self._trees.setdefault(tree_id, tree)
        return tree_id

    def commit(self, tree: str, parent: str) -> str:
        """Record a commit of ``tree`` on ``parent``; return its id."""
        commit = _commit_id(parent, tree)
        with self._lock:
            self._commits.setdefault(commit, (parent, tree))
        return commit

    def commit_tree(self, commit: str) -> str | None:
        """Return the tree of ``commit``, or ``None`` when it is unknown."""
        with self._lock:
            found = self._commits.get(commit)
        return None if found is None else found[1]

    def files(self, tree: str) -> dict[str, FileEntry] | None:
        """Return the files of ``tree``, or ``None`` when it is unknown."""
        with self._lock:
            found = self._trees.get(tree)
            if found is None:
                return None
            return {
                p: FileEntry(self._blobs[b], mode) for p, (mode, b) in found.items()
            }


@dataclass(frozen=True, slots=True)
class MemorySandboxConfig:
    """How to open a memory sandbox.

    Attributes:
        repository: share this repository (a sibling working copy starting at
            its head); ``None`` starts a new repository.
        files: the first commit's files for a new repository.
    """

    repository: MemoryRepository | None = None
    files: Mapping[str, bytes] = field(default_factory=dict)


class MemorySandbox:
    """One working copy of a :class:`MemoryRepository`.

    ``create`` checks the repository head out (a second ``create`` while live
    is refused); ``destroy`` drops the files, while captured states survive in
    the repository.
    """

    def __init__(self, config: MemorySandboxConfig | None = None) -> None:
        cfg = config or MemorySandboxConfig()
        if cfg.repository is not None and cfg.files:
            raise SandboxConfigError(
                "memory sandbox: give either a repository or initial files, not both"
            )
        self._lock = threading.RLock()
        self.repository = cfg.repository or MemoryRepository(cfg.files)
        self._head = self.repository.head
        self._files: dict[str, FileEntry] | None = None

    # ------------------------------------------------------------ identity
    def backend(self) -> str:
        return MEMORY_BACKEND

    def capabilities(self) -> SandboxCapabilities:
        return SandboxCapabilities(
            lifecycle=True,
            exec=False,
            file_io=True,
            diff=True,
            isolated=True,
            containment=CONTAINMENT_BUFFERED,
        )

    # ------------------------------------------------------------ lifecycle
    def create(self, spec: SandboxSpec) -> None:
        with self._lock:
            if self._files is not None:
                raise SandboxError("memory sandbox is already created")
            self._head = self.repository.head
            self._files = self._checkout(self._head)

    def destroy(self) -> None:
        with self._lock:
            self._files = None

    # ------------------------------------------------------------ states
    def capture(self) -> WorkspaceState:
        with self._lock:
            files = self._live()
            tree = self.repository.store(files)
            return WorkspaceState(
                backend=MEMORY_BACKEND,
                revision=self._head,
                data={"head": self._head, "tree": tree},
            )

    def apply(self, state: WorkspaceState) -> None:
        with self._lock:
            self._live()
            head, tree = self._resolve(state)
            files = self._tree_files(tree)
            self._files = files
            self._head = head

    def diff(self, state: WorkspaceState, max_lines: int = 0) -> tuple[str, list[str]]:
        with self._lock:
            current = dict(self._live())
            _, tree = self._resolve(state)
            before = self._tree_files(tree)
        text, paths = render_diff(before, current)
        return truncate_diff(text, max_lines), paths

    def apply_delta(
        self, delta: WorkspaceState, base: WorkspaceState | None = None
    ) -> None:
        with self._lock:
            self._files = self._plan_delta(delta, base)

    def check_delta(
        self, delta: WorkspaceState, base: WorkspaceState | None = None
    ) -> None:
        with self._lock:
            self._plan_delta(delta, base)

    def _plan_delta(
        self, delta: WorkspaceState, base: WorkspaceState | None
    ) -> dict[str, FileEntry]:
        """Return the merged files; the same rule as the git backend (ADR 0083)."""
        current = self._live()
        head, theirs_tree = self._resolve(delta)
        base_tree = (
            self._resolve(base)[1] if base else self.repository.commit_tree(head)
        )
        assert base_tree is not None  # _resolve checked the head commit exists
        was, new = self._tree_files(base_tree), self._tree_files(theirs_tree)
        merged, conflicts = three_way(was, current, new)
        if not conflicts:
            return merged
        reasons: dict[str, str] = {}
        hunks: list[ConflictHunk] = []
        for path in conflicts:
            sides = [_side(files.get(path)) for files in (was, current, new)]
            clash = _is_dir(path, current) or _is_dir(path, new)
            reason = merge_reason(*sides, clash=clash)
            if reason:
                reasons[path] = reason
                continue
            result = merge_lines(path, *(side.data for side in sides if side))
            hunks += result.hunks
            merged[path] = FileEntry(result.data, current[path].mode)
        if not reasons and not hunks:
            reasons = dict.fromkeys(clashing_paths(merged), CLASH)
            conflicts = sorted({*conflicts, *reasons})
        if reasons or hunks:
            raise ApplyConflictError(
                conflicts,
                "the delta and the workspace both changed",
                hunks=hunks,
                reasons=reasons,
            )
        return merged

    def commit(self) -> str:
        """Commit the working files on the head (a test helper); return the id."""
        with self._lock:
            tree = self.repository.store(self._live())
            self._head = self.repository.commit(tree, self._head)
            self.repository.head = self._head
            return self._head

    # ------------------------------------------------------------ files
    def read_file(self, path: str) -> bytes:
        relative = clean_relative(path)
        with self._lock:
            files = self._live()
            if relative in files:
                return files[relative].data
            if any(p.startswith(relative + "/") for p in files):
                raise IsADirectoryError(f"memory sandbox: {relative} is a directory")
            raise FileNotFoundError(f"memory sandbox: no file {relative}")

    def write_file(self, path: str, data: bytes, perm: int = 0o644) -> None:
        relative = clean_relative(path)
        with self._lock:
            files = self._live()
            if any(p.startswith(relative + "/") for p in files):
                raise IsADirectoryError(f"memory sandbox: {relative} is a directory")
            parts = relative.split("/")
            for depth in range(1, len(parts)):
                if "/".join(parts[:depth]) in files:
                    raise NotADirectoryError(
                        f"memory sandbox: {'/'.join(parts[:depth])} is a file"
                    )
            files[relative] = FileEntry(
                bytes(data), _EXECUTABLE if perm & 0o111 else _REGULAR
            )

    def is_executable(self, path: str) -> bool:
        """Return whether a workspace file has its executable bit."""
        relative = clean_relative(path)
        with self._lock:
            entry = self._live().get(relative)
        if entry is None:
            raise FileNotFoundError(f"memory sandbox: no file {relative}")
        return entry.mode == _EXECUTABLE

    def list_files(self) -> list[str]:
        """Return every workspace file path, sorted."""
        with self._lock:
            return sorted(self._live())

    def remove_file(self, path: str) -> None:
        """Delete a workspace file (what ``rm`` would do through ``exec``)."""
        relative = clean_relative(path)
        with self._lock:
            files = self._live()
            if relative not in files:
                raise FileNotFoundError(f"memory sandbox: no file {relative}")
            del files[relative]

    def exec(self, request: ExecRequest) -> ExecResult:
        raise UnsupportedError(
            MEMORY_BACKEND, "exec", "an in-process workspace runs nothing"
        )

    # ------------------------------------------------------------ internals
    def _live(self) -> dict[str, FileEntry]:
        if self._files is None:
            raise SandboxError("memory sandbox is not created (or was destroyed)")
        return self._files

    def _checkout(self, commit: str) -> dict[str, FileEntry]:
        tree = self.repository.commit_tree(commit)
        assert tree is not None  # heads always name stored commits
        return self._tree_files(tree)

    def _tree_files(self, tree: str) -> dict[str, FileEntry]:
        files = self.repository.files(tree)
        assert files is not None  # _resolve checked the tree exists
        return files

    def _resolve(self, state: WorkspaceState) -> tuple[str, str]:
        """Return the state's (head, tree) after checking it belongs here."""
        if state.backend != MEMORY_BACKEND:
            raise InvalidWorkspaceStateError(
                f'cannot apply state from backend "{state.backend}" to a memory sandbox'
            )
        data = state.data or {}
        head, tree = data.get("head"), data.get("tree")
        if not isinstance(head, str) or not isinstance(tree, str):
            raise InvalidWorkspaceStateError(
                "corrupt memory state: data needs string 'head' and 'tree'"
            )
        if state.revision != head:
            raise InvalidWorkspaceStateError(
                "corrupt memory state: revision does not match data.head"
            )
        if (
            self.repository.commit_tree(head) is None
            or self.repository.files(tree) is None
        ):
            raise InvalidWorkspaceStateError(
                "memory state is from another repository (its objects are missing here)"
            )
        return head, tree


def _open_memory(config: object) -> MemorySandbox:
    if config is not None and not isinstance(config, MemorySandboxConfig):
        raise SandboxConfigError(
            "memory sandbox: config must be a MemorySandboxConfig, "
            f"got {type(config).__name__}"
        )
    return MemorySandbox(config)


register_sandbox(MEMORY_BACKEND, _open_memory)


def _side(entry: FileEntry | None) -> Side | None:
    return None if entry is None else Side(entry.mode, entry.data)


def _is_dir(path: str, files: Mapping[str, FileEntry]) -> bool:
    return any(p.startswith(path + "/") for p in files)
