"""The Sandbox port contract, run against every backend.

Subclass :class:`SandboxContract` as ``Test<Backend>Sandbox`` and implement the
fixture and the out-of-band hooks. The hooks change the workspace the way an
agent's tools would (not through the sandbox under test), so the contract
checks capture/apply/diff/delta against real edits.

Every backend starts from the same committed files (:data:`INITIAL`).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from goatherd.application import (
    DIFF_TRUNCATED_MARKER,
    ApplyConflictError,
    ConflictHunk,
    DeltaApplier,
    ExecRequest,
    InvalidWorkspaceStateError,
    LineRange,
    Sandbox,
    SandboxError,
    SandboxSpec,
    UnsupportedError,
)
from goatherd.domain import WorkspaceState

BINARY = bytes(range(256)) * 4
INITIAL: dict[str, bytes] = {
    "README.md": b"hello\n",
    "src/app.py": b"print('one')\nprint('two')\n",
    "src/util.py": b"def f():\n    return 1\n",
    "assets/logo.bin": BINARY,
    "tools/run.sh": b"#!/bin/sh\necho run\n",
}
INITIAL_EXECUTABLE = {"tools/run.sh"}

Snapshot = dict[str, tuple[bytes, bool]]


class SandboxContract:
    """Behaviour every Sandbox backend must show; subclasses supply the hooks."""

    # ------------------------------------------------------------ hooks
    @pytest.fixture
    def sandbox(self, tmp_path: Path) -> Sandbox:
        """A created sandbox holding :data:`INITIAL` (committed, clean)."""
        raise NotImplementedError

    def write(
        self, sb: Sandbox, path: str, data: bytes, executable: bool = False
    ) -> None:
        raise NotImplementedError

    def remove(self, sb: Sandbox, path: str) -> None:
        raise NotImplementedError

    def snapshot(self, sb: Sandbox) -> Snapshot:
        """Every file of the workspace: path -> (content, executable)."""
        raise NotImplementedError

    def commit(self, sb: Sandbox) -> None:
        """Commit the working files, advancing the timeline."""
        raise NotImplementedError

    def sibling(self, sb: Sandbox, tmp_path: Path) -> Sandbox:
        """A created second working copy of the same repository, at its head."""
        raise NotImplementedError

    def foreign_state(self, tmp_path: Path) -> WorkspaceState:
        """A valid state of the same backend captured in another repository."""
        raise NotImplementedError

    # ------------------------------------------------------------ helpers
    def dirty(self, sb: Sandbox) -> None:
        """Change every kind of thing capture must record."""
        self.write(sb, "src/app.py", b"print('changed')\n")
        self.remove(sb, "src/util.py")
        self.write(sb, "assets/logo.bin", BINARY[::-1])
        self.write(sb, "new/untracked.txt", b"fresh\n")
        self.write(sb, "README.md", b"hello\n", executable=True)

    # ------------------------------------------------------------ identity
    def test_the_backend_names_itself_and_reports_diff(self, sandbox: Sandbox) -> None:
        assert sandbox.backend()
        assert sandbox.capabilities().diff is True
        assert sandbox.capabilities().containment in (
            "full",
            "contained",
            "buffered",
            "uncontained",
        )

    def test_the_fixture_holds_the_initial_files(self, sandbox: Sandbox) -> None:
        expected = {p: (d, p in INITIAL_EXECUTABLE) for p, d in INITIAL.items()}
        assert self.snapshot(sandbox) == expected

    # ------------------------------------------------------------ capture
    def test_capture_names_the_backend_and_is_digestible(
        self, sandbox: Sandbox
    ) -> None:
        state = sandbox.capture()
        assert state.backend == sandbox.backend()
        assert state.revision
        assert state.digest().startswith("sha256:")
        assert WorkspaceState.from_json(state.to_json()) == state

    def test_identical_content_captures_identical_states(
        self, sandbox: Sandbox
    ) -> None:
        self.dirty(sandbox)
        first = sandbox.capture()
        second = sandbox.capture()
        assert first == second
        assert first.digest() == second.digest()

    def test_different_content_captures_different_states(
        self, sandbox: Sandbox
    ) -> None:
        clean = sandbox.capture()
        self.write(sandbox, "README.md", b"other\n")
        assert sandbox.capture().digest() != clean.digest()

    def test_capture_does_not_change_the_workspace(self, sandbox: Sandbox) -> None:
        self.dirty(sandbox)
        before = self.snapshot(sandbox)
        sandbox.capture()
        assert self.snapshot(sandbox) == before

    # ------------------------------------------------------------ apply
    def test_apply_restores_edits_deletions_binaries_modes_and_new_files(
        self, sandbox: Sandbox
    ) -> None:
        self.dirty(sandbox)
        captured = self.snapshot(sandbox)
        state = sandbox.capture()
        self.write(sandbox, "src/app.py", b"later\n")
        self.write(sandbox, "src/util.py", b"resurrected\n")
        self.remove(sandbox, "new/untracked.txt")
        self.write(sandbox, "another/new.txt", b"later file\n")
        self.write(sandbox, "tools/run.sh", b"#!/bin/sh\necho run\n", executable=False)
        sandbox.apply(state)
        assert self.snapshot(sandbox) == captured

    def test_apply_is_reusable(self, sandbox: Sandbox) -> None:
        self.dirty(sandbox)
        captured = self.snapshot(sandbox)
        state = sandbox.capture()
        for round_ in range(3):
            self.write(sandbox, "src/app.py", f"round {round_}\n".encode())
            sandbox.apply(state)
            assert self.snapshot(sandbox) == captured

    def test_apply_then_capture_gives_the_same_state(self, sandbox: Sandbox) -> None:
        self.dirty(sandbox)
        state = sandbox.capture()
        self.write(sandbox, "src/app.py", b"drift\n")
        sandbox.apply(state)
        assert sandbox.capture() == state

    def test_apply_rolls_back_commits_made_after_the_capture(
        self, sandbox: Sandbox
    ) -> None:
        state = sandbox.capture()
        snapshot = self.snapshot(sandbox)
        self.write(sandbox, "committed.txt", b"later commit\n")
        self.commit(sandbox)
        assert sandbox.capture().revision != state.revision
        sandbox.apply(state)
        assert self.snapshot(sandbox) == snapshot
        assert sandbox.capture() == state

    def test_a_state_from_another_backend_is_refused_untouched(
        self, sandbox: Sandbox
    ) -> None:
        self.dirty(sandbox)
        before = self.snapshot(sandbox)
        good = sandbox.capture()
        alien = WorkspaceState("elsewhere", good.revision, good.data)
        with pytest.raises(InvalidWorkspaceStateError, match="elsewhere"):
            sandbox.apply(alien)
        with pytest.raises(InvalidWorkspaceStateError):
            sandbox.diff(alien)
        assert self.snapshot(sandbox) == before

    def test_a_state_from_another_repository_is_refused_untouched(
        self, sandbox: Sandbox, tmp_path: Path
    ) -> None:
        foreign = self.foreign_state(tmp_path)
        self.dirty(sandbox)
        before = self.snapshot(sandbox)
        with pytest.raises(InvalidWorkspaceStateError, match="another repository"):
            sandbox.apply(foreign)
        with pytest.raises(InvalidWorkspaceStateError):
            sandbox.diff(foreign)
        assert self.snapshot(sandbox) == before

    @pytest.mark.parametrize(
        "corrupt",
        [
            "no data",
            "empty data",
            "wrong types",
            "revision mismatch",
            "garbage ids",
        ],
    )
    def test_a_corrupt_state_is_refused_untouched(
        self, sandbox: Sandbox, corrupt: str
    ) -> None:
        good = sandbox.capture()
        data = dict(good.data or {})
        key = sorted(data)[0]
        states = {
            "no data": WorkspaceState(good.backend, good.revision, None),
            "empty data": WorkspaceState(good.backend, good.revision, {}),
            "wrong types": WorkspaceState(
                good.backend, good.revision, {**data, key: 7}
            ),
            "revision mismatch": WorkspaceState(good.backend, "f" * 40, data),
            "garbage ids": WorkspaceState(
                good.backend, good.revision, dict.fromkeys(data, "zz")
            ),
        }
        self.dirty(sandbox)
        before = self.snapshot(sandbox)
        with pytest.raises(InvalidWorkspaceStateError):
            sandbox.apply(states[corrupt])
        if isinstance(sandbox, DeltaApplier):
            with pytest.raises(InvalidWorkspaceStateError):
                sandbox.apply_delta(states[corrupt])
        assert self.snapshot(sandbox) == before

    # ------------------------------------------------------------ diff
    def test_diff_of_an_unchanged_workspace_is_empty(self, sandbox: Sandbox) -> None:
        self.dirty(sandbox)
        state = sandbox.capture()
        assert sandbox.diff(state) == ("", [])

    def test_diff_lists_every_changed_path(self, sandbox: Sandbox) -> None:
        state = sandbox.capture()
        self.dirty(sandbox)
        text, files = sandbox.diff(state)
        expected = [
            "README.md",
            "assets/logo.bin",
            "new/untracked.txt",
            "src/app.py",
            "src/util.py",
        ]
        assert files == expected
        for path in expected:
            assert path in text
        assert "+print('changed')" in text
        assert "-print('one')" in text

    def test_diff_is_against_the_captured_state_not_the_head(
        self, sandbox: Sandbox
    ) -> None:
        self.write(sandbox, "src/app.py", b"dirty before the fork\n")
        baseline = sandbox.capture()
        self.write(sandbox, "README.md", b"after the fork\n")
        text, files = sandbox.diff(baseline)
        assert files == ["README.md"]
        assert "src/app.py" not in text

    def test_diff_does_not_change_the_workspace(self, sandbox: Sandbox) -> None:
        state = sandbox.capture()
        self.dirty(sandbox)
        before = self.snapshot(sandbox)
        sandbox.diff(state)
        assert self.snapshot(sandbox) == before

    def test_diff_truncates_lines_but_never_the_path_list(
        self, sandbox: Sandbox
    ) -> None:
        state = sandbox.capture()
        self.dirty(sandbox)
        full, files = sandbox.diff(state)
        cut, cut_files = sandbox.diff(state, max_lines=3)
        assert cut.splitlines() == [*full.splitlines()[:3], DIFF_TRUNCATED_MARKER]
        assert cut_files == files
        assert sandbox.diff(state, max_lines=10_000) == (full, files)

    # ------------------------------------------------------------ delta apply
    def test_a_disjoint_delta_merges_without_a_reset(
        self, sandbox: Sandbox, tmp_path: Path
    ) -> None:
        assert isinstance(sandbox, DeltaApplier)
        other = self.sibling(sandbox, tmp_path)
        self.write(other, "src/app.py", b"theirs\n")
        self.remove(other, "src/util.py")
        self.write(other, "assets/logo.bin", BINARY[::-1])
        self.write(other, "added/by/them.txt", b"theirs too\n", executable=True)
        delta = other.capture()
        self.write(sandbox, "README.md", b"ours\n")
        self.write(sandbox, "ours.txt", b"our new file\n")
        expected = self.snapshot(sandbox)
        expected["src/app.py"] = (b"theirs\n", False)
        del expected["src/util.py"]
        expected["assets/logo.bin"] = (BINARY[::-1], False)
        expected["added/by/them.txt"] = (b"theirs too\n", True)
        sandbox.apply_delta(delta)
        assert self.snapshot(sandbox) == expected

    def test_a_conflicting_delta_names_the_paths_and_touches_nothing(
        self, sandbox: Sandbox, tmp_path: Path
    ) -> None:
        assert isinstance(sandbox, DeltaApplier)
        other = self.sibling(sandbox, tmp_path)
        self.write(other, "src/app.py", b"theirs\n")
        self.write(other, "README.md", b"theirs\n")
        self.write(other, "src/only-theirs.txt", b"x\n")
        delta = other.capture()
        self.write(sandbox, "src/app.py", b"ours\n")
        self.remove(sandbox, "README.md")
        before = self.snapshot(sandbox)
        with pytest.raises(ApplyConflictError) as caught:
            sandbox.apply_delta(delta)
        assert caught.value.paths == ("README.md", "src/app.py")
        assert "README.md" in str(caught.value)
        assert self.snapshot(sandbox) == before

    def test_disjoint_line_edits_of_one_file_merge_and_overlaps_name_hunks(
        self, sandbox: Sandbox, tmp_path: Path
    ) -> None:
        assert isinstance(sandbox, DeltaApplier)
        lines = [b"line %d\n" % n for n in range(1, 9)]
        self.write(sandbox, "lines.txt", b"".join(lines))
        base = sandbox.capture()
        other = self.sibling(sandbox, tmp_path)
        other.apply(base)
        self.write(other, "lines.txt", b"".join([*lines[:7], b"theirs\n"]))
        delta = other.capture()
        self.write(sandbox, "lines.txt", b"".join([b"ours\n", *lines[1:]]))
        sandbox.check_delta(delta, base)
        sandbox.apply_delta(delta, base)
        merged = b"".join([b"ours\n", *lines[1:7], b"theirs\n"])
        assert self.snapshot(sandbox)["lines.txt"] == (merged, False)
        self.write(sandbox, "lines.txt", b"".join([*lines[:7], b"mine\n"]))
        before = self.snapshot(sandbox)
        with pytest.raises(ApplyConflictError) as caught:
            sandbox.check_delta(delta, base)
        with pytest.raises(ApplyConflictError) as applied:
            sandbox.apply_delta(delta, base)
        hunk = ConflictHunk("lines.txt", LineRange(8, 1), LineRange(8, 1))
        assert caught.value.hunks == applied.value.hunks == (hunk,)
        assert "lines.txt (ours line 8 / theirs line 8)" in str(applied.value)
        assert self.snapshot(sandbox) == before

    def test_the_same_change_on_both_sides_is_not_a_conflict(
        self, sandbox: Sandbox, tmp_path: Path
    ) -> None:
        assert isinstance(sandbox, DeltaApplier)
        other = self.sibling(sandbox, tmp_path)
        self.write(other, "src/app.py", b"agreed\n")
        self.write(other, "theirs.txt", b"t\n")
        delta = other.capture()
        self.write(sandbox, "src/app.py", b"agreed\n")
        sandbox.apply_delta(delta)
        assert self.snapshot(sandbox)["theirs.txt"] == (b"t\n", False)
        assert self.snapshot(sandbox)["src/app.py"] == (b"agreed\n", False)

    def test_a_clean_delta_is_a_no_op(self, sandbox: Sandbox, tmp_path: Path) -> None:
        assert isinstance(sandbox, DeltaApplier)
        other = self.sibling(sandbox, tmp_path)
        delta = other.capture()
        self.dirty(sandbox)
        before = self.snapshot(sandbox)
        sandbox.apply_delta(delta)
        assert self.snapshot(sandbox) == before

    def test_a_child_of_a_dirty_parent_settles_onto_the_moved_parent(
        self, sandbox: Sandbox, tmp_path: Path
    ) -> None:
        assert isinstance(sandbox, DeltaApplier)
        # the parent is dirty at fork time; the child starts from that state
        self.write(sandbox, "src/app.py", b"dirty at fork\n")
        baseline = sandbox.capture()
        child = self.sibling(sandbox, tmp_path)
        child.apply(baseline)
        # both sides move on, on different paths
        self.write(child, "child.txt", b"child work\n")
        self.write(sandbox, "README.md", b"parent work\n")
        child_state = child.capture()
        _, child_files = child.diff(baseline)
        _, parent_files = sandbox.diff(baseline)
        assert child_files == ["child.txt"]
        assert parent_files == ["README.md"]
        expected = self.snapshot(sandbox)
        expected["child.txt"] = (b"child work\n", False)
        sandbox.apply_delta(child_state, baseline)
        assert self.snapshot(sandbox) == expected

    def test_a_delta_base_defaults_to_the_revision_it_was_captured_on(
        self, sandbox: Sandbox, tmp_path: Path
    ) -> None:
        assert isinstance(sandbox, DeltaApplier)
        self.write(sandbox, "src/app.py", b"dirty at fork\n")
        baseline = sandbox.capture()
        child = self.sibling(sandbox, tmp_path)
        child.apply(baseline)
        self.write(child, "child.txt", b"child work\n")
        expected = self.snapshot(sandbox)
        expected["child.txt"] = (b"child work\n", False)
        sandbox.apply_delta(child.capture())
        assert self.snapshot(sandbox) == expected

    # ------------------------------------------------------------ lifecycle
    def test_states_outlive_the_sandbox_that_captured_them(
        self, sandbox: Sandbox, tmp_path: Path
    ) -> None:
        other = self.sibling(sandbox, tmp_path)
        self.write(other, "src/app.py", b"from the sibling\n")
        state = other.capture()
        expected = self.snapshot(other)
        other.destroy()
        sandbox.apply(state)
        assert self.snapshot(sandbox) == expected

    def test_a_destroyed_lifecycle_sandbox_refuses_to_capture(
        self, sandbox: Sandbox, tmp_path: Path
    ) -> None:
        other = self.sibling(sandbox, tmp_path)
        assert other.capabilities().lifecycle
        other.destroy()
        with pytest.raises(SandboxError):
            other.capture()

    # ------------------------------------------------------------ capabilities
    def test_missing_capabilities_raise_unsupported(self, sandbox: Sandbox) -> None:
        caps = sandbox.capabilities()
        if not caps.exec:
            with pytest.raises(UnsupportedError, match="not supported"):
                sandbox.exec(ExecRequest("true"))
        if not caps.file_io:
            with pytest.raises(UnsupportedError):
                sandbox.read_file("README.md")
            with pytest.raises(UnsupportedError):
                sandbox.write_file("README.md", b"x")

    def test_create_on_a_live_sandbox_keeps_its_work(self, sandbox: Sandbox) -> None:
        self.dirty(sandbox)
        before = self.snapshot(sandbox)
        if sandbox.capabilities().lifecycle:
            with pytest.raises(SandboxError):
                sandbox.create(SandboxSpec())
        else:
            sandbox.create(SandboxSpec())
        assert self.snapshot(sandbox) == before
