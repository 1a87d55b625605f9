"""The workspace substrate over a real git worktree sandbox.

The git backend owns git state only (no file IO, and no exec without a
containment backend), so recorded writes and execs are refused honestly with
``clean_failure`` before anything is attempted, instead of half-applying.
"""

from __future__ import annotations

import base64
import subprocess
from pathlib import Path

import pytest

from goatherd.application import SubstrateRegistry, materialize
from goatherd.application.ports import SandboxSpec
from goatherd.domain import (
    AppendBatch,
    AppendContext,
    AppendGroup,
    MaterializationOutcome,
    MaterializationRequest,
    RecordDraft,
    RetainedContextDraft,
)
from goatherd.infrastructure.sandbox.git import GitSandbox, GitSandboxConfig
from goatherd.infrastructure.store import SQLiteTraceStore
from goatherd.infrastructure.substrates import WorkspaceSubstrate

pytestmark = pytest.mark.integration

CONTEXT = AppendContext("host", ("trusted:internal",), trust_mode="internal")


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True
    ).stdout


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = tmp_path / "repo"
    path.mkdir()
    git(path, "init", "-q")
    git(path, "config", "user.email", "t@example.com")
    git(path, "config", "user.name", "t")
    (path / "README").write_text("hi\n")
    git(path, "add", "README")
    git(path, "commit", "-q", "-m", "init")
    return path


def write(path: str, data: bytes) -> RecordDraft:
    payload = {"path": path, "content_b64": base64.b64encode(data).decode()}
    return RecordDraft("declaration", "workspace.file.write.v1", payload, "write")


EXEC = RecordDraft("declaration", "workspace.exec.v1", {"command": "ls"}, "exec")


@pytest.mark.parametrize(
    ("drafts", "reason"),
    [
        ([write("a.txt", b"a")], 'sandbox backend "git" does not support file IO'),
        ([EXEC], 'sandbox backend "git" does not support exec'),
    ],
)
def test_the_git_backend_reports_clean_failure_instead_of_half_applying(
    repo: Path, tmp_path: Path, drafts: list[RecordDraft], reason: str
) -> None:
    worktree = tmp_path / "wt"
    sandbox = GitSandbox(GitSandboxConfig(repo, worktree))
    sandbox.create(SandboxSpec())
    substrate = WorkspaceSubstrate(sandbox)
    registry = SubstrateRegistry()
    registry.register(substrate)
    assert substrate.containment == "buffered"
    before = sorted(p.name for p in worktree.iterdir())
    with SQLiteTraceStore() as store:
        group = AppendGroup(
            "agent:main",
            RetainedContextDraft(substrate_ref="workspace.sandbox.v1"),
            (),
            tuple(drafts),
        )
        ids = store.append(CONTEXT, AppendBatch("declare", (group,))).fact_ids
        count = store.fact_count()
        receipt = materialize(
            store,
            CONTEXT.to_operation_context("materialize"),
            MaterializationRequest("apply", "agent:main", ids),
            registry,
        ).unwrap()
        assert receipt.outcome is MaterializationOutcome.CLEAN_FAILURE
        assert receipt.failure_reason == reason
        assert receipt.produced_record_ids == ()
        assert store.fact_count() == count
    assert sorted(p.name for p in worktree.iterdir()) == before
    sandbox.destroy()
