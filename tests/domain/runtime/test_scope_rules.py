"""The scope aggregate's decisions and folds, rule by rule, with their messages."""

from __future__ import annotations

from dataclasses import replace

import pytest

from goatherd.domain import (
    InconsistentTraceError,
    NotAChildError,
    ScopeAggregate,
    ScopeExistsError,
    ScopeForked,
    ScopeState,
    ScopeStateError,
    WorkspaceState,
)
from goatherd.domain.scope import owner_in_sequenced_id

BASE = WorkspaceState(backend="memory", revision="r1", data={"a": "1"})


def scope(owner: str, **fields: object) -> ScopeAggregate:
    return replace(ScopeAggregate.bare(owner), listed=True, **fields)  # type: ignore[arg-type]


def child_of(parent: str, owner: str, **fields: object) -> ScopeAggregate:
    return scope(owner, parent_owner=parent, fork_point="sha256:f" + owner, **fields)


class TestFork:
    def test_a_non_isolated_fork_records_no_sandbox(self) -> None:
        fork = scope("p").fork(
            ScopeAggregate.bare("c"),
            child_head=0,
            baseline=BASE,
            sandbox_backend="git",
            sandbox_path="/tmp/wt",
        )
        assert (fork.child_owner, fork.parent_owner) == ("c", "p")
        assert (fork.isolated, fork.sandbox_backend, fork.sandbox_path) == (
            None,
            None,
            None,
        )
        assert fork.baseline == BASE
        assert fork.baseline_digest == BASE.digest()

    def test_an_isolated_fork_records_its_sandbox(self) -> None:
        fork = scope("p").fork(
            ScopeAggregate.bare("c"),
            child_head=0,
            baseline=BASE,
            isolated=True,
            sandbox_backend="git",
            sandbox_path="/tmp/wt",
        )
        assert (fork.isolated, fork.sandbox_backend, fork.sandbox_path) == (
            True,
            "git",
            "/tmp/wt",
        )

    def test_an_isolated_fork_without_a_location_records_none(self) -> None:
        fork = scope("p").fork(
            ScopeAggregate.bare("c"), child_head=0, baseline=None, isolated=True
        )
        assert (fork.sandbox_backend, fork.sandbox_path) == (None, None)
        assert (fork.baseline, fork.baseline_digest) == (None, None)

    def test_a_zero_baseline_is_no_baseline(self) -> None:
        fork = scope("p").fork(
            ScopeAggregate.bare("c"), child_head=0, baseline=WorkspaceState(backend="")
        )
        assert (fork.baseline, fork.baseline_digest) == (None, None)

    @pytest.mark.parametrize(
        ("child", "head"),
        [
            (scope("c"), 0),  # already a scope
            (ScopeAggregate.bare("c"), 1),  # its path holds records
            (ScopeAggregate.bare("p"), 0),  # the parent itself
        ],
    )
    def test_a_fork_onto_a_taken_owner_is_refused(
        self, child: ScopeAggregate, head: int
    ) -> None:
        with pytest.raises(ScopeExistsError) as caught:
            scope("p").fork(child, child_head=head, baseline=None)
        assert str(caught.value) == f"scope scope:{child.owner} already exists"

    def test_a_fork_from_an_ended_scope_is_refused(self) -> None:
        parent = scope("p", state=ScopeState.DISCARDED)
        with pytest.raises(ScopeStateError) as caught:
            parent.fork(ScopeAggregate.bare("c"), child_head=0, baseline=None)
        assert str(caught.value) == "cannot fork scope scope:p in state discarded"


class TestMergeAndDiscard:
    @pytest.mark.parametrize(
        ("verb", "text"), [("merge", "merge into"), ("discard", "discard from")]
    )
    def test_an_ended_parent_refuses_with_its_verb(self, verb: str, text: str) -> None:
        parent = scope("p", state=ScopeState.MERGED)
        with pytest.raises(ScopeStateError) as caught:
            getattr(parent, verb)(child_of("p", "c"))
        assert str(caught.value) == f"cannot {text} scope scope:p in state merged"

    @pytest.mark.parametrize("verb", ["merge", "discard"])
    def test_an_ended_child_refuses_with_its_verb(self, verb: str) -> None:
        child = child_of("p", "c", state=ScopeState.DISCARDED)
        with pytest.raises(ScopeStateError) as caught:
            getattr(scope("p"), verb)(child)
        assert str(caught.value) == f"cannot {verb} scope scope:c in state discarded"

    @pytest.mark.parametrize("verb", ["merge", "discard"])
    def test_a_stranger_is_not_a_child(self, verb: str) -> None:
        with pytest.raises(NotAChildError) as caught:
            getattr(scope("p"), verb)(child_of("q", "c"))
        assert str(caught.value) == "scope scope:c is not a child of scope:p"

    def test_merge_and_discard_name_the_child_and_cite_its_fork(self) -> None:
        child = child_of("p", "c")
        for event in (scope("p").merge(child), scope("p").discard(child)):
            assert (event.child_owner, event.child_scope) == ("c", "scope:c")
            assert event.caused_by == ("sha256:fc",)


class TestHaltAndInject:
    def test_halt_of_a_merged_scope_is_refused(self) -> None:
        with pytest.raises(ScopeStateError) as caught:
            scope("c", state=ScopeState.MERGED).halt()
        assert str(caught.value) == "cannot halt scope scope:c in state merged"

    def test_halt_of_a_discarded_scope_is_a_no_op(self) -> None:
        assert scope("c", state=ScopeState.DISCARDED).halt() is None

    def test_inject_keeps_the_guidance_and_refuses_an_ended_scope(self) -> None:
        assert scope("c").inject("try the other file").guidance == "try the other file"
        with pytest.raises(ScopeStateError) as caught:
            scope("c", state=ScopeState.DISCARDED).inject("late")
        assert str(caught.value) == (
            "cannot inject into scope scope:c in state discarded"
        )


class TestFolds:
    def test_genesis_takes_the_fork_record(self) -> None:
        event = ScopeForked(
            child_owner="c",
            parent_owner="p",
            isolated=True,
            sandbox_backend="git",
            sandbox_path="/wt",
            baseline_digest=BASE.digest(),
            baseline=BASE,
        )
        folded = ScopeAggregate.bare("c").with_genesis(event, "p", "sha256:r")
        assert folded.listed is True
        assert (folded.parent_owner, folded.fork_point) == ("p", "sha256:r")
        assert (folded.isolated, folded.sandbox_backend, folded.sandbox_path) == (
            True,
            "git",
            "/wt",
        )
        assert folded.baseline == BASE
        # The same fork record again changes nothing.
        assert folded.with_genesis(event, "p", "sha256:r") == folded

    def test_genesis_of_a_plain_fork_has_no_sandbox_or_baseline(self) -> None:
        event = ScopeForked(child_owner="c", parent_owner="p")
        folded = ScopeAggregate.bare("c").with_genesis(event, "p", "sha256:r")
        assert (folded.isolated, folded.sandbox_backend, folded.sandbox_path) == (
            False,
            "",
            "",
        )
        assert folded.baseline is None

    def test_a_second_fork_of_one_owner_contradicts_the_trace(self) -> None:
        event = ScopeForked(child_owner="c", parent_owner="p")
        once = ScopeAggregate.bare("c").with_genesis(event, "p", "sha256:a")
        twice = once.with_genesis(event, "q", "sha256:b")
        assert twice.inconsistent == ("owner c is forked twice (sha256:a and sha256:b)")
        assert twice.parent_owner == "p"
        # The first contradiction found is the one reported.
        assert twice.with_genesis(event, "q", "sha256:z").inconsistent == (
            twice.inconsistent
        )

    def test_a_fork_lists_the_parent_and_its_child_once(self) -> None:
        parent = ScopeAggregate.bare("p").with_child("c")
        assert (parent.listed, parent.children) == (True, ("c",))
        assert parent.with_child("c").children == ("c",)
        assert parent.with_child("d").children == ("c", "d")


class TestCreateAndSmallFolds:
    def test_create_records_the_sandbox_location_or_none(self) -> None:
        event = ScopeAggregate.bare("r").create(
            sandbox_backend="git", sandbox_path="/w"
        )
        assert (event.owner, event.sandbox_backend, event.sandbox_path) == (
            "r",
            "git",
            "/w",
        )
        plain = ScopeAggregate.bare("r").create()
        assert (plain.sandbox_backend, plain.sandbox_path) == (None, None)

    @pytest.mark.parametrize(
        "existing",
        [scope("r"), replace(ScopeAggregate.bare("r"), state=ScopeState.MERGED)],
    )
    def test_create_refuses_a_known_or_ended_owner(
        self, existing: ScopeAggregate
    ) -> None:
        with pytest.raises(ScopeExistsError) as caught:
            existing.create()
        assert str(caught.value) == "scope scope:r already exists"

    def test_a_contradicted_scope_refuses_every_decision(self) -> None:
        broken = scope("r", inconsistent="forked twice")
        for decide in (broken.halt, lambda: broken.require_active("x")):
            with pytest.raises(InconsistentTraceError) as caught:
                decide()
            assert (
                str(caught.value) == "scope:r: the trace is inconsistent: forked twice"
            )

    def test_the_first_position_is_kept(self) -> None:
        bare = ScopeAggregate.bare("r")
        assert bare.with_position(-1) == bare
        placed = bare.with_position(0)
        assert placed.first_position == 0
        assert placed.with_position(5) == placed
        assert bare.with_position(7).first_position == 7

    def test_listing_is_idempotent(self) -> None:
        listed = ScopeAggregate.bare("r").with_listed()
        assert listed.listed is True
        assert listed.with_listed() is listed

    def test_an_end_is_recorded_once_and_a_different_one_contradicts(self) -> None:
        ended = scope("r").with_end(ScopeState.MERGED, "sha256:m")
        assert (ended.state, ended.terminal_record) == (ScopeState.MERGED, "sha256:m")
        assert ended.with_end(ScopeState.MERGED, "sha256:n") == ended
        both = ended.with_end(ScopeState.DISCARDED, "sha256:d")
        assert both.inconsistent == "owner r is recorded both merged and discarded"
        assert both.state is ScopeState.MERGED

    def test_workspace_records_end_only_their_own_claim(self) -> None:
        claimed = scope("r").with_workspace_claim("out:c:1")
        assert claimed.with_workspace("sha256:a").workspace_claim == "out:c:1"
        other = claimed.with_workspace("sha256:b", ends_claim="out:c:2")
        assert (other.workspace_digest, other.workspace_claim) == (
            "sha256:b",
            "out:c:1",
        )
        done = claimed.with_workspace("sha256:c", ends_claim="out:c:1")
        assert (done.workspace_digest, done.workspace_claim) == ("sha256:c", "")

    def test_a_destroyed_sandbox_is_folded(self) -> None:
        assert scope("r").with_sandbox_destroyed().sandbox_destroyed is True

    @pytest.mark.parametrize(
        ("identifier", "owner"),
        [
            ("cp:a:3", "a"),
            ("cp:a:b:3", "a:b"),
            ("cp:a", ""),
            ("out:a:3", ""),
            ("xcp:a:3", ""),
        ],
    )
    def test_a_sequenced_id_names_its_owner(self, identifier: str, owner: str) -> None:
        assert owner_in_sequenced_id(identifier, "cp:") == owner
