"""The git backend, in place and as a worktree, against the sandbox contract."""

from __future__ import annotations

from pathlib import Path

import pytest

from goatherd.application import SandboxSpec
from goatherd.infrastructure.sandbox import (
    GitSandbox,
    new_local_git_sandbox,
    new_worktree_sandbox,
)
from tests.contract.sandbox_contract import SandboxContract, Snapshot
from tests.infrastructure.sandbox import gitfixtures as fx

pytestmark = pytest.mark.integration


class _GitHooks(SandboxContract):
    repo: Path

    def write(self, sb, path, data, executable=False):
        fx.write(sb.workdir, path, data, executable)

    def remove(self, sb, path):
        fx.remove(sb.workdir, path)

    def snapshot(self, sb) -> Snapshot:
        return fx.snapshot(sb.workdir)

    def commit(self, sb):
        fx.commit_all(sb.workdir)

    def sibling(self, sb, tmp_path):
        return fx.worktree_sibling(self.repo, tmp_path)

    def foreign_state(self, tmp_path):
        other = fx.make_repo(tmp_path / "foreign", {"other.txt": b"elsewhere\n"})
        fx.write(other, "other.txt", b"dirty elsewhere\n")
        return new_local_git_sandbox(other).capture()


class TestGitInPlaceSandbox(_GitHooks):
    @pytest.fixture
    def sandbox(self, tmp_path: Path) -> GitSandbox:
        self.repo = fx.make_repo(tmp_path / "repo")
        sandbox = new_local_git_sandbox(self.repo)
        sandbox.create(SandboxSpec())
        return sandbox


class TestGitWorktreeSandbox(_GitHooks):
    @pytest.fixture
    def sandbox(self, tmp_path: Path) -> GitSandbox:
        self.repo = fx.make_repo(tmp_path / "repo")
        sandbox = new_worktree_sandbox(self.repo, tmp_path / "wt")
        sandbox.create(SandboxSpec())
        return sandbox
