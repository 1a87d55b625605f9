"""Exec placement: ``with_exec(backend, placement)``, the seed's ``git.WithExec``.

Paddock: the confined command runs in the workspace and may write there.
Jail: it runs in a copy of the workspace's current state made for this one
command, and the workspace never changes. Real git, real Landlock.
"""

from __future__ import annotations

import subprocess
import threading
from pathlib import Path

import pytest

from goatherd.application import (
    ExecRequest,
    ExecTimeoutError,
    SandboxConfigError,
    SandboxSpec,
    WorkspaceEscapeError,
)
from goatherd.infrastructure.sandbox import (
    ExecPlacement,
    GitExec,
    GitSandbox,
    GitSandboxConfig,
    LandlockBackend,
    landlock_abi,
    new_local_git_sandbox,
    new_worktree_sandbox,
    open_sandbox,
    with_exec,
)
from tests.infrastructure.sandbox import gitfixtures as fx

pytestmark = pytest.mark.integration

needs_landlock = pytest.mark.skipif(
    landlock_abi() < 1, reason="this kernel does not provide Landlock"
)


def sh(script: str, **kw: object) -> ExecRequest:
    return ExecRequest("sh", ("-c", script), **kw)  # type: ignore[arg-type]


def worktrees(repo: Path) -> list[str]:
    listed = fx.git(repo, "worktree", "list", "--porcelain")
    return [line for line in listed.splitlines() if line.startswith("worktree ")]


def jails() -> set[Path]:
    import tempfile

    return set(Path(tempfile.gettempdir()).glob("goatherd-jail-*"))


def in_place(repo: Path, placement: ExecPlacement) -> GitSandbox:
    sandbox = new_local_git_sandbox(repo, with_exec(LandlockBackend(), placement))
    sandbox.create(SandboxSpec(env={"FROM_SPEC": "spec"}))
    return sandbox


@needs_landlock
class TestPaddock:
    def test_the_seed_s_form_runs_in_the_workspace_and_writes_only_there(
        self, tmp_path: Path
    ) -> None:
        repo = fx.make_repo(tmp_path / "repo")
        sandbox = in_place(repo, ExecPlacement.PADDOCK)
        assert sandbox.exec_placement is ExecPlacement.PADDOCK
        assert (sandbox.capabilities().exec, sandbox.capabilities().containment) == (
            True,
            "contained",
        )
        result = sandbox.exec(
            sh(f"pwd; echo made > made.txt; echo x > {tmp_path}/escape.txt; true")
        )
        assert result.stdout.decode().splitlines()[0] == str(repo)
        assert (repo / "made.txt").read_bytes() == b"made\n"
        assert not (tmp_path / "escape.txt").exists()

    def test_paddock_is_what_exec_backend_gives(self, tmp_path: Path) -> None:
        repo = fx.make_repo(tmp_path / "repo")
        sandbox = new_local_git_sandbox(repo, exec_backend=LandlockBackend())
        assert sandbox.exec_placement is ExecPlacement.PADDOCK


@needs_landlock
class TestJail:
    @pytest.fixture
    def repo(self, tmp_path: Path) -> Path:
        repo = fx.make_repo(tmp_path / "repo")
        (repo / ".gitignore").write_text("build/\n")
        fx.git(repo, "add", ".gitignore")
        fx.git(repo, "commit", "-q", "-m", "ignore build")
        # Uncommitted work: a changed tracked file, a new file, an ignored one.
        (repo / "README.md").write_bytes(b"edited, not committed\n")
        (repo / "notes.txt").write_bytes(b"untracked\n")
        (repo / "build").mkdir()
        (repo / "build" / "cache").write_bytes(b"ignored\n")
        return repo

    def test_the_command_sees_the_current_state_and_changes_nothing(
        self, repo: Path, tmp_path: Path
    ) -> None:
        sandbox = in_place(repo, ExecPlacement.JAIL)
        before = sandbox.capture()
        left = jails()
        result = sandbox.exec(
            sh(
                "pwd; cat README.md notes.txt; ls build 2>/dev/null || echo no-build;"
                " echo $FROM_SPEC; echo junk > README.md; rm notes.txt;"
                f" echo x > new.txt && cat new.txt; echo y > {repo}/direct.txt;"
                f" echo z > {tmp_path}/escape.txt; true"
            )
        )
        lines = result.stdout.decode().splitlines()
        cell = Path(lines[0])
        assert cell != repo
        assert cell.name == "cell"
        assert cell.parent.name.startswith("goatherd-jail-")
        assert lines[1:] == [
            "edited, not committed",
            "untracked",
            "no-build",
            "spec",
            "x",
        ]
        # The workspace is exactly as it was; nothing escaped; the copy is gone.
        assert sandbox.capture() == before
        assert (repo / "README.md").read_bytes() == b"edited, not committed\n"
        assert (repo / "notes.txt").read_bytes() == b"untracked\n"
        assert not (repo / "new.txt").exists()
        assert not (repo / "direct.txt").exists()
        assert not (tmp_path / "escape.txt").exists()
        assert not cell.parent.exists()
        assert jails() == left
        assert worktrees(repo) == [f"worktree {repo}"]
        status = subprocess.run(
            ["git", "status", "--porcelain"], cwd=repo, capture_output=True, check=True
        )
        assert status.stdout == b" M README.md\n?? notes.txt\n"

    def test_a_subdirectory_cwd_maps_into_the_copy(self, repo: Path) -> None:
        sandbox = in_place(repo, ExecPlacement.JAIL)
        result = sandbox.exec(sh("pwd; ls", cwd="src"))
        where, *names = result.stdout.decode().splitlines()
        assert where.endswith("/cell/src")
        assert names == ["app.py", "util.py"]

    def test_a_cwd_leaving_the_workspace_is_refused_before_any_copy(
        self, repo: Path
    ) -> None:
        sandbox = in_place(repo, ExecPlacement.JAIL)
        left = jails()
        with pytest.raises(WorkspaceEscapeError):
            sandbox.exec(sh("true", cwd=".."))
        assert jails() == left
        assert worktrees(repo) == [f"worktree {repo}"]

    def test_a_timeout_kills_the_command_and_removes_the_copy(self, repo: Path) -> None:
        sandbox = in_place(repo, ExecPlacement.JAIL)
        left = jails()
        with pytest.raises(ExecTimeoutError):
            sandbox.exec(sh("echo started > started.txt; sleep 30", timeout=0.5))
        assert jails() == left
        assert worktrees(repo) == [f"worktree {repo}"]
        assert not (repo / "started.txt").exists()

    def test_concurrent_jailed_commands_each_get_their_own_copy(
        self, repo: Path
    ) -> None:
        sandbox = in_place(repo, ExecPlacement.JAIL)
        seen: dict[int, bytes] = {}

        def run(i: int) -> None:
            out = sandbox.exec(sh(f"echo {i} > mine.txt; sleep 0.3; cat mine.txt"))
            seen[i] = out.stdout

        threads = [threading.Thread(target=run, args=(i,)) for i in range(3)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert seen == {i: f"{i}\n".encode() for i in range(3)}
        assert not (repo / "mine.txt").exists()
        assert worktrees(repo) == [f"worktree {repo}"]

    def test_a_worktree_sandbox_jails_a_copy_of_its_own_state(
        self, tmp_path: Path
    ) -> None:
        repo = fx.make_repo(tmp_path / "repo")
        sandbox = new_worktree_sandbox(
            repo, tmp_path / "wt", with_exec(LandlockBackend(), "jail")
        )
        sandbox.create(SandboxSpec())
        (tmp_path / "wt" / "only-here.txt").write_bytes(b"worktree work\n")
        result = sandbox.exec(sh("cat only-here.txt; echo no > only-here.txt"))
        assert result.stdout == b"worktree work\n"
        assert (tmp_path / "wt" / "only-here.txt").read_bytes() == b"worktree work\n"
        assert not (repo / "only-here.txt").exists()

    def test_open_sandbox_takes_the_placement_in_its_config(self, repo: Path) -> None:
        config = GitSandboxConfig(
            repo, exec_backend=LandlockBackend(), exec_placement=ExecPlacement.JAIL
        )
        sandbox = open_sandbox("git", config)
        assert isinstance(sandbox, GitSandbox)
        sandbox.exec(sh("echo gone > gone.txt"))
        assert not (repo / "gone.txt").exists()


class TestOptions:
    def test_with_exec_defaults_to_the_paddock(self) -> None:
        backend = LandlockBackend()
        assert with_exec(backend) == GitExec(backend, ExecPlacement.PADDOCK)
        assert with_exec(backend, "jail").placement is ExecPlacement.JAIL

    @pytest.mark.parametrize("placement", ["yard", "", 3, None, "PADDOCK"])
    def test_an_unknown_placement_is_refused_by_name(self, placement: object) -> None:
        with pytest.raises(SandboxConfigError, match="known: paddock, jail") as refused:
            with_exec(LandlockBackend(), placement)  # type: ignore[arg-type]
        assert "\n" not in str(refused.value)
        with pytest.raises(SandboxConfigError, match="unknown exec placement"):
            GitSandbox(GitSandboxConfig("/tmp", exec_placement=placement))  # type: ignore[arg-type]

    def test_one_exec_backend_at_most(self, tmp_path: Path) -> None:
        backend = LandlockBackend()
        with pytest.raises(SandboxConfigError, match="give the exec backend once"):
            new_local_git_sandbox(tmp_path, with_exec(backend), with_exec(backend))
        with pytest.raises(SandboxConfigError, match="give the exec backend once"):
            new_local_git_sandbox(tmp_path, with_exec(backend), exec_backend=backend)

    def test_an_option_must_come_from_with_exec(self, tmp_path: Path) -> None:
        with pytest.raises(SandboxConfigError, match="got LandlockBackend"):
            new_local_git_sandbox(tmp_path, LandlockBackend())  # type: ignore[arg-type]
