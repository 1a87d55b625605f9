"""Settle as a commit: the winner lands as one git commit the trace names, once.

A real repository, a root on it and an isolated child that sealed its work:
``settle(..., commit=True)`` (select or apply) must leave exactly one new
commit on the branch, whose trailers name the output and the settlement
record, whose tree holds the settled paths and nothing of the user's other
uncommitted work, with the repository's hooks and configured programs never
run. A settle SIGKILLed (another process) between the git commit and its
record is finished by a same-``seq`` retry that finds the commit by its
trailer and records it, committing nothing twice. Both trace backends.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from returns.result import Failure, Success

from goatherd.application import RetainedOutput, ScopeManager, SettleCommitError
from goatherd.application.ports import SandboxSpec
from goatherd.domain import OutputCommitted, OutputState
from goatherd.infrastructure.audit.verify import verify_trace
from goatherd.infrastructure.sandbox import MemorySandbox, MemorySandboxConfig
from tests.integration.runtime.support import git, make_repo, root_sandbox, worktree
from tests.integration.runtime.test_claim_race import (
    ACTOR,
    Actor,
    assert_files_match_trace,
    manager,
    open_store,
)
from tests.zygote import Zygote, zygote

pytestmark = pytest.mark.integration

AUTHOR = "Ada Lovelace <ada@example.com>"


@pytest.fixture(scope="module")
def forks() -> Iterator[Zygote]:
    with zygote([ACTOR]) as started:
        yield started


def sealed(
    trace: str, tmp_path: Path, work: dict[str, bytes | None], *, name: str = "try"
) -> tuple[Path, str]:
    """A repository with a root and a child ``agent:<name>`` that sealed ``work``."""
    repo = tmp_path / "repo"
    if not repo.exists():
        make_repo(repo, {"base.txt": b"base\n", "gone.txt": b"old\n"})
    with open_store(trace) as store:
        mgr = manager(store, repo)
        root = mgr.get("scope:agent:main")
        if root is None:
            root = mgr.create("agent:main", root_sandbox(repo)).unwrap()
        where = tmp_path / f"wt-{name}"
        child = mgr.fork_isolated(root.id, f"agent:{name}", None, worktree(repo, where))
        for path, data in work.items():
            if data is None:
                (where / path).unlink()
            else:
                (where / path).parent.mkdir(parents=True, exist_ok=True)
                (where / path).write_bytes(data)
        out = mgr.seal(child.unwrap().id).unwrap().id
    return repo, out


def output(mgr: ScopeManager, output_id: str) -> RetainedOutput:
    found = mgr.output(output_id)
    assert found is not None
    return found


def log(repo: Path, *args: str) -> str:
    return git(repo, "log", *args)


def commits(repo: Path) -> list[str]:
    return log(repo, "--format=%H").split()


def trailers(repo: Path, rev: str = "HEAD") -> str:
    return log(repo, "-1", "--format=%(trailers)", rev)


def committed_records(store, output_id: str) -> list[dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    for entry in store.read_log(-1, 100_000, schema_refs=(OutputCommitted.SCHEMA,)):
        if entry.record.payload["output_id"] == output_id:
            found[entry.record.record_id] = dict(entry.record.payload)
    return list(found.values())


def assert_one_commit(mgr: ScopeManager, store, repo: Path, out_id: str, before: int):
    """One new commit, its trailers leading to the output and its settlement."""
    assert len(commits(repo)) == before + 1
    out = mgr.output(out_id)
    assert out is not None
    assert out.state in (OutputState.SELECTED, OutputState.APPLIED)
    head = git(repo, "rev-parse", "HEAD").strip()
    assert out.commit() == head
    settlement = mgr.context.model.output(out_id).settled_record
    text = trailers(repo)
    assert f"Goatherd-Output: {out_id}\n" in text
    assert f"Goatherd-Trace-Head: {settlement}\n" in text
    assert "Goatherd-Scope: scope:agent:try\n" in text
    found = log(repo, "--format=%H %(trailers:key=Goatherd-Output,valueonly)")
    assert f"{head} {out_id}" in found
    assert git(repo, "symbolic-ref", "HEAD").strip() == "refs/heads/main"
    (record,) = committed_records(store, out_id)
    assert record["commit"] == head
    assert_files_match_trace(mgr, store, "agent:main")


def test_select_as_a_commit_commits_the_winner_with_trailers(trace, tmp_path):
    work = {"answer.txt": b"42\n", "base.txt": b"changed\n", "gone.txt": None}
    repo, out_id = sealed(trace, tmp_path, work)
    before = len(commits(repo))
    with open_store(trace) as store:
        mgr = manager(store, repo)
        result = mgr.settle(out_id, "selected", commit=True, author=AUTHOR)
        assert result == Success(None)
        assert_one_commit(mgr, store, repo, out_id, before)
        state = output(mgr, out_id).workspace()
    # The commit's tree is the sealed state's tree (the user had nothing else).
    assert state.data is not None
    assert git(repo, "rev-parse", "HEAD^{tree}").strip() == state.data["tree_sha"]
    assert log(repo, "-1", "--format=%an <%ae>").strip() == AUTHOR
    assert git(repo, "status", "--porcelain").strip() == ""
    names = git(repo, "show", "--name-status", "--format=", "HEAD").split("\n")
    assert sorted(n for n in names if n) == [
        "A\tanswer.txt",
        "D\tgone.txt",
        "M\tbase.txt",
    ]


def test_apply_as_a_commit_leaves_the_users_other_work_uncommitted(trace, tmp_path):
    repo, out_id = sealed(trace, tmp_path, {"answer.txt": b"42\n"})
    (repo / "notes.txt").write_bytes(b"mine, not yet committed\n")
    (repo / "base.txt").write_bytes(b"my unstaged edit\n")
    before = len(commits(repo))
    with open_store(trace) as store:
        mgr = manager(store, repo)
        message = "Take the answer\n\nSigned-off-by: Ada <ada@example.com>"
        result = mgr.settle(
            out_id, "applied", commit=True, message=message, author=AUTHOR
        )
        assert result == Success(None)
        assert_one_commit(mgr, store, repo, out_id, before)
    assert log(repo, "-1", "--format=%s").strip() == "Take the answer"
    text = trailers(repo)
    assert "Signed-off-by: Ada <ada@example.com>\n" in text  # one trailer block
    assert git(repo, "show", "--name-only", "--format=", "HEAD").split() == [
        "answer.txt"
    ]
    assert (repo / "base.txt").read_bytes() == b"my unstaged edit\n"
    status = sorted(git(repo, "status", "--porcelain").splitlines())
    assert status == [" M base.txt", "?? notes.txt"]


def test_the_repositorys_hooks_and_configured_programs_do_not_run(tmp_path):
    trace = str(tmp_path / "trace.db")
    repo, out_id = sealed(trace, tmp_path, {"answer.txt": b"42\n"})
    ran = tmp_path / "ran"
    ran.mkdir()
    hooks = repo / ".git" / "hooks"
    for hook in ("pre-commit", "commit-msg", "post-commit", "reference-transaction",
                 "prepare-commit-msg", "post-index-change"):  # fmt: skip
        (hooks / hook).write_text(f"#!/bin/sh\ntouch {ran}/{hook}\n")
        (hooks / hook).chmod(0o755)
    program = repo / ".git" / "planted.sh"
    program.write_text(f"#!/bin/sh\ntouch {ran}/program\ncat\n")
    program.chmod(0o755)
    git(repo, "config", "core.hooksPath", str(hooks))
    git(repo, "config", "core.fsmonitor", str(program))
    git(repo, "config", "filter.planted.clean", str(program))
    git(repo, "config", "filter.planted.smudge", str(program))
    (repo / ".git" / "info" / "attributes").write_text("* filter=planted\n")
    with open_store(trace) as store:
        mgr = manager(store, repo)
        assert mgr.settle(out_id, "selected", commit=True, author=AUTHOR) == Success(
            None
        )
    assert f"Goatherd-Output: {out_id}" in trailers(repo)
    assert sorted(p.name for p in ran.iterdir()) == []


def test_a_settle_killed_between_its_commit_and_its_record_commits_once(
    trace, tmp_path, forks
):
    repo, out_id = sealed(trace, tmp_path, {"answer.txt": b"42\n"})
    before = len(commits(repo))
    kill = {"ACTOR_KILL_AT": "after-git-commit", "ACTOR_KILL_INTENT": ":commit$"}
    actor = Actor(forks, trace, repo)
    assert actor("settle", out_id, "selected", "7", "commit", env=kill) == "Killed"
    assert len(commits(repo)) == before + 1  # the commit stands, unrecorded
    with open_store(trace) as store:
        assert committed_records(store, out_id) == []
    assert actor("settle", out_id, "selected", "7", "commit") == "Success"
    with open_store(trace) as store:
        mgr = manager(store, repo)
        assert_one_commit(mgr, store, repo, out_id, before)
        (record,) = committed_records(store, out_id)
        assert record["adopted"] is True
        # Asked again, nothing changes.
        again = mgr.settle(out_id, "selected", seq=7, commit=True, author=AUTHOR)
        assert again == Success(None)
        assert len(commits(repo)) == before + 1
        assert len(committed_records(store, out_id)) == 1
        assert verify_trace(store).ok


def test_a_settle_killed_before_its_commit_is_committed_by_the_retry(
    trace, tmp_path, forks
):
    repo, out_id = sealed(trace, tmp_path, {"answer.txt": b"42\n"})
    before = len(commits(repo))
    kill = {"ACTOR_KILL_AT": "after-effect", "ACTOR_KILL_INTENT": ":settle:"}
    actor = Actor(forks, trace, repo)
    assert actor("settle", out_id, "selected", "3", "commit", env=kill) == "Killed"
    assert len(commits(repo)) == before
    assert actor("settle", out_id, "selected", "3", "commit") == "Success"
    with open_store(trace) as store:
        mgr = manager(store, repo)
        assert_one_commit(mgr, store, repo, out_id, before)
        (record,) = committed_records(store, out_id)
        assert record["adopted"] is False


def refusal(result) -> SettleCommitError:
    assert isinstance(result, Failure), result
    failure = result.failure()
    assert isinstance(failure, SettleCommitError), failure
    return failure


def test_a_detached_head_is_refused_before_anything_is_settled(tmp_path):
    trace = str(tmp_path / "trace.db")
    repo, out_id = sealed(trace, tmp_path, {"answer.txt": b"42\n"})
    git(repo, "checkout", "-q", "--detach")
    with open_store(trace) as store:
        mgr = manager(store, repo)
        error = refusal(mgr.settle(out_id, "selected", commit=True, author=AUTHOR))
        assert not error.settled
        assert "detached" in str(error)
        assert "nothing was settled" in str(error)
        assert output(mgr, out_id).state is OutputState.UNCONSUMED
        assert not (repo / "answer.txt").exists()
        assert mgr.settle(out_id, "selected") == Success(None)  # without a commit


def test_no_identity_is_refused_before_anything_is_settled(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "home" / ".config"))
    trace = str(tmp_path / "trace.db")
    repo, out_id = sealed(trace, tmp_path, {"answer.txt": b"42\n"})
    with open_store(trace) as store:
        mgr = manager(store, repo)
        error = refusal(mgr.settle(out_id, "selected", commit=True))
        assert "no author identity" in str(error)
        assert not error.settled
        bad = refusal(mgr.settle(out_id, "selected", commit=True, author="ada"))
        assert "Name <email@example.com>" in str(bad)
        assert output(mgr, out_id).state is OutputState.UNCONSUMED
        git(repo, "config", "user.name", "Repo User")
        git(repo, "config", "user.email", "repo@example.com")
        assert mgr.settle(out_id, "selected", commit=True) == Success(None)
    assert (
        log(repo, "-1", "--format=%an <%ae>").strip() == "Repo User <repo@example.com>"
    )


def test_nothing_to_commit_keeps_the_settlement_and_says_so(tmp_path):
    """Settled without a commit, committed by hand, then asked to commit: nothing."""
    trace = str(tmp_path / "trace.db")
    repo, out_id = sealed(trace, tmp_path, {"answer.txt": b"42\n"})
    with open_store(trace) as store:
        mgr = manager(store, repo)
        assert mgr.settle(out_id, "applied", seq=11) == Success(None)
        git(repo, "add", "answer.txt")
        git(repo, "commit", "-q", "-m", "the user's own commit")
        before = len(commits(repo))
        error = refusal(
            mgr.settle(out_id, "applied", seq=11, commit=True, author=AUTHOR)
        )
        assert error.settled
        assert error.seq == 11
        assert "nothing to commit" in str(error)
        assert "seq=11" in str(error)
        assert output(mgr, out_id).state is OutputState.APPLIED
        assert output(mgr, out_id).commit() is None
    assert len(commits(repo)) == before


def test_a_settle_made_without_a_commit_is_committed_by_its_seq(tmp_path):
    trace = str(tmp_path / "trace.db")
    repo, out_id = sealed(trace, tmp_path, {"answer.txt": b"42\n"})
    before = len(commits(repo))
    with open_store(trace) as store:
        mgr = manager(store, repo)
        assert mgr.settle(out_id, "selected", seq=4) == Success(None)
        assert len(commits(repo)) == before
        done = mgr.settle(out_id, "selected", seq=4, commit=True, author=AUTHOR)
        assert done == Success(None)
        assert_one_commit(mgr, store, repo, out_id, before)


def test_release_commit_and_a_memory_parent_are_refused(tmp_path):
    trace = str(tmp_path / "trace.db")
    repo, out_id = sealed(trace, tmp_path, {"answer.txt": b"42\n"})
    with open_store(trace) as store:
        mgr = manager(store, repo)
        error = refusal(mgr.settle(out_id, "released", commit=True))
        assert "only select and apply" in str(error)
        with pytest.raises(ValueError, match="commit=True"):
            mgr.settle(out_id, "selected", message="no commit asked")
        assert output(mgr, out_id).state is OutputState.UNCONSUMED
        main = MemorySandbox(MemorySandboxConfig(files={"a.txt": b"1\n"}))
        main.create(SandboxSpec())
        root = mgr.create("agent:mem", main).unwrap()
        kid = MemorySandbox(MemorySandboxConfig(repository=main.repository))
        kid.create(SandboxSpec())
        child = mgr.fork_isolated(root.id, "agent:mem-kid", None, kid).unwrap()
        kid.write_file("b.txt", b"2\n")
        sealed_out = mgr.seal(child.id).unwrap()
        error = refusal(mgr.settle(sealed_out.id, "selected", commit=True))
        assert "cannot commit" in str(error)
        assert not error.settled


def test_git_log_trailers_find_the_trace(tmp_path):
    """``git log --format=%(trailers)`` over several settles leads to each output."""
    trace = str(tmp_path / "trace.db")
    repo, first = sealed(trace, tmp_path, {"one.txt": b"1\n"}, name="one")
    with open_store(trace) as store:
        assert manager(store, repo).settle(
            first, "selected", commit=True, author=AUTHOR
        ) == Success(None)
    _, second = sealed(trace, tmp_path, {"two.txt": b"2\n"}, name="two")
    with open_store(trace) as store:
        mgr = manager(store, repo)
        assert mgr.settle(second, "applied", commit=True, author=AUTHOR) == Success(
            None
        )
        lines = log(repo, "--format=%(trailers:key=Goatherd-Output,valueonly)")
        assert [x for x in lines.splitlines() if x] == [second, first]
        assert_files_match_trace(mgr, store, "agent:main")
    done = subprocess.run(
        ["git", "log", "--format=%(trailers:key=Goatherd-Trace-Head,valueonly)"],
        cwd=repo,
        capture_output=True,
        text=True,
        check=True,
    )
    assert len([x for x in done.stdout.splitlines() if x]) == 2
