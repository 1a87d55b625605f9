"""The workspace substrate over a real memory Sandbox, with honest outcomes."""

from __future__ import annotations

import base64
import hashlib

import pytest

from goatherd.application import Substrate
from goatherd.application.ports import ExecRequest, ExecResult, SandboxSpec
from goatherd.domain import MaterializationOutcome
from goatherd.infrastructure.sandbox import MemorySandbox
from goatherd.infrastructure.substrates import (
    WORKSPACE_EXEC_SCHEMA_REF,
    WORKSPACE_FILE_WRITE_SCHEMA_REF,
    WorkspaceSubstrate,
)
from tests.infrastructure.substrates.records import declaration


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def write(path: object, content: object, record_id: str = "sha256:w1", **extra):
    payload = {"path": path, "content_b64": content, **extra}
    return declaration(WORKSPACE_FILE_WRITE_SCHEMA_REF, payload, record_id)


def run(command: object, record_id: str = "sha256:x1", **extra):
    payload = {"command": command, **extra}
    return declaration(WORKSPACE_EXEC_SCHEMA_REF, payload, record_id)


def memory() -> MemorySandbox:
    sandbox = MemorySandbox()
    sandbox.create(SandboxSpec())
    return sandbox


def _exists(sandbox: MemorySandbox, path: str) -> bool:
    try:
        sandbox.read_file(path)
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        return False
    return True


class TestWorkspaceSubstrate:
    def test_it_takes_its_containment_from_the_sandbox(self) -> None:
        substrate = WorkspaceSubstrate(memory())
        assert isinstance(substrate, Substrate)
        assert substrate.substrate_ref == "workspace.sandbox.v1"
        assert substrate.containment == "buffered"
        assert substrate.declaration_schemas == {
            "workspace.file.write.v1",
            "workspace.exec.v1",
        }
        assert substrate.capture_schemas == {
            "workspace.file.write.applied.v1",
            "workspace.exec.applied.v1",
        }

    def test_writes_land_with_digest_captures_and_backend_anchors(self) -> None:
        sandbox = memory()
        result = WorkspaceSubstrate(sandbox).materialize(
            [
                write("a.txt", b64(b"hello"), "sha256:1"),
                write("b/c.txt", "", "sha256:2", perm="0755"),
            ]
        )
        assert result.outcome is MaterializationOutcome.SUCCESS
        assert sandbox.read_file("a.txt") == b"hello"
        assert sandbox.read_file("b/c.txt") == b""
        first, second = result.capture_drafts
        assert first.schema_ref == "workspace.file.write.applied.v1"
        assert first.kind_label == "workspace_file_write_applied"
        assert first.payload == {
            "path": "a.txt",
            "digest": hashlib.sha256(b"hello").hexdigest(),
        }
        assert first.caused_by_fact_ids == ("sha256:1",)
        assert second.payload["digest"] == hashlib.sha256(b"").hexdigest()
        assert result.world_side_anchors[0] == {
            "kind": "workspace_file",
            "path": "a.txt",
            "substrate_ref": "workspace.sandbox.v1",
            "backend": "memory",
        }

    def test_a_backend_without_exec_is_a_clean_failure_with_nothing_attempted(
        self,
    ) -> None:
        sandbox = memory()
        before = sandbox.capture()
        result = WorkspaceSubstrate(sandbox).materialize(
            [write("a.txt", b64(b"x")), run("ls")]
        )
        assert result.outcome is MaterializationOutcome.CLEAN_FAILURE
        assert result.failure_reason == 'sandbox backend "memory" does not support exec'
        assert result.capture_drafts == ()
        assert result.world_side_anchors == ()
        # The gate ran over the whole batch first: the write was not attempted.
        assert sandbox.diff(before)[1] == []

    @pytest.mark.parametrize(
        ("bad", "reason"),
        [
            (write("", b64(b"x"), "sha256:bad"), "path must be a non-empty string"),
            (write("a.txt", 5, "sha256:bad"), "content_b64 must be a string"),
            (write("a.txt", "!!notb64", "sha256:bad"), "not valid base64"),
            (write("a.txt", "", "sha256:bad", perm="9z"), "perm must be"),
            (write("a.txt", "", "sha256:bad", perm=True), "perm must be"),
            (declaration("other.v1", {}, "sha256:bad"), "unsupported declaration"),
        ],
    )
    def test_an_invalid_first_record_is_a_clean_failure_that_touched_nothing(
        self, bad, reason: str
    ) -> None:
        sandbox = memory()
        before = sandbox.capture()
        result = WorkspaceSubstrate(sandbox).materialize([bad, write("b/c.txt", "")])
        assert result.outcome is MaterializationOutcome.CLEAN_FAILURE
        assert result.failure_reason.startswith("record sha256:bad: ")
        assert reason in result.failure_reason
        assert result.capture_drafts == ()
        assert sandbox.diff(before)[1] == []

    def test_a_failure_after_a_landed_capture_is_split_state_with_only_that_capture(
        self,
    ) -> None:
        sandbox = memory()
        result = WorkspaceSubstrate(sandbox).materialize(
            [
                write("a.txt", b64(b"one"), "sha256:1"),
                write("", b64(b"x"), "sha256:2"),
                write("b/c.txt", b64(b"never"), "sha256:3"),
            ]
        )
        assert result.outcome is MaterializationOutcome.SPLIT_STATE
        assert result.failure_reason == (
            "record sha256:2: path must be a non-empty string"
        )
        assert [d.caused_by_fact_ids for d in result.capture_drafts] == [("sha256:1",)]
        assert len(result.world_side_anchors) == 1
        assert sandbox.read_file("a.txt") == b"one"
        assert not _exists(sandbox, "b/c.txt")

    def test_a_sandbox_error_is_split_state_even_with_no_capture(self) -> None:
        sandbox = memory()
        sandbox.write_file("a.txt", b"file")
        # Writing beneath a file fails inside the sandbox call: the world may
        # have changed, so clean_failure would be a lie.
        result = WorkspaceSubstrate(sandbox).materialize(
            [write("a.txt/inner", b64(b"x"), "sha256:9")]
        )
        assert result.outcome is MaterializationOutcome.SPLIT_STATE
        assert result.failure_reason.startswith("record sha256:9: ")
        assert result.capture_drafts == ()


class _ExecSandbox(MemorySandbox):
    """A memory sandbox that also runs commands (records what it ran)."""

    def __init__(self, *, fail: bool = False) -> None:
        super().__init__()
        self.create(SandboxSpec())
        self.requests: list[ExecRequest] = []
        self._fail = fail

    def capabilities(self):
        from dataclasses import replace

        return replace(super().capabilities(), exec=True)

    def exec(self, request):
        self.requests.append(request)
        if self._fail:
            raise TimeoutError("deadline exceeded")
        return ExecResult(exit_code=3, stdout=b"out", stderr=b"err")


class TestWorkspaceExec:
    def test_an_exec_that_ran_is_a_success_whatever_its_exit_code(self) -> None:
        sandbox = _ExecSandbox()
        result = WorkspaceSubstrate(sandbox).materialize(
            [
                run(
                    "make",
                    args=["all"],
                    cwd="src",
                    env={"A": "1"},
                    timeout_ms=1500,
                )
            ]
        )
        assert result.outcome is MaterializationOutcome.SUCCESS
        (draft,) = result.capture_drafts
        assert draft.schema_ref == "workspace.exec.applied.v1"
        assert draft.kind_label == "workspace_exec_applied"
        assert draft.payload == {
            "command": "make",
            "exit_code": 3,
            "stdout_digest": hashlib.sha256(b"out").hexdigest(),
            "stderr_digest": hashlib.sha256(b"err").hexdigest(),
        }
        assert result.world_side_anchors == (
            {
                "kind": "workspace_exec",
                "command": "make",
                "substrate_ref": "workspace.sandbox.v1",
                "backend": "memory",
            },
        )
        (request,) = sandbox.requests
        assert request.args == ("all",)
        assert request.cwd == "src"
        assert request.env == {"A": "1"}
        assert request.timeout == 1.5

    @pytest.mark.parametrize(
        ("extra", "reason"),
        [
            ({"command": ""}, "command must be"),
            ({"args": "all"}, "args must be"),
            ({"args": [1]}, "args must be"),
            ({"cwd": 3}, "cwd must be"),
            ({"env": {"A": 1}}, "env must be"),
            ({"timeout_ms": -1}, "timeout_ms must be"),
            ({"timeout_ms": 1.5}, "timeout_ms must be"),
        ],
    )
    def test_an_invalid_exec_is_refused_before_the_sandbox_runs_anything(
        self, extra: dict[str, object], reason: str
    ) -> None:
        sandbox = _ExecSandbox()
        payload: dict[str, object] = {"command": "ls", **extra}
        record = declaration(WORKSPACE_EXEC_SCHEMA_REF, payload, "sha256:x1")
        result = WorkspaceSubstrate(sandbox).materialize([record])
        assert result.outcome is MaterializationOutcome.CLEAN_FAILURE
        assert reason in result.failure_reason
        assert sandbox.requests == []

    def test_an_exec_error_touched_the_world(self) -> None:
        sandbox = _ExecSandbox(fail=True)
        result = WorkspaceSubstrate(sandbox).materialize([run("sleep", "sha256:s")])
        assert result.outcome is MaterializationOutcome.SPLIT_STATE
        assert result.failure_reason == "record sha256:s: deadline exceeded"
