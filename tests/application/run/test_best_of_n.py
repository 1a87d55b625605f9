"""best_of_n on SQLite with memory sandboxes: one winner, losers discarded, failures."""

from __future__ import annotations

import pytest

from goatherd.application import (
    ApplyConflictError,
    BestOfNError,
    RecoverOptions,
    RunCallbackError,
    RunStatus,
    best_of_n,
    recover_scopes,
)
from goatherd.domain import (
    DestructivePathReviewer,
    OutputState,
    ScopeNotFoundError,
    ScopeState,
)
from goatherd.infrastructure.bootstrap import runtime_context_for
from goatherd.infrastructure.sandbox.memory import MemorySandbox
from goatherd.infrastructure.store import SQLiteTraceStore
from tests.application.run.support import (
    DECISION_SCHEMA,
    SETTLED_SCHEMA,
    failure_of,
    fresh_sibling,
    is_live,
    live_sandbox,
    manager,
    payloads,
    run_records,
    trace_size,
    value_of,
    workspace,
)

PEM = DestructivePathReviewer(("*.pem",))


@pytest.fixture
def store(tmp_path):
    with SQLiteTraceStore(tmp_path / "trace.db") as s:
        yield s


def write(files: dict[str, bytes]):
    def handler(scope):
        for path, data in files.items():
            scope.sandbox.write_file(path, data)

    return handler


def fail(scope):
    scope.sandbox.write_file("half.txt", b"half")
    raise RuntimeError("attempt crashed")


class Sandboxes:
    """A ``sandbox_for`` that remembers what it handed out."""

    def __init__(self, main):
        self.main = main
        self.made: list[MemorySandbox] = []

    def __call__(self, index):
        sb = fresh_sibling(self.main.repository)
        self.made.append(sb)
        return sb


def pick(index):
    return lambda outputs: outputs[index]


class TestOneWinner:
    def test_denied_failed_and_passing_attempts_settle_exactly_one_winner(self, store):
        mgr = manager(store)
        main = live_sandbox()
        parent = mgr.create("agent:main", main).unwrap()
        sandboxes = Sandboxes(main)
        offered = []

        def chooser(outputs):
            offered.extend(outputs)
            return outputs[0]

        result = value_of(
            best_of_n(
                mgr,
                parent.id,
                [write({"ca.pem": b"k"}), fail, write({"answer.txt": b"42\n"})],
                sandbox_for=sandboxes,
                chooser=chooser,
                reviewer=PEM,
                owner_prefix="try",
            )
        )
        assert [a.status for a in result.attempts] == [
            RunStatus.DENIED,
            RunStatus.FAILED,
            RunStatus.SELECTED,
        ]
        assert result.winner_index == 2
        assert result.winner.scope_id == "scope:try-2"
        # the chooser saw only the sealed output, with its frozen changes
        assert [o.changes() for o in offered] == [
            [{"path": "answer.txt", "kind": "create"}]
        ]
        assert "+42" in offered[0].diff()
        assert workspace(main) == {"a.txt": b"1\n", "answer.txt": b"42\n"}
        assert [is_live(sb) for sb in sandboxes.made] == [False, False, False]
        states = [mgr.get(f"scope:try-{i}").state for i in range(3)]  # type: ignore[union-attr]
        assert states == [ScopeState.DISCARDED, ScopeState.DISCARDED, ScopeState.MERGED]
        assert [r["status"] for r in run_records(store)] == [
            "denied",
            "failed",
            "selected",
        ]

    def test_the_losers_are_settled_discarded_and_recorded(self, store):
        mgr = manager(store)
        main = live_sandbox()
        parent = mgr.create("agent:main", main).unwrap()
        sandboxes = Sandboxes(main)
        result = value_of(
            best_of_n(
                mgr,
                parent.id,
                [write({"x.txt": b"%d\n" % i}) for i in range(3)],
                sandbox_for=sandboxes,
                chooser=pick(1),
            )
        )
        assert [a.status for a in result.attempts] == [
            RunStatus.SEALED,
            RunStatus.SELECTED,
            RunStatus.SEALED,
        ]
        assert [a.output_action for a in result.attempts] == [
            "discarded",
            "selected",
            "discarded",
        ]
        assert workspace(main) == {"a.txt": b"1\n", "x.txt": b"1\n"}
        outputs = [mgr.output(a.output_id) for a in result.attempts]
        assert [o.state for o in outputs] == [  # type: ignore[union-attr]
            OutputState.DISCARDED,
            OutputState.SELECTED,
            OutputState.DISCARDED,
        ]
        settled = sorted(str(p["action"]) for p in payloads(store, SETTLED_SCHEMA))
        assert settled == ["discarded", "discarded", "selected"]
        decisions = [
            (d["approved"], d["action"]) for d in payloads(store, DECISION_SCHEMA)
        ]
        assert sorted(decisions, key=str) == sorted(
            [(True, "selected"), (True, "discarded"), (True, "discarded")], key=str
        )
        assert all(not is_live(sb) for sb in sandboxes.made)
        assert result.attempts[0].reason == "not chosen"

    def test_a_moved_parent_makes_the_winner_settle_with_apply(self, store):
        mgr = manager(store)
        main = live_sandbox()
        parent = mgr.create("agent:main", main).unwrap()

        def chooser(outputs):
            main.write_file("c.txt", b"parent moved\n")
            return outputs[0]

        result = value_of(
            best_of_n(
                mgr,
                parent.id,
                [write({"b.txt": b"b\n"}), write({"d.txt": b"d\n"})],
                sandbox_for=Sandboxes(main),
                chooser=chooser,
            )
        )
        assert result.winner.status is RunStatus.APPLIED
        assert workspace(main) == {
            "a.txt": b"1\n",
            "b.txt": b"b\n",
            "c.txt": b"parent moved\n",
        }

    def test_default_owner_prefixes_never_collide_between_calls(self, store):
        mgr = manager(store)
        main = live_sandbox()
        parent = mgr.create("agent:main", main).unwrap()
        ids = []
        for name in ("one.txt", "two.txt"):
            result = value_of(
                best_of_n(
                    mgr,
                    parent.id,
                    [write({name: b"x"})],
                    sandbox_for=Sandboxes(main),
                    chooser=pick(0),
                )
            )
            ids.append(result.winner.scope_id)
        assert ids[0] != ids[1]
        assert all(i.startswith("scope:agent:main:best-of-n:") for i in ids)
        assert workspace(main) == {"a.txt": b"1\n", "one.txt": b"x", "two.txt": b"x"}


class TestNoWinner:
    def test_an_apply_conflict_leaves_the_winner_unconsumed(self, store):
        mgr = manager(store)
        main = live_sandbox()
        parent = mgr.create("agent:main", main).unwrap()

        def chooser(outputs):
            main.write_file("a.txt", b"parent\n")
            return outputs[0]

        error = failure_of(
            best_of_n(
                mgr,
                parent.id,
                [write({"a.txt": b"child\n"}), write({"e.txt": b"e"})],
                sandbox_for=Sandboxes(main),
                chooser=chooser,
            )
        )
        assert isinstance(error, BestOfNError)
        assert isinstance(error.cause, ApplyConflictError)
        winner = mgr.output(error.output_id)
        assert winner is not None
        assert winner.state is OutputState.UNCONSUMED
        assert [a.status for a in error.attempts] == [RunStatus.SEALED] * 2
        assert [a.output_action for a in error.attempts] == ["", "discarded"]
        assert workspace(main) == {"a.txt": b"parent\n"}
        assert mgr.get(error.attempts[0].scope_id).state is ScopeState.ACTIVE  # type: ignore[union-attr]

    def test_a_chooser_that_chooses_none_discards_every_sealed_output(self, store):
        mgr = manager(store)
        main = live_sandbox()
        parent = mgr.create("agent:main", main).unwrap()
        sandboxes = Sandboxes(main)
        error = failure_of(
            best_of_n(
                mgr,
                parent.id,
                [write({"b.txt": b"b"}), write({"c.txt": b"c"})],
                sandbox_for=sandboxes,
                chooser=lambda outputs: None,
            )
        )
        assert isinstance(error, BestOfNError)
        assert "chose no winner" in str(error)
        assert [a.output_action for a in error.attempts] == ["discarded"] * 2
        assert workspace(main) == {"a.txt": b"1\n"}
        assert all(not is_live(sb) for sb in sandboxes.made)

    def test_a_chooser_that_raises_discards_every_sealed_output(self, store):
        mgr = manager(store)
        main = live_sandbox()
        parent = mgr.create("agent:main", main).unwrap()

        def chooser(outputs):
            raise KeyError("scores")

        error = failure_of(
            best_of_n(
                mgr,
                parent.id,
                [write({"b.txt": b"b"})],
                sandbox_for=Sandboxes(main),
                chooser=chooser,
            )
        )
        assert isinstance(error, BestOfNError)
        assert isinstance(error.cause, RunCallbackError)
        assert error.cause.step == "chooser"
        assert [a.output_action for a in error.attempts] == ["discarded"]
        assert workspace(main) == {"a.txt": b"1\n"}

    def test_a_chooser_returning_a_stranger_output_is_refused(self, store):
        mgr = manager(store)
        main = live_sandbox()
        parent = mgr.create("agent:main", main).unwrap()
        other = value_of(
            best_of_n(
                mgr,
                parent.id,
                [write({"z.txt": b"z"})],
                sandbox_for=Sandboxes(main),
                chooser=pick(0),
            )
        )
        stranger = mgr.output(other.winner.output_id)
        error = failure_of(
            best_of_n(
                mgr,
                parent.id,
                [write({"b.txt": b"b"})],
                sandbox_for=Sandboxes(main),
                chooser=lambda outputs: stranger,
            )
        )
        assert isinstance(error, BestOfNError)
        assert "which it was not offered" in str(error)
        assert workspace(main) == {"a.txt": b"1\n", "z.txt": b"z"}

    def test_when_every_attempt_fails_there_is_no_winner(self, store):
        mgr = manager(store)
        main = live_sandbox()
        parent = mgr.create("agent:main", main).unwrap()
        chosen = []
        error = failure_of(
            best_of_n(
                mgr,
                parent.id,
                [fail, write({"k.pem": b"k"})],
                sandbox_for=Sandboxes(main),
                chooser=lambda outputs: chosen.append(outputs),
                reviewer=PEM,
            )
        )
        assert isinstance(error, BestOfNError)
        assert "no attempt was approved and sealed" in str(error)
        assert [a.status for a in error.attempts] == [
            RunStatus.FAILED,
            RunStatus.DENIED,
        ]
        assert chosen == []
        assert workspace(main) == {"a.txt": b"1\n"}

    def test_a_sandbox_factory_that_raises_fails_only_its_attempt(self, store):
        mgr = manager(store)
        main = live_sandbox()
        parent = mgr.create("agent:main", main).unwrap()

        def sandbox_for(index):
            if index == 0:
                raise OSError("no space for a worktree")
            return fresh_sibling(main.repository)

        result = value_of(
            best_of_n(
                mgr,
                parent.id,
                [write({"b.txt": b"b"}), write({"c.txt": b"c"})],
                sandbox_for=sandbox_for,
                chooser=pick(0),
                owner_prefix="t",
            )
        )
        first = result.attempts[0]
        assert first.status is RunStatus.FAILED
        assert "sandbox_for raised OSError" in first.reason
        assert first.record_id == ""  # no child existed to record on
        assert mgr.get("scope:t-0") is None
        assert result.winner.scope_id == "scope:t-1"


class TestBadInput:
    def test_no_attempts_is_refused_before_anything_is_written(self, store):
        mgr = manager(store)
        parent = mgr.create("agent:main", live_sandbox()).unwrap()
        before = trace_size(store)
        error = failure_of(
            best_of_n(mgr, parent.id, [], sandbox_for=lambda i: None, chooser=pick(0))  # type: ignore[arg-type,return-value]
        )
        assert isinstance(error, BestOfNError)
        assert "no attempts" in str(error)
        assert trace_size(store) == before

    def test_an_unknown_parent_is_refused_before_any_sandbox_is_asked_for(self, store):
        mgr = manager(store)
        asked: list[int] = []
        error = failure_of(
            best_of_n(
                mgr,
                "scope:nope",
                [write({"b": b"b"})],
                sandbox_for=asked.append,  # type: ignore[arg-type]
                chooser=pick(0),
            )
        )
        assert isinstance(error, ScopeNotFoundError)
        assert asked == []
        assert trace_size(store) == (store.fact_count(), -1)


class TestTraceIsRecoverable:
    def test_a_restart_after_best_of_n_recovers_the_same_tree(self, tmp_path):
        path = tmp_path / "trace.db"
        main = live_sandbox()
        with SQLiteTraceStore(path) as store:
            mgr = manager(store)
            parent = mgr.create("agent:main", main).unwrap()
            result = value_of(
                best_of_n(
                    mgr,
                    parent.id,
                    [fail, write({"b.txt": b"b"}), write({"c.txt": b"c"})],
                    sandbox_for=Sandboxes(main),
                    chooser=pick(1),
                    owner_prefix="try",
                )
            )
            before = {s.id: s.state for s in mgr.all_scopes()}
        with SQLiteTraceStore(path) as store:
            recovered = recover_scopes(
                runtime_context_for(store),
                RecoverOptions(
                    resolver=lambda scope_id, *_: (
                        main if scope_id == parent.id else None
                    )
                ),
            ).unwrap()
            assert {s.id: s.state for s in recovered.all_scopes()} == before
            assert before["scope:try-2"] is ScopeState.MERGED
            winner = recovered.output(result.winner.output_id)
            assert winner is not None
            assert winner.state is OutputState.SELECTED
            assert len(run_records(store)) == 3


class TestOwnerReuse:
    def test_reusing_an_owner_prefix_fails_each_attempt_and_leaves_nothing_open(
        self, store
    ):
        mgr = manager(store)
        main = live_sandbox()
        parent = mgr.create("agent:main", main).unwrap()
        value_of(
            best_of_n(
                mgr,
                parent.id,
                [write({"b.txt": b"b"})],
                sandbox_for=Sandboxes(main),
                chooser=pick(0),
                owner_prefix="try",
            )
        )
        before = trace_size(store)
        sandboxes = Sandboxes(main)
        error = failure_of(
            best_of_n(
                mgr,
                parent.id,
                [write({"c.txt": b"c"})],
                sandbox_for=sandboxes,
                chooser=pick(0),
                owner_prefix="try",
            )
        )
        assert isinstance(error, BestOfNError)
        [attempt] = error.attempts
        assert attempt.status is RunStatus.FAILED
        assert "already exists" in attempt.reason
        assert trace_size(store) == before
        assert [is_live(sb) for sb in sandboxes.made] == [False]
        assert workspace(main) == {"a.txt": b"1\n", "b.txt": b"b"}
