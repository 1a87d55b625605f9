"""search, tree and apply_patch against a real worktree and trace.

Each stays inside the worktree (symlinks out are neither followed nor
searched, ``.git`` is never shown or written), is bounded (matches, entries,
depth, time), and is recorded like every call. A patch applies whole or not
at all, and a hunk that does not match is named.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, cast

import pytest

from goatherd.integrations.mcp import WorkspaceTools
from goatherd.integrations.mcp.files import WorkspaceFiles
from goatherd.integrations.mcp.recording import is_call, is_result
from tests.mcp.conftest import ToolsFactory, git, needs_landlock

pytestmark = [needs_landlock, pytest.mark.integration]

FIX = (
    "--- a/calc.py\n+++ b/calc.py\n@@ -1,2 +1,2 @@\n def add(a, b):\n"
    "-    return a - b\n+    return a + b\n"
)


def _open(tools: WorkspaceTools) -> tuple[str, Path]:
    reply = tools.open_environment("find")
    assert not reply.is_error, reply.text
    env = str(reply.data["environment_id"])
    return env, tools.environments.lookup(env).worktree


def _matches(data: Any) -> list[tuple[str, int, str]]:
    return [(m["path"], m["line"], m["text"]) for m in data["matches"]]


def test_search_finds_lines_and_skips_git_symlinks_and_binaries(
    make_tools: ToolsFactory, tmp_path: Path
) -> None:
    tools = make_tools()
    env, worktree = _open(tools)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.py").write_text("def add_secret(): pass\n")
    (worktree / "out").symlink_to(outside)
    (worktree / "calc_link.py").symlink_to(worktree / "calc.py")
    (worktree / "blob.bin").write_bytes(b"\0def add(x)\n")
    (worktree / "pkg").mkdir()
    (worktree / "pkg" / "more.txt").write_text("nothing\nADD here\n")
    os.mkfifo(worktree / "pkg" / "pipe")

    reply = tools.search(env, r"def add|ADD")
    assert not reply.is_error, reply.text
    assert _matches(reply.data) == [
        ("calc.py", 1, "def add(a, b):"),
        ("pkg/more.txt", 2, "ADD here"),
    ]
    assert reply.data["truncated"] is False
    assert reply.text.splitlines()[0] == "calc.py:1:def add(a, b):"

    folded = tools.search(env, "add", glob="*.txt", ignore_case=True)
    assert _matches(folded.data) == [("pkg/more.txt", 2, "ADD here")]
    inside = tools.search(env, "add", path="pkg", ignore_case=True)
    assert [m[0] for m in _matches(inside.data)] == ["pkg/more.txt"]

    escaped = tools.search(env, "secret", path="out")
    assert escaped.is_error
    assert "outside the workspace" in escaped.text
    assert tools.search(env, "x", path=".git").is_error
    bad = tools.search(env, "(unclosed")
    assert bad.is_error
    assert "not a valid regular expression" in bad.text


def test_search_is_bounded_by_matches_line_length_and_time(
    make_tools: ToolsFactory,
) -> None:
    tools = make_tools()
    env, worktree = _open(tools)
    (worktree / "many.txt").write_text("hit\n" * 50 + "x" * 5000 + " hit\n")
    capped = tools.search(env, "hit", max_matches=10)
    assert len(_matches(capped.data)) == 10
    assert capped.data["truncated"] is True
    assert "max_matches" in str(capped.data["reason"])
    long = tools.search(env, "x+ hit")
    line = _matches(long.data)[0][2]
    assert len(line.encode()) < 600
    assert line.endswith("[... line cut]")

    (worktree / "redos.txt").write_text("a" * 40 + "!\n")
    found = WorkspaceFiles(worktree).search("(a+)+$", "redos.txt", seconds=1.0)
    assert found.truncated
    assert "outran its 1 s limit" in found.reason


def test_tree_marks_kinds_skips_git_and_is_bounded(make_tools: ToolsFactory) -> None:
    tools = make_tools()
    env, worktree = _open(tools)
    (worktree / "src" / "deep" / "deeper").mkdir(parents=True)
    (worktree / "src" / "deep" / "deeper" / "f.txt").write_text("f")
    (worktree / "link").symlink_to("/etc")

    reply = tools.tree(env, depth=2)
    assert not reply.is_error, reply.text
    rows = reply.text.splitlines()
    assert rows[0] == "./"
    assert "  link -> /etc" in rows
    assert "  src/" in rows
    assert "    deep/" in rows
    assert not any("deeper" in row or ".git" in row for row in rows)
    entries = cast("list[dict[str, Any]]", reply.data["entries"])
    assert {"path": "link", "kind": "symlink", "depth": 1, "size": 0} | {
        "target": "/etc"
    } in entries
    assert all(e["depth"] <= 2 for e in entries)

    capped = tools.tree(env, max_entries=2)
    assert capped.data["truncated"] is True
    assert len(cast("list[object]", capped.data["entries"])) == 2
    assert tools.tree(env, path="link").is_error


def test_apply_patch_applies_whole_and_is_recorded(make_tools: ToolsFactory) -> None:
    tools = make_tools()
    env, worktree = _open(tools)
    patch = FIX + (
        "--- /dev/null\n+++ b/notes/new.md\n@@ -0,0 +1,2 @@\n+# notes\n+fixed add\n"
    )
    reply = tools.apply_patch(env, patch)
    assert not reply.is_error, reply.text
    assert reply.data["files"] == [
        {"path": "calc.py", "added": 1, "deleted": 1},
        {"path": "notes/new.md", "added": 2, "deleted": 0},
    ]
    assert "a + b" in (worktree / "calc.py").read_text()
    assert (worktree / "notes" / "new.md").read_text() == "# notes\nfixed add\n"
    owner = f"{tools.environments.root_owner}:{env}"
    entries = tools.store.read_path(owner)
    call = [e for e in entries if is_call(e)][-1].record.payload
    result = [e for e in entries if is_result(e)][-1].record.payload
    assert call["patch"] == patch
    assert call["patch_bytes"] == len(patch.encode())
    assert result["success"] is True
    assert result["files"] == reply.data["files"]
    assert result["count"] == 2


def test_a_failing_hunk_is_named_and_nothing_changes(make_tools: ToolsFactory) -> None:
    tools = make_tools()
    env, worktree = _open(tools)
    good = "--- a/README.txt\n+++ b/README.txt\n@@ -1 +1 @@\n-a calculator\n+a sum\n"
    bad = (
        "--- a/calc.py\n+++ b/calc.py\n@@ -1,2 +1,2 @@\n def add(a, b):\n"
        "-    return a * b\n+    return a + b\n"
    )
    before = git(worktree, "status", "--porcelain")
    reply = tools.apply_patch(env, good + bad)
    assert reply.is_error
    assert "calc.py: hunk 1 (@@ -1,2 +1,2 @@) does not match" in reply.text
    assert "nothing was changed" in reply.text
    assert (worktree / "README.txt").read_text() == "a calculator\n"
    assert git(worktree, "status", "--porcelain") == before


@pytest.mark.parametrize(
    ("patch", "expected"),
    [
        (FIX.replace("calc.py", "../calc.py"), "'..' component"),
        (
            FIX.replace("a/calc.py", "a/.git/config").replace(
                "b/calc.py", "b/.git/config"
            ),
            ".git",
        ),
        (
            "diff --git a/l b/l\nnew file mode 120000\n--- /dev/null\n+++ b/l\n"
            "@@ -0,0 +1 @@\n+/etc/passwd\n\\ No newline at end of file\n",
            "symlink",
        ),
        ("", "patch is empty"),
        ("just some words\n", "changes no file"),
        (
            "--- a/out/x.py\n+++ b/out/x.py\n@@ -0,0 +1 @@\n+x\n",
            "outside the workspace",
        ),
    ],
    ids=["dotdot", "git-dir", "symlink", "empty", "not-a-patch", "through-link"],
)
def test_apply_patch_refuses_what_is_not_the_agents(
    make_tools: ToolsFactory, tmp_path: Path, patch: str, expected: str
) -> None:
    tools = make_tools()
    env, worktree = _open(tools)
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (worktree / "out").symlink_to(outside)
    before = git(worktree, "status", "--porcelain")
    reply = tools.apply_patch(env, patch)
    assert reply.is_error
    assert expected in reply.text, reply.text
    assert git(worktree, "status", "--porcelain") == before
    assert list(outside.iterdir()) == []
    assert "a - b" in (worktree / "calc.py").read_text()
