"""goatherd's own git never runs code the repository names (ADR 0067).

Each test plays the agent: it writes into the workspace what a confined
command could write there (``.git/config``, ``.gitattributes``, a hook, a
swapped ``.git`` file), with a payload that would create a marker file
outside every root. Then goatherd's capture, diff, restore or worktree add
runs, on the repository in place and on a worktree, and the marker must
never appear.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from goatherd.application import SandboxSpec
from goatherd.application.errors import UnsafeGitDirError
from goatherd.infrastructure.sandbox import (
    GitSandbox,
    new_local_git_sandbox,
    new_worktree_sandbox,
)
from tests.infrastructure.sandbox.gitfixtures import git, make_repo

BACKENDS = ["in-place", "worktree"]


class Scene:
    """A repository, a sandbox on it, and a payload that marks outside."""

    def __init__(self, tmp_path: Path, backend: str) -> None:
        self.repo = make_repo(tmp_path / "repo", {"a.txt": b"alpha\n"})
        outside = tmp_path / "outside"
        outside.mkdir()
        self.marker = outside / "marker"
        self.payload = outside / "payload.sh"
        # A filter, textconv or hook that leaves a mark, then passes data on.
        self.payload.write_text(f"#!/bin/sh\necho ran >> '{self.marker}'\ncat\n")
        self.payload.chmod(0o755)
        if backend == "worktree":
            self.sandbox: GitSandbox = new_worktree_sandbox(self.repo, tmp_path / "wt")
        else:
            self.sandbox = new_local_git_sandbox(self.repo)
        self.sandbox.create(SandboxSpec())
        self.work = self.sandbox.workdir

    def config(self, *pairs: str) -> None:
        """Write config into the git directory the workspace uses."""
        for pair in pairs:
            key, _, value = pair.partition("=")
            git(self.repo, "config", key, value)

    def attributes(self, line: str) -> None:
        (self.work / ".gitattributes").write_text(line + "\n")

    def assert_clean(self) -> None:
        assert not self.marker.exists(), self.marker.read_text()


@pytest.fixture(params=BACKENDS)
def scene(request: pytest.FixtureRequest, tmp_path: Path) -> Scene:
    return Scene(tmp_path, request.param)


def test_fsmonitor_never_runs_on_capture(scene: Scene) -> None:
    scene.config(f"core.fsmonitor={scene.payload}")
    (scene.work / "a.txt").write_text("changed\n")
    scene.sandbox.capture()
    scene.sandbox.diff(scene.sandbox.capture())
    scene.assert_clean()


def test_a_clean_filter_never_runs_and_the_bytes_are_stored_as_they_are(
    scene: Scene,
) -> None:
    scene.config(
        f"filter.evil.clean={scene.payload}",
        f"filter.evil.process={scene.payload}",
        "filter.evil.required=true",
    )
    scene.attributes("* filter=evil")
    (scene.work / "a.txt").write_text("changed\n")
    state = scene.sandbox.capture()
    scene.assert_clean()
    tree = (state.data or {})["tree_sha"]
    blob = git(scene.repo, "cat-file", "-p", f"{tree}:a.txt")
    assert blob == "changed\n"


def test_a_smudge_filter_never_runs_on_restore(scene: Scene) -> None:
    (scene.work / "a.txt").write_text("kept\n")
    (scene.work / "b.txt").write_text("new\n")
    state = scene.sandbox.capture()
    (scene.work / "a.txt").write_text("later\n")
    (scene.work / "b.txt").unlink()
    scene.config(
        f"filter.evil.smudge={scene.payload}",
        f"filter.evil.process={scene.payload}",
    )
    scene.attributes("* filter=evil")
    scene.sandbox.apply(state)
    scene.assert_clean()
    assert (scene.work / "a.txt").read_text() == "kept\n"
    assert (scene.work / "b.txt").read_text() == "new\n"


def test_textconv_and_an_external_diff_never_run_on_diff(scene: Scene) -> None:
    state = scene.sandbox.capture()
    scene.config(
        f"diff.external={scene.payload}",
        f"diff.evil.textconv={scene.payload}",
        f"diff.evil.command={scene.payload}",
    )
    scene.attributes("* diff=evil")
    (scene.work / "a.txt").write_text("changed\n")
    text, files = scene.sandbox.diff(state)
    scene.assert_clean()
    assert "+changed" in text
    assert files == [".gitattributes", "a.txt"]


def _hook(scene: Scene, name: str) -> None:
    hooks = Path(git(scene.repo, "rev-parse", "--git-common-dir").strip())
    hooks = (scene.repo / hooks / "hooks") if not hooks.is_absolute() else hooks
    hooks.mkdir(exist_ok=True)
    shutil.copy(scene.payload, hooks / name)
    (hooks / name).chmod(0o755)


@pytest.mark.parametrize("hook", ["post-checkout", "post-index-change"])
def test_hooks_never_run_on_worktree_add_or_restore(
    scene: Scene, tmp_path: Path, hook: str
) -> None:
    _hook(scene, hook)
    state = scene.sandbox.capture()
    (scene.work / "a.txt").write_text("later\n")
    scene.sandbox.apply(state)
    fork = new_worktree_sandbox(scene.repo, tmp_path / "fork")
    fork.create(SandboxSpec())
    fork.apply(state)
    fork.destroy()
    scene.assert_clean()


def test_inherited_git_variables_do_not_reach_goatherds_git(
    scene: Scene, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GIT_CONFIG_PARAMETERS", f"'core.fsmonitor={scene.payload}'")
    monkeypatch.setenv("GIT_CONFIG_COUNT", "1")
    monkeypatch.setenv("GIT_CONFIG_KEY_0", "core.fsmonitor")
    monkeypatch.setenv("GIT_CONFIG_VALUE_0", str(scene.payload))
    scene.sandbox.capture()
    scene.assert_clean()


def _swap_dot_git(worktree: Path, repo: Path, payload: Path) -> None:
    """Replace the worktree's .git file by a crafted git dir that looks real."""
    crafted = worktree / ".crafted"
    common = repo / ".git"
    (crafted / "objects" / "info").mkdir(parents=True)
    (crafted / "refs").mkdir()
    (crafted / "objects" / "info" / "alternates").write_text(f"{common / 'objects'}\n")
    head = git(worktree, "rev-parse", "HEAD").strip()
    (crafted / "HEAD").write_text(f"{head}\n")
    (crafted / "config").write_text(
        f"[core]\n\trepositoryformatversion = 0\n\tfsmonitor = {payload}\n"
    )
    (worktree / ".git").unlink()
    (worktree / ".git").write_text("gitdir: .crafted\n")


Operation = Callable[[GitSandbox], object]
OPERATIONS: list[Operation] = [
    lambda s: s.capture(),
    lambda s: s.diff(s.capture()),
]


@pytest.mark.parametrize("operation", OPERATIONS, ids=["capture", "diff"])
def test_a_swapped_worktree_dot_git_is_refused_and_nothing_runs(
    tmp_path: Path, operation: Operation
) -> None:
    scene = Scene(tmp_path, "worktree")
    state = scene.sandbox.capture()
    _swap_dot_git(scene.work, scene.repo, scene.payload)
    with pytest.raises(UnsafeGitDirError, match="not the worktree link") as caught:
        operation(scene.sandbox)
    assert "\n" not in str(caught.value)
    with pytest.raises(UnsafeGitDirError):
        scene.sandbox.apply(state)
    scene.assert_clean()


@pytest.mark.parametrize(
    "content",
    ["gitdir: {other}\n", "gitdir: {admin}\ngitdir: {other}\n", "{admin}\n"],
    ids=["another-admin-dir", "two-lines", "no-prefix"],
)
def test_a_rewritten_dot_git_file_is_refused(tmp_path: Path, content: str) -> None:
    scene = Scene(tmp_path, "worktree")
    other = new_worktree_sandbox(scene.repo, tmp_path / "other")
    other.create(SandboxSpec())
    admin = (scene.work / ".git").read_text().removeprefix("gitdir: ").strip()
    other_admin = (other.workdir / ".git").read_text().removeprefix("gitdir: ")
    (scene.work / ".git").write_text(
        content.format(admin=admin, other=other_admin.strip())
    )
    with pytest.raises(UnsafeGitDirError):
        scene.sandbox.capture()


def test_a_dot_git_symlink_is_refused(tmp_path: Path) -> None:
    scene = Scene(tmp_path, "worktree")
    pointer = tmp_path / "pointer"
    shutil.copy(scene.work / ".git", pointer)
    (scene.work / ".git").unlink()
    os.symlink(pointer, scene.work / ".git")
    with pytest.raises(UnsafeGitDirError, match="not a regular file"):
        scene.sandbox.capture()


def test_alternates_in_the_repository_are_refused(scene: Scene) -> None:
    info = scene.repo / ".git" / "objects" / "info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "alternates").write_text(f"{scene.repo / '.git' / 'objects'}\n")
    with pytest.raises(UnsafeGitDirError, match="alternates"):
        scene.sandbox.capture()


def test_a_smudge_filter_in_committed_attributes_never_runs_on_worktree_add(
    scene: Scene, tmp_path: Path
) -> None:
    (scene.repo / ".gitattributes").write_text("* filter=evil\n")
    git(scene.repo, "add", ".gitattributes")
    git(scene.repo, "commit", "-q", "-m", "attributes")
    scene.config(
        f"filter.evil.smudge={scene.payload}",
        f"filter.evil.process={scene.payload}",
        "filter.evil.required=true",
    )
    fork = new_worktree_sandbox(scene.repo, tmp_path / "fork")
    fork.create(SandboxSpec())
    assert (fork.workdir / "a.txt").read_text() == "alpha\n"
    fork.destroy()
    scene.assert_clean()


def test_a_filter_defined_in_an_included_file_never_runs(
    scene: Scene, tmp_path: Path
) -> None:
    included = scene.work / "included.cfg"
    included.write_text(f'[filter "sneaky.one"]\n\tclean = {scene.payload}\n')
    scene.config(f"include.path={included}")
    scene.attributes("* filter=sneaky.one")
    (scene.work / "a.txt").write_text("changed\n")
    scene.sandbox.capture()
    scene.assert_clean()
