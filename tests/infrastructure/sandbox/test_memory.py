"""The memory backend: the sandbox contract plus its own file rules."""

from __future__ import annotations

from pathlib import Path

import pytest

from goatherd.application import (
    SandboxConfigError,
    SandboxError,
    SandboxSpec,
    WorkspaceEscapeError,
)
from goatherd.domain import WorkspaceState
from goatherd.infrastructure.sandbox import (
    MemoryRepository,
    MemorySandbox,
    MemorySandboxConfig,
    open_sandbox,
)
from tests.contract.sandbox_contract import INITIAL, SandboxContract, Snapshot


def _created(config: MemorySandboxConfig) -> MemorySandbox:
    sandbox = MemorySandbox(config)
    sandbox.create(SandboxSpec())
    return sandbox


def _initial_sandbox() -> MemorySandbox:
    sandbox = _created(MemorySandboxConfig(files=INITIAL))
    sandbox.write_file("tools/run.sh", INITIAL["tools/run.sh"], 0o755)
    sandbox.commit()
    return sandbox


class TestMemorySandbox(SandboxContract):
    @pytest.fixture
    def sandbox(self, tmp_path: Path) -> MemorySandbox:
        return _initial_sandbox()

    def write(self, sb, path, data, executable=False):
        sb.write_file(path, data, 0o755 if executable else 0o644)

    def remove(self, sb, path):
        sb.remove_file(path)

    def snapshot(self, sb) -> Snapshot:
        result: Snapshot = {}
        for path in sb.list_files():
            result[path] = (sb.read_file(path), sb.is_executable(path))
        return result

    def commit(self, sb):
        sb.commit()

    def sibling(self, sb, tmp_path):
        return _created(MemorySandboxConfig(repository=sb.repository))

    def foreign_state(self, tmp_path):
        other = _initial_sandbox()
        other.write_file("README.md", b"foreign\n")
        return other.capture()


class TestMemoryFileRules:
    @pytest.mark.parametrize(
        ("path", "reason"),
        [
            ("../outside.txt", "'..'"),
            ("a/../../b", "'..'"),
            ("/etc/passwd", "absolute"),
            ("C:/windows", "absolute"),
            ("./C:/windows", "absolute"),
            ("bad\0name", "NUL"),
            ("", "root"),
            ("./", "root"),
        ],
    )
    def test_a_path_leaving_the_workspace_is_refused_and_nothing_changes(
        self, path: str, reason: str
    ) -> None:
        sandbox = _initial_sandbox()
        before = sandbox.capture()
        with pytest.raises(WorkspaceEscapeError, match=reason):
            sandbox.write_file(path, b"x")
        with pytest.raises(WorkspaceEscapeError):
            sandbox.read_file(path)
        assert sandbox.capture() == before

    def test_dot_segments_and_duplicate_slashes_are_normalized(self) -> None:
        sandbox = _initial_sandbox()
        sandbox.write_file("./src//new.txt", b"n\n")
        assert sandbox.read_file("src/new.txt") == b"n\n"

    def test_a_file_cannot_shadow_a_directory_or_sit_under_a_file(self) -> None:
        sandbox = _initial_sandbox()
        with pytest.raises(IsADirectoryError):
            sandbox.write_file("src", b"x")
        with pytest.raises(NotADirectoryError):
            sandbox.write_file("README.md/inner", b"x")
        with pytest.raises(IsADirectoryError):
            sandbox.read_file("src")
        with pytest.raises(FileNotFoundError):
            sandbox.read_file("missing.txt")
        with pytest.raises(FileNotFoundError):
            sandbox.remove_file("missing.txt")

    def test_a_sandbox_is_unusable_before_create(self) -> None:
        sandbox = MemorySandbox()
        with pytest.raises(SandboxError, match="not created"):
            sandbox.capture()

    def test_a_repository_and_initial_files_together_are_refused(self) -> None:
        with pytest.raises(SandboxConfigError, match="not both"):
            MemorySandbox(MemorySandboxConfig(MemoryRepository(), {"a": b"b"}))

    def test_open_sandbox_builds_an_unprovisioned_memory_sandbox(self) -> None:
        sandbox = open_sandbox("memory", MemorySandboxConfig(files={"a.txt": b"a"}))
        assert sandbox.backend() == "memory"
        with pytest.raises(SandboxError):
            sandbox.capture()
        sandbox.create(SandboxSpec())
        assert sandbox.read_file("a.txt") == b"a"

    def test_open_sandbox_refuses_a_foreign_config(self) -> None:
        with pytest.raises(SandboxConfigError, match="MemorySandboxConfig"):
            open_sandbox("memory", {"files": {}})

    def test_a_directory_file_clash_in_a_delta_is_a_conflict(self) -> None:
        parent = _initial_sandbox()
        child = _created(MemorySandboxConfig(repository=parent.repository))
        child.write_file("clash", b"file\n")
        parent.write_file("clash/inner.txt", b"dir\n")
        before = parent.capture()
        with pytest.raises(Exception, match="clash"):
            parent.apply_delta(child.capture())
        assert parent.capture() == before

    def test_a_state_round_trips_through_json(self) -> None:
        sandbox = _initial_sandbox()
        sandbox.write_file("x.bin", b"\x00\xff")
        state = sandbox.capture()
        again = WorkspaceState.from_json(state.to_json())
        sandbox.write_file("x.bin", b"")
        sandbox.apply(again)
        assert sandbox.read_file("x.bin") == b"\x00\xff"
