"""File tools stay inside the worktree: every escape is refused and changes nothing."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from goatherd.integrations.mcp import ToolInputError
from goatherd.integrations.mcp.files import (
    MAX_LIST_ENTRIES,
    MAX_READ_BYTES,
    MAX_WRITE_BYTES,
    WorkspaceFiles,
)


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "wt"
    (root / "src").mkdir(parents=True)
    (root / "src" / "a.py").write_text("one\ntwo\nthree\n")
    (root / ".git").write_text("gitdir: /elsewhere\n")
    (tmp_path / "outside.txt").write_text("secret\n")
    return root


def _snapshot(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root.parent)): p.read_bytes()
        for p in sorted(root.parent.rglob("*"))
        if p.is_file() and not p.is_symlink()
    }


ESCAPES = [
    "../outside.txt",
    "/etc/passwd",
    "src/../../outside.txt",
    "a\0b",
    ".git",
    ".git/config",
    "src/../.git/hooks/pre-commit",
    "",
    ".",
]


@pytest.mark.parametrize("path", ESCAPES)
def test_escaping_paths_are_refused_everywhere(tree: Path, path: str) -> None:
    files = WorkspaceFiles(tree)
    before = _snapshot(tree)
    with pytest.raises(ToolInputError):
        files.read_text(path, 1, 10)
    with pytest.raises(ToolInputError):
        files.write_text(path, "pwned\n")
    with pytest.raises(ToolInputError):
        files.edit_text(path, "secret", "pwned", False)
    assert _snapshot(tree) == before


def test_a_symlink_leading_outside_is_refused(tree: Path) -> None:
    (tree / "link").symlink_to(tree.parent / "outside.txt")
    (tree / "dirlink").symlink_to(tree.parent)
    files = WorkspaceFiles(tree)
    for path in ("link", "dirlink/outside.txt", "dirlink/new.txt"):
        with pytest.raises(ToolInputError, match="escapes the workspace"):
            files.write_text(path, "pwned\n")
        with pytest.raises(ToolInputError, match="escapes the workspace"):
            files.read_text(path, 1, 10)
    with pytest.raises(ToolInputError, match="escapes the workspace"):
        files.list_entries("dirlink", recursive=False)
    assert (tree.parent / "outside.txt").read_text() == "secret\n"
    assert not (tree.parent / "new.txt").exists()


def test_a_symlink_inside_is_followed_to_its_target(tree: Path) -> None:
    (tree / "alias.py").symlink_to("src/a.py")
    files = WorkspaceFiles(tree)
    assert files.read_text("alias.py", 1, 10).text == "one\ntwo\nthree\n"
    files.edit_text("alias.py", "two", "TWO", False)
    assert (tree / "src" / "a.py").read_text() == "one\nTWO\nthree\n"
    assert (tree / "alias.py").is_symlink()


def test_a_symlink_swapped_in_after_the_check_is_not_followed(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = WorkspaceFiles(tree)
    real_relative = files._relative

    def swap_then_check(path: str, *, allow_root: bool = False) -> list[str]:
        parts = real_relative(path, allow_root=allow_root)
        # Between the check and the open, the directory becomes a symlink out.
        os.rename(tree / "src", tree / "src-old")
        (tree / "src").symlink_to(tree.parent)
        return parts

    monkeypatch.setattr(files, "_relative", swap_then_check)
    with pytest.raises(ToolInputError, match="symlink"):
        files.write_text("src/outside.txt", "pwned\n")
    assert (tree.parent / "outside.txt").read_text() == "secret\n"


def test_read_returns_lines_and_says_where_to_read_on(tree: Path) -> None:
    files = WorkspaceFiles(tree)
    read = files.read_text("src/a.py", 2, 1)
    assert (read.text, read.first_line, read.last_line, read.total_lines) == (
        "two\n",
        2,
        2,
        3,
    )
    with pytest.raises(ToolInputError, match="past its end"):
        files.read_text("src/a.py", 9, 1)


def test_a_long_file_is_returned_in_parts(tree: Path) -> None:
    line = "x" * 999 + "\n"
    (tree / "big.txt").write_text(line * 1000)
    read = WorkspaceFiles(tree).read_text("big.txt", 1, 100_000)
    assert len(read.text.encode()) <= MAX_READ_BYTES
    assert read.last_line == MAX_READ_BYTES // 1000
    assert read.total_lines == 1000


@pytest.mark.parametrize(
    ("data", "message"),
    [(b"\x00\x01binary", "binary"), (b"caf\xe9\n", "not UTF-8")],
)
def test_binary_and_non_utf8_files_are_not_shown(
    tree: Path, data: bytes, message: str
) -> None:
    (tree / "blob").write_bytes(data)
    with pytest.raises(ToolInputError, match=message):
        WorkspaceFiles(tree).read_text("blob", 1, 10)
    with pytest.raises(ToolInputError, match=message):
        WorkspaceFiles(tree).edit_text("blob", "a", "b", False)
    assert (tree / "blob").read_bytes() == data


def test_write_creates_parents_and_keeps_an_executables_mode(tree: Path) -> None:
    files = WorkspaceFiles(tree)
    assert files.write_text("new/deep/file.txt", "hi\n") == (3, True)
    script = tree / "run.sh"
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    assert files.write_text("run.sh", "#!/bin/sh\necho hi\n") == (18, False)
    assert stat.S_IMODE(script.stat().st_mode) == 0o755
    assert not list(tree.rglob(".*goatherd-*")), "no temporary file left"


def test_write_refuses_too_much_and_directories(tree: Path) -> None:
    files = WorkspaceFiles(tree)
    with pytest.raises(ToolInputError, match="at most"):
        files.write_text("big", "x" * (MAX_WRITE_BYTES + 1))
    with pytest.raises(ToolInputError, match="not a regular file"):
        files.write_text("src", "x")
    with pytest.raises(ToolInputError, match="not a directory"):
        files.write_text("src/a.py/inner", "x")
    assert not (tree / "big").exists()


@pytest.mark.parametrize(
    ("old", "new", "replace_all", "message"),
    [
        ("", "x", False, "empty"),
        ("two", "two", False, "the same"),
        ("four", "x", False, "does not occur"),
        ("e", "E", False, "occurs 3 times"),
    ],
)
def test_edits_that_cannot_apply_exactly_change_nothing(
    tree: Path, old: str, new: str, replace_all: bool, message: str
) -> None:
    before = (tree / "src" / "a.py").read_bytes()
    with pytest.raises(ToolInputError, match=message):
        WorkspaceFiles(tree).edit_text("src/a.py", old, new, replace_all)
    assert (tree / "src" / "a.py").read_bytes() == before


def test_replace_all_replaces_every_occurrence(tree: Path) -> None:
    assert WorkspaceFiles(tree).edit_text("src/a.py", "e", "E", True) == 3
    assert (tree / "src" / "a.py").read_text() == "onE\ntwo\nthrEE\n"


def test_listing_leaves_git_out_and_stops_at_its_cap(tree: Path) -> None:
    files = WorkspaceFiles(tree)
    listing = files.list_entries("", recursive=True)
    assert [e.path for e in listing.entries] == ["src", "src/a.py"]
    assert listing.entries[1].size == len("one\ntwo\nthree\n")
    many = tree / "many"
    many.mkdir()
    for i in range(MAX_LIST_ENTRIES + 5):
        (many / f"f{i:05d}").touch()
    capped = files.list_entries("many", recursive=False)
    assert capped.truncated
    assert len(capped.entries) == MAX_LIST_ENTRIES
    with pytest.raises(ToolInputError, match="does not exist"):
        files.list_entries("nope", recursive=False)
    with pytest.raises(ToolInputError, match="not a directory"):
        files.list_entries("src/a.py", recursive=False)


_SEGMENTS = st.sampled_from(
    ["src", "..", ".", "", ".git", "a.py", "new", "link", "/", "\\", "\0", "é", "C:"]
)


@settings(max_examples=200, suppress_health_check=[HealthCheck.function_scoped_fixture])
@example(parts=["src", "a.py", "x\ny"], content="")  # a refusal stays one line
@example(parts=["src", "a.py", "\x85new\u2028"], content="")
@given(
    parts=st.lists(st.one_of(_SEGMENTS, st.text(max_size=6)), min_size=1, max_size=5),
    content=st.text(max_size=20),
)
def test_any_path_writes_inside_the_worktree_or_nowhere(
    tree: Path, parts: list[str], content: str
) -> None:
    if not (tree / "link").is_symlink():
        (tree / "link").symlink_to(tree.parent)
    outside = {p: p.read_bytes() for p in tree.parent.iterdir() if p.is_file()}
    path = "/".join(parts)
    refusal = ""
    try:
        WorkspaceFiles(tree).write_text(path, content)
    except ToolInputError as error:
        refusal = str(error)
    if refusal:
        assert "\n" not in refusal
    else:
        written = os.path.realpath(tree / path)
        assert written.startswith(os.path.realpath(tree) + os.sep)
        assert "/.git" not in written.removeprefix(os.path.realpath(tree))
    assert {p: p.read_bytes() for p in tree.parent.iterdir() if p.is_file()} == outside
