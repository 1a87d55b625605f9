"""Settle's apply is a three-way merge on git's machinery (ADR 0083).

Two outputs editing disjoint lines of one file both land (the union); edits
of the same lines are refused naming the hunks, the workspace untouched and
the output not consumed. A repository's own merge driver or filter never runs.
"""

from __future__ import annotations

import subprocess
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from returns.result import Failure, Success

from goatherd.application import (
    ApplyConflictError,
    ConflictHunk,
    LineRange,
    SandboxSpec,
)
from goatherd.domain import OutputSettled
from goatherd.domain.events.base import decode_fact
from goatherd.infrastructure.bootstrap import scope_manager_for
from goatherd.infrastructure.sandbox.git import (
    GitSandbox,
    new_local_git_sandbox,
    new_worktree_sandbox,
)
from goatherd.infrastructure.store import SQLiteTraceStore

LINES = 12
BASE = "".join(f"line {n}\n" for n in range(1, LINES + 1))


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)


def _repo(tmp: Path) -> Path:
    repo = tmp / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    (repo / "f.txt").write_text(BASE)
    _git(repo, "add", ".")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "base")
    return repo


def _edit(text: str, edits: dict[int, str]) -> str:
    lines = text.splitlines(keepends=True)
    return "".join(edits.get(n, line) for n, line in enumerate(lines, 1))


def _fork(mgr: Any, root_id: str, repo: Path, name: str, edits: dict[int, str]):
    wt = new_worktree_sandbox(repo, repo.parent / f"wt-{name}")
    wt.create(SandboxSpec())
    child = mgr.fork_isolated(root_id, name, None, wt).unwrap()
    target = wt.workdir / "f.txt"
    target.write_text(_edit(target.read_text(), edits))
    return mgr.seal(child.id).unwrap()


def _settled(store: SQLiteTraceStore, owner: str) -> list[OutputSettled]:
    found = [decode_fact(e.record).event for e in store.read_path(owner)]
    return [e for e in found if isinstance(e, OutputSettled)]


def test_two_outputs_editing_disjoint_lines_of_one_file_both_apply(
    tmp_path: Path,
) -> None:
    repo = _repo(tmp_path)
    with SQLiteTraceStore(tmp_path / "trace.sqlite") as store:
        mgr = scope_manager_for(store)
        main = new_local_git_sandbox(repo)
        root = mgr.create("root", main).unwrap()
        first = _fork(mgr, root.id, repo, "first", {2: "FIRST\n"})
        second = _fork(mgr, root.id, repo, "second", {10: "SECOND\n"})
        assert mgr.settle(first.id, "applied") == Success(None)
        assert mgr.settle(second.id, "applied") == Success(None)
        assert (repo / "f.txt").read_text() == _edit(
            BASE, {2: "FIRST\n", 10: "SECOND\n"}
        )
        # The recorded result is the merged tree standing in the workspace.
        (settled,) = _settled(store, second.id)
        assert settled.result_digest == main.capture().digest()


def test_overlapping_edits_are_refused_naming_the_hunks(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    with SQLiteTraceStore(tmp_path / "trace.sqlite") as store:
        mgr = scope_manager_for(store)
        root = mgr.create("root", new_local_git_sandbox(repo)).unwrap()
        first = _fork(mgr, root.id, repo, "first", {4: "FIRST\n", 5: "FIRST\n"})
        second = _fork(mgr, root.id, repo, "second", {5: "SECOND\n"})
        assert mgr.settle(first.id, "applied") == Success(None)
        before = (repo / "f.txt").read_bytes()
        refused = mgr.settle(second.id, "applied")
        assert isinstance(refused, Failure)
        conflict = refused.failure()
        assert isinstance(conflict, ApplyConflictError)
        assert conflict.paths == ("f.txt",)
        assert conflict.hunks == (
            ConflictHunk("f.txt", LineRange(4, 2), LineRange(4, 2)),
        )
        assert "f.txt (ours lines 4-5 / theirs lines 4-5)" in str(conflict)
        assert (repo / "f.txt").read_bytes() == before
        assert _settled(store, second.id) == []
        # Not consumed: the output can still be discarded.
        assert mgr.settle(second.id, "discarded") == Success(None)


def test_a_deletion_against_a_modification_names_its_reason(
    tmp_path: Path,
) -> None:
    repo = _repo(tmp_path)
    main = new_local_git_sandbox(repo)
    base = main.capture()
    (repo / "f.txt").unlink()
    theirs = main.capture()
    main.apply(base)
    (repo / "f.txt").write_text(_edit(BASE, {1: "ours\n"}))
    with pytest.raises(ApplyConflictError) as caught:
        main.apply_delta(theirs, base)
    assert caught.value.reasons == {
        "f.txt": "deleted on one side, changed on the other"
    }


def test_a_planted_merge_driver_and_filter_never_run(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    marker = tmp_path / "ran"
    (repo / ".gitattributes").write_text("* merge=evil filter=evil\n")
    for key in ("merge.evil.driver", "filter.evil.clean", "filter.evil.smudge"):
        _git(repo, "config", key, f"touch {marker}; cat")
    main = new_local_git_sandbox(repo)
    base = main.capture()
    (repo / "f.txt").write_text(_edit(BASE, {11: "theirs\n"}))
    theirs = main.capture()
    main.apply(base)
    (repo / "f.txt").write_text(_edit(BASE, {1: "ours\n"}))
    main.apply_delta(theirs, base)
    assert (repo / "f.txt").read_text() == _edit(BASE, {1: "ours\n", 11: "theirs\n"})
    assert not marker.exists()


@pytest.fixture(scope="module")
def merging(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, GitSandbox]:
    repo = _repo(tmp_path_factory.mktemp("property"))
    return repo, new_local_git_sandbox(repo)


# Two edit sets on lines at least two apart (git treats adjacent edits as one
# region), each line edited by at most one side.
_LINE_SETS = st.sets(st.integers(1, LINES), min_size=2, max_size=LINES).filter(
    lambda s: all(b - a >= 2 for a, b in pairwise(sorted(s)))
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lines=_LINE_SETS, data=st.data())
def test_disjoint_line_edits_always_merge_to_the_union(
    merging: tuple[Path, GitSandbox], lines: set[int], data: st.DataObject
) -> None:
    repo, main = merging
    ordered = sorted(lines)
    mine = set(data.draw(st.sets(st.sampled_from(ordered))))
    ours = {n: f"ours {n}\n" for n in ordered if n in mine}
    theirs_edits = {n: f"theirs {n}\n" for n in ordered if n not in mine}
    (repo / "f.txt").write_text(BASE)
    base = main.capture()
    (repo / "f.txt").write_text(_edit(BASE, theirs_edits))
    theirs = main.capture()
    (repo / "f.txt").write_text(_edit(BASE, ours))
    main.apply_delta(theirs, base)
    assert (repo / "f.txt").read_text() == _edit(BASE, {**ours, **theirs_edits})
