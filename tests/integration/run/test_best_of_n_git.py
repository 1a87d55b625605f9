"""best_of_n and run_reversible on a real git repository with detached worktrees."""

from __future__ import annotations

from pathlib import Path

import pytest

from goatherd.application import (
    RunStatus,
    SandboxSpec,
    Supervisor,
    best_of_n,
    run_reversible,
)
from goatherd.domain import DestructivePathReviewer, ScopeState, SupervisorDeniedError
from goatherd.infrastructure.sandbox import new_local_git_sandbox, new_worktree_sandbox
from goatherd.infrastructure.store import SQLiteTraceStore
from tests.application.run.support import (
    DECISION_SCHEMA,
    DISCARDED_SCHEMA,
    SETTLED_SCHEMA,
    deny_paths_under,
    failure_of,
    manager,
    payloads,
    run_records,
    value_of,
)
from tests.infrastructure.sandbox.gitfixtures import git, make_repo, snapshot

pytestmark = pytest.mark.integration

FILES = {"README.md": b"hello\n", "src/app.py": b"print(1)\n"}


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo", dict(FILES))


@pytest.fixture
def store(tmp_path: Path):
    with SQLiteTraceStore(tmp_path / "trace.db") as s:
        yield s


def files_of(root: Path) -> dict[str, bytes]:
    return {path: data for path, (data, _) in snapshot(root).items()}


def edit(files: dict[str, bytes]):
    def handler(scope):
        root = Path(scope.sandbox.address())
        for path, data in files.items():
            target = root / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)

    return handler


def crash(scope):
    (Path(scope.sandbox.address()) / "src" / "app.py").write_bytes(b"half-written")
    raise RuntimeError("the agent crashed mid-edit")


def worktrees(tmp_path: Path):
    made: list[Path] = []

    def sandbox_for(index: int):
        path = tmp_path / "worktrees" / f"try-{index}"
        made.append(path)
        return new_worktree_sandbox(tmp_path / "repo", path)

    return sandbox_for, made


def registered_worktrees(repo: Path) -> list[str]:
    lines = git(repo, "worktree", "list", "--porcelain").splitlines()
    return [
        line.removeprefix("worktree ") for line in lines if line.startswith("worktree ")
    ]


def open_parent(mgr, repo: Path):
    sandbox = new_local_git_sandbox(repo)
    sandbox.create(SandboxSpec())
    return mgr.create("agent:main", sandbox).unwrap()


class TestBestOfThreeOnGit:
    def test_a_denied_a_failed_and_a_passing_attempt_settle_exactly_one_winner(
        self, repo, store, tmp_path
    ):
        mgr = manager(store)
        parent = open_parent(mgr, repo)
        sandbox_for, made = worktrees(tmp_path)
        winner_files = {"src/app.py": b"print(2)\n", "NOTES.md": b"done\n"}
        offered = []

        def chooser(outputs):
            offered.extend(outputs)
            return outputs[0]

        result = value_of(
            best_of_n(
                mgr,
                parent.id,
                [
                    edit({"keys/deploy.pem": b"-----KEY-----\n"}),
                    crash,
                    edit(winner_files),
                ],
                sandbox_for=sandbox_for,
                chooser=chooser,
                reviewer=DestructivePathReviewer(("*.pem",)),
                owner_prefix="try",
            )
        )
        # exactly one winner, the passing attempt
        assert [a.status for a in result.attempts] == [
            RunStatus.DENIED,
            RunStatus.FAILED,
            RunStatus.SELECTED,
        ]
        assert result.winner.scope_id == "scope:try-2"
        assert len(offered) == 1
        assert sorted(offered[0].changes(), key=str) == sorted(
            [
                {"path": "src/app.py", "kind": "modify"},
                {"path": "NOTES.md", "kind": "create"},
            ],
            key=str,
        )
        # the parent working tree has exactly the winner's changes
        assert files_of(repo) == {**FILES, **winner_files}
        # every attempt's worktree is gone, on disk and in git's registry
        assert [p.exists() for p in made] == [False, False, False]
        assert registered_worktrees(repo) == [str(repo)]
        # the trace: one settled-selected output, and the discards
        assert [p["action"] for p in payloads(store, SETTLED_SCHEMA)] == ["selected"]
        discarded = [p["child_scope"] for p in payloads(store, DISCARDED_SCHEMA)]
        assert sorted(map(str, discarded)) == ["scope:try-0", "scope:try-1"]
        decisions = [
            (d["child_scope"], d["approved"], d["action"])
            for d in payloads(store, DECISION_SCHEMA)
        ]
        assert decisions == [
            ("scope:try-0", False, "discarded"),
            ("scope:try-2", True, "selected"),
        ]
        assert [(r["child_scope"], r["status"]) for r in run_records(store)] == [
            ("scope:try-0", "denied"),
            ("scope:try-1", "failed"),
            ("scope:try-2", "selected"),
        ]

    def test_losers_worktrees_are_removed_and_a_moved_parent_takes_apply(
        self, repo, store, tmp_path
    ):
        mgr = manager(store)
        parent = open_parent(mgr, repo)
        sandbox_for, made = worktrees(tmp_path)

        def chooser(outputs):
            # the parent moves (uncommitted work on another path) before settling
            (repo / "CHANGELOG.md").write_bytes(b"parent work\n")
            return outputs[1]

        result = value_of(
            best_of_n(
                mgr,
                parent.id,
                [
                    edit({"a.txt": b"a\n"}),
                    edit({"b.txt": b"b\n"}),
                    edit({"c.txt": b"c\n"}),
                ],
                sandbox_for=sandbox_for,
                chooser=chooser,
                owner_prefix="try",
            )
        )
        assert [a.status for a in result.attempts] == [
            RunStatus.SEALED,
            RunStatus.APPLIED,
            RunStatus.SEALED,
        ]
        assert [a.output_action for a in result.attempts] == [
            "discarded",
            "applied",
            "discarded",
        ]
        assert files_of(repo) == {
            **FILES,
            "b.txt": b"b\n",
            "CHANGELOG.md": b"parent work\n",
        }
        assert [p.exists() for p in made] == [False, False, False]
        assert registered_worktrees(repo) == [str(repo)]
        actions = sorted(str(p["action"]) for p in payloads(store, SETTLED_SCHEMA))
        assert actions == ["applied", "discarded", "discarded"]

    def test_attempts_start_from_the_parents_uncommitted_tree_and_still_select(
        self, repo, store, tmp_path
    ):
        mgr = manager(store)
        (repo / "src" / "app.py").write_bytes(b"print('dirty')\n")
        parent = open_parent(mgr, repo)
        sandbox_for, _ = worktrees(tmp_path)
        seen = []

        def handler(scope):
            root = Path(scope.sandbox.address())
            seen.append((root / "src" / "app.py").read_bytes())
            (root / "NOTES.md").write_bytes(b"n\n")

        result = value_of(
            best_of_n(
                mgr,
                parent.id,
                [handler],
                sandbox_for=sandbox_for,
                chooser=lambda outputs: outputs[0],
            )
        )
        assert seen == [b"print('dirty')\n"]
        assert result.winner.status is RunStatus.SELECTED
        assert [(c.path, c.kind) for c in result.winner.changes] == [
            ("NOTES.md", "create")
        ]
        assert files_of(repo) == {
            **FILES,
            "src/app.py": b"print('dirty')\n",
            "NOTES.md": b"n\n",
        }


class TestReversibleRunOnGit:
    def test_a_supervisor_denial_in_a_worktree_never_touches_the_repository(
        self, repo, store, tmp_path
    ):
        mgr = manager(store)
        parent = open_parent(mgr, repo)
        supervisor = Supervisor(mgr, None)
        supervisor.add_rule(deny_paths_under("secrets/"))
        worktree = tmp_path / "wt"
        error = failure_of(
            run_reversible(
                mgr,
                parent.id,
                "agent:sub",
                edit({"secrets/token": b"t"}),
                sandbox=new_worktree_sandbox(repo, worktree),
                supervisor=supervisor,
            )
        )
        assert isinstance(error, SupervisorDeniedError)
        assert files_of(repo) == FILES
        assert git(repo, "status", "--porcelain") == ""
        assert not worktree.exists()
        assert registered_worktrees(repo) == [str(repo)]
        assert mgr.get("scope:agent:sub").state is ScopeState.DISCARDED  # type: ignore[union-attr]

    def test_a_shared_run_in_place_rolls_back_a_failed_handler(self, repo, store):
        mgr = manager(store)
        parent = open_parent(mgr, repo)
        error = failure_of(run_reversible(mgr, parent.id, "agent:sub", crash))
        assert "the agent crashed mid-edit" in str(error)
        assert files_of(repo) == FILES
        assert git(repo, "status", "--porcelain") == ""
        # and an approved in-place run keeps its work
        outcome = value_of(
            run_reversible(mgr, parent.id, "agent:ok", edit({"NOTES.md": b"ok\n"}))
        )
        assert outcome.status is RunStatus.MERGED
        assert files_of(repo) == {**FILES, "NOTES.md": b"ok\n"}
