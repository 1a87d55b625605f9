"""Landlock containment: real confined commands on this kernel.

Skipped (with the reason) only where the kernel has no Landlock; the
fail-closed tests run everywhere by capping the ABI the backend may use.
"""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from goatherd.application import (
    ContainmentUnavailableError,
    ExecRequest,
    ExecTimeoutError,
    NetworkMode,
    SandboxConfigError,
    SandboxError,
    SandboxSpec,
    UnsupportedError,
    WorkspaceEscapeError,
)
from goatherd.infrastructure.sandbox import (
    GitSandbox,
    LandlockBackend,
    WinAclBackend,
    landlock_abi,
    new_local_git_sandbox,
    new_worktree_sandbox,
    open_containment_backend,
)
from tests.infrastructure.sandbox import gitfixtures as fx

pytestmark = pytest.mark.integration

needs_landlock = pytest.mark.skipif(
    landlock_abi() < 1, reason="this kernel does not provide Landlock"
)
needs_network_abi = pytest.mark.skipif(
    landlock_abi() < 4, reason="TCP rules need Landlock ABI 4"
)


def sh(script: str, **kw: object) -> ExecRequest:
    return ExecRequest("sh", ("-c", script), **kw)  # type: ignore[arg-type]


@pytest.fixture
def roots(tmp_path: Path) -> tuple[Path, Path]:
    inside, outside = tmp_path / "inside", tmp_path / "outside"
    inside.mkdir()
    outside.mkdir()
    return inside, outside


@pytest.fixture
def listener() -> Iterator[int]:
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    try:
        yield server.getsockname()[1]
    finally:
        server.close()


def _connect_script(port: int) -> ExecRequest:
    code = (
        "import socket,sys\n"
        "try:\n"
        f"    socket.create_connection(('127.0.0.1', {port}), timeout=5).close()\n"
        "except OSError as e:\n"
        "    print('refused', e.errno); sys.exit(3)\n"
        "print('connected')\n"
    )
    return ExecRequest(sys.executable, ("-c", code))


@needs_landlock
class TestConfinedCommands:
    def test_writing_inside_a_root_works_and_outside_fails(
        self, roots: tuple[Path, Path]
    ) -> None:
        inside, outside = roots
        script = (
            f"echo in > {inside}/a.txt && mkdir {inside}/d && echo ok; "
            f"echo out > {outside}/b.txt || echo denied"
        )
        result = LandlockBackend().run(
            sh(script), writable_roots=[str(inside)], cwd=str(inside)
        )
        assert result.exit_code == 0
        assert result.stdout == b"ok\ndenied\n"
        assert b"Permission denied" in result.stderr
        assert (inside / "a.txt").read_bytes() == b"in\n"
        assert list(outside.iterdir()) == []

    def test_deleting_renaming_and_truncating_outside_fail(
        self, roots: tuple[Path, Path]
    ) -> None:
        inside, outside = roots
        (outside / "keep.txt").write_bytes(b"precious\n")
        (inside / "mine.txt").write_bytes(b"mine\n")
        script = (
            f"rm -f {outside}/keep.txt; "
            f": > {outside}/keep.txt; "
            f"mv {inside}/mine.txt {outside}/moved.txt; "
            f"ln -s /etc/passwd {outside}/link; "
            "exit 0"
        )
        LandlockBackend().run(sh(script), writable_roots=[str(inside)], cwd=str(inside))
        assert sorted(p.name for p in outside.iterdir()) == ["keep.txt"]
        assert (outside / "keep.txt").read_bytes() == b"precious\n"
        assert (inside / "mine.txt").exists()

    def test_children_of_the_command_stay_confined(
        self, roots: tuple[Path, Path]
    ) -> None:
        inside, outside = roots
        script = f"sh -c 'sh -c \"echo deep > {outside}/deep.txt\"'; echo $?"
        result = LandlockBackend().run(
            sh(script), writable_roots=[str(inside)], cwd=str(inside)
        )
        assert result.stdout.strip() != b"0"
        assert list(outside.iterdir()) == []

    def test_reads_outside_the_roots_are_not_confined(
        self, roots: tuple[Path, Path]
    ) -> None:
        inside, outside = roots
        (outside / "visible.txt").write_bytes(b"readable\n")
        result = LandlockBackend().run(
            sh(f"cat {outside}/visible.txt"),
            writable_roots=[str(inside)],
            cwd=str(inside),
        )
        assert result.stdout == b"readable\n"

    def test_dev_null_stays_writable(self, roots: tuple[Path, Path]) -> None:
        inside, _ = roots
        result = LandlockBackend().run(
            sh("echo gone > /dev/null && echo fine"),
            writable_roots=[str(inside)],
            cwd=str(inside),
        )
        assert result.stdout == b"fine\n"

    def test_stdin_env_exit_code_and_duration_come_back(
        self, roots: tuple[Path, Path]
    ) -> None:
        inside, _ = roots
        request = sh(
            'read line; echo "$line $GREETING"; exit 7',
            stdin=b"hello\n",
            env={"GREETING": "world"},
        )
        result = LandlockBackend().run(
            request, writable_roots=[str(inside)], cwd=str(inside)
        )
        assert (result.exit_code, result.stdout) == (7, b"hello world\n")
        assert result.duration > 0

    def test_a_missing_command_is_reported_and_nothing_runs(
        self, roots: tuple[Path, Path]
    ) -> None:
        inside, _ = roots
        with pytest.raises(SandboxError, match="exec: no-such-command-here"):
            LandlockBackend().run(
                ExecRequest("no-such-command-here"),
                writable_roots=[str(inside)],
                cwd=str(inside),
            )

    def test_a_missing_root_is_refused(self, roots: tuple[Path, Path]) -> None:
        inside, _ = roots
        with pytest.raises(SandboxError, match="not a directory"):
            LandlockBackend().run(
                sh("true"), writable_roots=[str(inside / "nope")], cwd=str(inside)
            )

    def test_a_command_past_its_timeout_is_killed(
        self, roots: tuple[Path, Path]
    ) -> None:
        inside, _ = roots
        request = sh(f"sleep 30; echo late > {inside}/late.txt", timeout=0.5)
        with pytest.raises(ExecTimeoutError, match="timeout"):
            LandlockBackend().run(
                request, writable_roots=[str(inside)], cwd=str(inside)
            )
        assert not (inside / "late.txt").exists()


@needs_landlock
@needs_network_abi
class TestNetworkDenial:
    def test_connecting_to_a_loopback_listener_fails_when_denied(
        self, roots: tuple[Path, Path], listener: int
    ) -> None:
        inside, _ = roots
        backend = LandlockBackend(network=NetworkMode.DENY)
        result = backend.run(
            _connect_script(listener), writable_roots=[str(inside)], cwd=str(inside)
        )
        assert result.exit_code == 3
        assert result.stdout.startswith(b"refused")

    def test_connecting_works_when_the_network_is_allowed(
        self, roots: tuple[Path, Path], listener: int
    ) -> None:
        inside, _ = roots
        result = LandlockBackend().run(
            _connect_script(listener), writable_roots=[str(inside)], cwd=str(inside)
        )
        assert (result.exit_code, result.stdout) == (0, b"connected\n")


class TestFailClosed:
    def test_a_kernel_without_landlock_refuses_and_runs_nothing(
        self, roots: tuple[Path, Path]
    ) -> None:
        inside, _ = roots
        backend = LandlockBackend(max_abi=0)
        with pytest.raises(ContainmentUnavailableError, match="unconfined"):
            backend.probe()
        with pytest.raises(ContainmentUnavailableError):
            backend.run(
                sh(f"touch {inside}/ran"), writable_roots=[str(inside)], cwd=str(inside)
            )
        assert not (inside / "ran").exists()

    def test_network_denial_on_a_kernel_too_old_for_it_is_refused(
        self, roots: tuple[Path, Path]
    ) -> None:
        inside, _ = roots
        backend = LandlockBackend(network=NetworkMode.DENY, max_abi=3)
        with pytest.raises(ContainmentUnavailableError, match="ABI 4"):
            backend.run(
                sh(f"touch {inside}/ran"), writable_roots=[str(inside)], cwd=str(inside)
            )
        assert not (inside / "ran").exists()

    def test_the_windows_backend_is_refused_here_with_a_clear_message(self) -> None:
        with pytest.raises(ContainmentUnavailableError, match="needs Windows"):
            open_containment_backend("winacl")
        with pytest.raises(ContainmentUnavailableError, match="needs Windows"):
            WinAclBackend().run(sh("true"), writable_roots=["/tmp"], cwd="/tmp")

    def test_an_unknown_containment_backend_lists_the_known_ones(self) -> None:
        with pytest.raises(SandboxConfigError, match="landlock, winacl"):
            open_containment_backend("seccomp")

    @needs_landlock
    def test_opening_landlock_by_name_probes_it(self) -> None:
        backend = open_containment_backend("landlock", NetworkMode.DENY)
        assert (backend.name(), backend.tier()) == ("landlock", "native-syscall-deny")


@needs_landlock
class TestGitSandboxWithConfinedExec:
    @pytest.fixture
    def sandbox(self, tmp_path: Path) -> GitSandbox:
        repo = fx.make_repo(tmp_path / "repo")
        sandbox = new_local_git_sandbox(repo, exec_backend=LandlockBackend())
        sandbox.create(SandboxSpec(env={"FROM_SPEC": "spec"}))
        return sandbox

    def test_exec_writes_in_the_workspace_but_not_outside(
        self, sandbox: GitSandbox, tmp_path: Path
    ) -> None:
        caps = sandbox.capabilities()
        assert (caps.exec, caps.containment) == (True, "contained")
        state = sandbox.capture()
        result = sandbox.exec(
            sh(f"echo new > made.txt; echo $FROM_SPEC; echo x > {tmp_path}/escape.txt")
        )
        assert result.stdout == b"spec\n"
        assert (sandbox.workdir / "made.txt").read_bytes() == b"new\n"
        assert not (tmp_path / "escape.txt").exists()
        assert sandbox.diff(state)[1] == ["made.txt"]

    def test_exec_runs_in_a_subdirectory(self, sandbox: GitSandbox) -> None:
        result = sandbox.exec(sh("pwd", cwd="src"))
        assert result.stdout.decode().strip() == str(sandbox.workdir / "src")

    @pytest.mark.parametrize(
        ("cwd", "reason"),
        [
            ("..", "'..'"),
            ("/tmp", "absolute"),
            ("src\0x", "NUL"),
            ("outlink", "symlink"),
        ],
    )
    def test_a_cwd_leaving_the_workspace_is_refused_and_nothing_runs(
        self, sandbox: GitSandbox, tmp_path: Path, cwd: str, reason: str
    ) -> None:
        os.symlink(tmp_path, sandbox.workdir / "outlink")
        with pytest.raises(WorkspaceEscapeError, match=reason):
            sandbox.exec(sh("touch ran-here", cwd=cwd))
        assert not (tmp_path / "ran-here").exists()
        assert not (sandbox.workdir / "ran-here").exists()

    def test_a_worktree_sandbox_confines_exec_to_its_worktree(
        self, tmp_path: Path
    ) -> None:
        repo = fx.make_repo(tmp_path / "repo")
        sandbox = new_worktree_sandbox(
            repo, tmp_path / "wt", exec_backend=LandlockBackend()
        )
        sandbox.create(SandboxSpec())
        sandbox.exec(sh(f"echo wt > here.txt; echo repo > {repo}/there.txt; exit 0"))
        assert (tmp_path / "wt" / "here.txt").exists()
        assert not (repo / "there.txt").exists()


def test_a_git_sandbox_without_an_exec_backend_does_not_execute(tmp_path: Path) -> None:
    repo = fx.make_repo(tmp_path / "repo")
    with pytest.raises(UnsupportedError, match="exec backend"):
        new_local_git_sandbox(repo).exec(sh("touch ran"))
    assert not (repo / "ran").exists()
