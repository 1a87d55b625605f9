"""Fuzz sandbox paths: escapes are refused with the sandbox's own error.

Random relative, absolute, ``..``-laden, NUL-bearing and symlinked paths go
through the memory sandbox's file API and the git sandbox's exec ``cwd``
check. A path that is accepted stays inside the workspace (resolved through
symlinks); an escape raises :class:`WorkspaceEscapeError` and touches nothing.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from goatherd.application import SandboxSpec, WorkspaceEscapeError
from goatherd.infrastructure.sandbox import MemorySandbox, MemorySandboxConfig
from goatherd.infrastructure.sandbox.paths import clean_relative, resolve_inside

SEGMENTS = st.sampled_from(
    ("a", "b.txt", "..", ".", "", "out", "in", "\0", "~", "C:", "\\..", "a\\..")
) | st.text(max_size=6)
paths = st.lists(SEGMENTS, max_size=6).map("/".join) | st.builds(
    lambda p: "/" + p, st.text(max_size=10)
)


def _inside(root: Path, full: Path) -> bool:
    real_root = os.path.realpath(root)
    real = os.path.realpath(full)
    return real == real_root or real.startswith(real_root + os.sep)


_ROOT: list[Path] = []


@pytest.fixture(scope="module", autouse=True)
def _workspace(tmp_path_factory: pytest.TempPathFactory) -> None:
    base = tmp_path_factory.mktemp("paths")
    root, outside = base / "root", base / "outside"
    (root / "in").mkdir(parents=True)
    outside.mkdir()
    os.symlink(outside, root / "out")
    os.symlink(root / "in", root / "in" / "loop")
    _ROOT[:] = [root]


@given(paths, st.booleans())
def test_resolved_paths_stay_inside_or_are_refused(path: str, allow_root: bool) -> None:
    root = _ROOT[0]
    try:
        full = resolve_inside(root, path, allow_root=allow_root)
    except WorkspaceEscapeError as error:
        refused = error.path
    else:
        assert _inside(root, full)
        assert ".." not in clean_relative(path, allow_root=allow_root).split("/")
        return
    assert refused == path


@given(paths, st.binary(max_size=8))
def test_the_memory_sandbox_refuses_escapes_with_its_own_error(
    path: str, data: bytes
) -> None:
    sandbox = MemorySandbox(MemorySandboxConfig(files={"keep.txt": b"k"}))
    sandbox.create(SandboxSpec())
    before = {p: sandbox.read_file(p) for p in sandbox.list_files()}
    message = ""
    try:
        sandbox.write_file(path, data)
    except WorkspaceEscapeError:
        message = "escape"
    except (IsADirectoryError, NotADirectoryError) as error:
        # Not an escape: the file API mirrors a filesystem's own refusals
        # (a path through or onto an existing file), naming the sandbox.
        message = str(error)
        clean_relative(path)
    if message:
        assert message == "escape" or message.startswith("memory sandbox: ")
        assert {p: sandbox.read_file(p) for p in sandbox.list_files()} == before
        return
    relative = clean_relative(path)
    assert sandbox.read_file(relative) == data
    assert all(".." not in p.split("/") for p in sandbox.list_files())


@pytest.mark.parametrize("path", ["./C:", "./\\..", ".//\\x", "./c:/x"])
def test_an_absolute_path_hidden_behind_dot_slash_is_refused(path: str) -> None:
    with pytest.raises(WorkspaceEscapeError, match="is absolute"):
        clean_relative(path)
