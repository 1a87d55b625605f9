"""Git-specific guarantees: the user's index, bad input, worktree lifecycle."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from goatherd.application import (
    GitError,
    InvalidWorkspaceStateError,
    SandboxConfigError,
    SandboxError,
    SandboxSpec,
)
from goatherd.domain import WorkspaceState
from goatherd.infrastructure.sandbox import (
    GitSandboxConfig,
    new_local_git_sandbox,
    new_worktree_sandbox,
    open_sandbox,
)
from goatherd.infrastructure.sandbox.gitrunner import GitRunner
from tests.infrastructure.sandbox import gitfixtures as fx

pytestmark = pytest.mark.integration


def _index_and_status(repo: Path) -> tuple[bytes, str]:
    status = fx.git(repo, "status", "--porcelain=v1", "--untracked-files=all")
    return (repo / ".git" / "index").read_bytes(), status


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return fx.make_repo(tmp_path / "repo")


@pytest.fixture
def staged_and_dirty(repo: Path) -> Path:
    fx.write(repo, "README.md", b"staged change\n")
    fx.git(repo, "add", "README.md")
    fx.write(repo, "README.md", b"staged, then edited again\n")
    fx.write(repo, "src/app.py", b"unstaged\n")
    fx.remove(repo, "src/util.py")
    fx.write(repo, "untracked.txt", b"new\n")
    fx.git(repo, "rm", "-q", "--cached", "assets/logo.bin")
    return repo


class TestTheUsersIndexIsNeverTouched:
    def test_capture_leaves_index_bytes_and_status_identical(
        self, staged_and_dirty: Path
    ) -> None:
        sandbox = new_local_git_sandbox(staged_and_dirty)
        before = _index_and_status(staged_and_dirty)
        state = sandbox.capture()
        assert _index_and_status(staged_and_dirty) == before
        assert state.data is not None
        assert (
            state.data["head_sha"]
            == fx.git(staged_and_dirty, "rev-parse", "HEAD").strip()
        )

    def test_diff_leaves_index_bytes_and_status_identical(
        self, staged_and_dirty: Path
    ) -> None:
        sandbox = new_local_git_sandbox(staged_and_dirty)
        state = sandbox.capture()
        fx.write(staged_and_dirty, "later.txt", b"later\n")
        before = _index_and_status(staged_and_dirty)
        _, files = sandbox.diff(state)
        assert files == ["later.txt"]
        assert _index_and_status(staged_and_dirty) == before

    def test_a_clean_delta_apply_keeps_staged_work(
        self, staged_and_dirty: Path, tmp_path: Path
    ) -> None:
        sandbox = new_local_git_sandbox(staged_and_dirty)
        child = fx.worktree_sibling(staged_and_dirty, tmp_path)
        fx.write(child.workdir, "from-child.txt", b"child\n")
        index_before = (staged_and_dirty / ".git" / "index").read_bytes()
        sandbox.apply_delta(child.capture())
        assert (staged_and_dirty / "from-child.txt").read_bytes() == b"child\n"
        assert (staged_and_dirty / ".git" / "index").read_bytes() == index_before

    def test_capture_records_what_the_working_tree_holds_not_the_staging(
        self, staged_and_dirty: Path
    ) -> None:
        sandbox = new_local_git_sandbox(staged_and_dirty)
        expected = fx.snapshot(staged_and_dirty)
        state = sandbox.capture()
        fx.write(staged_and_dirty, "README.md", b"gone\n")
        sandbox.apply(state)
        assert fx.snapshot(staged_and_dirty) == expected


class TestContentAddressedCaptures:
    def test_the_capture_commit_has_a_fixed_identity_and_date(self, repo: Path) -> None:
        fx.write(repo, "README.md", b"dirty\n")
        state = new_local_git_sandbox(repo).capture()
        assert state.data is not None
        body = fx.git(repo, "cat-file", "-p", str(state.data["commit_sha"]))
        assert "author goatherd <goatherd@localhost> 0 +0000" in body
        assert "committer goatherd <goatherd@localhost> 0 +0000" in body
        assert f"tree {state.data['tree_sha']}" in body
        assert f"parent {state.data['head_sha']}" in body

    def test_two_repositories_with_the_same_history_and_content_agree(
        self, tmp_path: Path
    ) -> None:
        environ = {"GIT_AUTHOR_DATE": "@1 +0000", "GIT_COMMITTER_DATE": "@1 +0000"}
        os.environ.update(environ)
        try:
            first = fx.make_repo(tmp_path / "one")
            second = fx.make_repo(tmp_path / "two")
        finally:
            for key in environ:
                del os.environ[key]
        for repo in (first, second):
            fx.write(repo, "src/app.py", b"same edit\n")
        one = new_local_git_sandbox(first).capture()
        two = new_local_git_sandbox(second).capture()
        assert one.digest() == two.digest()


class TestSymlinksAndIgnoredFiles:
    def test_a_symlink_is_captured_and_restored_as_a_link(self, repo: Path) -> None:
        sandbox = new_local_git_sandbox(repo)
        os.symlink("README.md", repo / "link")
        state = sandbox.capture()
        (repo / "link").unlink()
        sandbox.apply(state)
        assert os.readlink(repo / "link") == "README.md"

    def test_ignored_files_are_neither_captured_nor_cleaned(self, repo: Path) -> None:
        sandbox = new_local_git_sandbox(repo)
        fx.write(repo, ".gitignore", b"*.log\n")
        fx.commit_all(repo)
        state = sandbox.capture()
        fx.write(repo, "build.log", b"ignored\n")
        assert sandbox.diff(state) == ("", [])
        sandbox.apply(state)
        assert (repo / "build.log").read_bytes() == b"ignored\n"


class TestBadInput:
    def test_a_directory_that_is_not_a_repository_is_refused(
        self, tmp_path: Path
    ) -> None:
        plain = tmp_path / "plain"
        plain.mkdir()
        (plain / "keep.txt").write_bytes(b"mine\n")
        sandbox = new_local_git_sandbox(plain)
        with pytest.raises(SandboxError, match="not a git repository"):
            sandbox.create(SandboxSpec())
        with pytest.raises(SandboxError, match="not a git working tree"):
            sandbox.capture()
        assert sorted(p.name for p in plain.iterdir()) == ["keep.txt"]

    def test_a_missing_directory_is_refused(self, tmp_path: Path) -> None:
        sandbox = new_local_git_sandbox(tmp_path / "nowhere")
        with pytest.raises(SandboxError, match="not a git repository"):
            sandbox.create(SandboxSpec())
        with pytest.raises(SandboxError, match="does not exist"):
            sandbox.capture()

    def test_a_subdirectory_of_a_repository_is_refused(self, repo: Path) -> None:
        sandbox = new_local_git_sandbox(repo / "src")
        with pytest.raises(SandboxError, match="not its top"):
            sandbox.create(SandboxSpec())
        with pytest.raises(SandboxError, match="not its top"):
            sandbox.capture()

    def test_a_repository_without_commits_is_refused(self, tmp_path: Path) -> None:
        empty = tmp_path / "empty"
        empty.mkdir()
        fx.git(empty, "init", "-q")
        with pytest.raises(SandboxError, match="no commits"):
            new_local_git_sandbox(empty).capture()

    def test_a_state_from_a_sibling_worktree_is_accepted(
        self, repo: Path, tmp_path: Path
    ) -> None:
        child = fx.worktree_sibling(repo, tmp_path)
        fx.write(child.workdir, "child.txt", b"c\n")
        state = child.capture()
        new_local_git_sandbox(repo).apply(state)
        assert (repo / "child.txt").read_bytes() == b"c\n"

    def test_a_capture_commit_that_disagrees_with_its_data_is_corrupt(
        self, repo: Path
    ) -> None:
        sandbox = new_local_git_sandbox(repo)
        clean = sandbox.capture()
        fx.write(repo, "README.md", b"dirty\n")
        dirty = sandbox.capture()
        assert clean.data is not None
        assert dirty.data is not None
        mixed = WorkspaceState(
            "git", clean.revision, {**clean.data, "tree_sha": dirty.data["tree_sha"]}
        )
        before = fx.snapshot(repo)
        with pytest.raises(InvalidWorkspaceStateError, match="corrupt"):
            sandbox.apply(mixed)
        assert fx.snapshot(repo) == before

    def test_a_git_failure_carries_gits_own_message(self, repo: Path) -> None:
        with pytest.raises(GitError) as caught:
            GitRunner(repo).run("rev-parse", "--verify", "no-such-ref")
        assert caught.value.returncode == 128
        assert "git rev-parse --verify no-such-ref" in str(caught.value)
        assert "fatal" in caught.value.stderr

    def test_a_git_call_past_its_timeout_is_reported_as_timed_out(
        self, repo: Path
    ) -> None:
        with pytest.raises(GitError, match="timed out") as caught:
            GitRunner(repo, timeout=1e-6).run("version")
        assert caught.value.returncode is None


class TestWorktreeLifecycle:
    def test_create_adds_a_detached_worktree_and_destroy_removes_it(
        self, repo: Path, tmp_path: Path
    ) -> None:
        target = tmp_path / "nested" / "wt"
        sandbox = new_worktree_sandbox(repo, target)
        sandbox.create(SandboxSpec())
        assert (target / "README.md").read_bytes() == b"hello\n"
        assert "detached" in fx.git(repo, "worktree", "list")
        assert sandbox.address() == str(target)
        sandbox.destroy()
        assert not target.exists()
        assert str(target) not in fx.git(repo, "worktree", "list")
        sandbox.destroy()  # idempotent

    def test_a_non_empty_worktree_path_is_refused_and_left_alone(
        self, repo: Path, tmp_path: Path
    ) -> None:
        target = tmp_path / "occupied"
        target.mkdir()
        (target / "user-data.txt").write_bytes(b"precious\n")
        sandbox = new_worktree_sandbox(repo, target)
        with pytest.raises(SandboxError, match="already exists and is not empty"):
            sandbox.create(SandboxSpec())
        assert fx.snapshot(target) == {"user-data.txt": (b"precious\n", False)}
        assert str(target) not in fx.git(repo, "worktree", "list")

    def test_an_empty_existing_directory_can_host_the_worktree(
        self, repo: Path, tmp_path: Path
    ) -> None:
        target = tmp_path / "empty"
        target.mkdir()
        sandbox = new_worktree_sandbox(repo, target)
        sandbox.create(SandboxSpec())
        assert (target / "README.md").exists()

    def test_a_worktree_inside_the_repository_is_refused(self, repo: Path) -> None:
        sandbox = new_worktree_sandbox(repo, repo / "inner-wt")
        with pytest.raises(SandboxError, match="inside the repository"):
            sandbox.create(SandboxSpec())
        assert not (repo / "inner-wt").exists()

    def test_the_repository_itself_is_not_a_worktree_path(self, repo: Path) -> None:
        with pytest.raises(SandboxConfigError, match="repository itself"):
            new_worktree_sandbox(repo, repo)

    def test_a_stale_worktree_entry_from_a_crash_is_pruned(
        self, repo: Path, tmp_path: Path
    ) -> None:
        target = tmp_path / "crashed"
        fx.git(repo, "worktree", "add", "-q", "--detach", str(target))
        shutil.rmtree(target)
        sandbox = new_worktree_sandbox(repo, target)
        sandbox.create(SandboxSpec())
        assert (target / "README.md").exists()

    def test_in_place_destroy_never_deletes_the_repository(self, repo: Path) -> None:
        sandbox = new_local_git_sandbox(repo)
        before = fx.snapshot(repo)
        sandbox.destroy()
        assert fx.snapshot(repo) == before
        assert sandbox.capabilities().lifecycle is False

    def test_destroy_refuses_to_delete_a_directory_it_did_not_create(
        self, repo: Path, tmp_path: Path
    ) -> None:
        target = tmp_path / "not-a-worktree"
        target.mkdir()
        (target / "mine.txt").write_bytes(b"mine\n")
        sandbox = new_worktree_sandbox(repo, target)
        with pytest.raises(SandboxError, match="not a worktree we created"):
            sandbox.destroy()
        assert (target / "mine.txt").exists()


class TestRegistry:
    def test_open_sandbox_builds_an_unprovisioned_git_sandbox(
        self, repo: Path, tmp_path: Path
    ) -> None:
        target = tmp_path / "wt"
        sandbox = open_sandbox("git", GitSandboxConfig(repo, target))
        assert sandbox.backend() == "git"
        assert not target.exists()
        caps = sandbox.capabilities()
        assert (caps.lifecycle, caps.isolated, caps.containment) == (
            True,
            True,
            "buffered",
        )
        in_place = open_sandbox("git", GitSandboxConfig(repo)).capabilities()
        assert (in_place.lifecycle, in_place.isolated) == (False, False)
        assert in_place.containment == "uncontained"

    def test_open_sandbox_refuses_a_foreign_config(self) -> None:
        with pytest.raises(SandboxConfigError, match="GitSandboxConfig"):
            open_sandbox("git", {"repo_path": "."})
