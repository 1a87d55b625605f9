"""The demo's parts: the sample project, the scripted agents, the merge rule."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest

from goatherd.application import MERGE_PROPOSED_SCHEMA_REF
from goatherd.demo.agents import AGENTS, StepKind, agent_named
from goatherd.demo.layout import DemoLayout
from goatherd.demo.project import (
    BROKEN_MEDIAN,
    FIXED_MEDIAN,
    PROJECT_MODULE,
    changed_paths,
    create_project,
    run_tests,
)
from goatherd.demo.rules import blocked_scope_may_not_merge
from goatherd.domain import DECLARATION, InterventionType


@dataclass(frozen=True)
class Event:
    trace_owner_id: str
    schema_ref: str = MERGE_PROPOSED_SCHEMA_REF
    kind_label: str = "merge:proposed"
    mode: str = DECLARATION
    payload: dict[str, object] = field(default_factory=dict)


class TestTheSampleProject:
    def test_it_is_the_same_commit_on_every_machine(self, tmp_path):
        first = create_project(tmp_path / "a")
        second = create_project(tmp_path / "b")
        assert first == second
        assert changed_paths(tmp_path / "a") == ()

    def test_its_tests_fail_until_the_median_is_fixed(self, tmp_path):
        project = tmp_path / "p"
        create_project(project)
        before = run_tests(project)
        assert not before.passed
        assert before.summary == "FAILED (failures=1)"
        (project / PROJECT_MODULE).write_text(BROKEN_MEDIAN)
        assert run_tests(project).summary == "FAILED (failures=1)"
        (project / PROJECT_MODULE).write_text(FIXED_MEDIAN)
        assert run_tests(project).passed
        assert changed_paths(project) == (PROJECT_MODULE,)

    def test_an_existing_target_is_refused_and_left_alone(self, tmp_path):
        target = tmp_path / "p"
        target.mkdir()
        (target / "keep.txt").write_text("mine")
        with pytest.raises(FileExistsError):
            create_project(target)
        assert [p.name for p in target.iterdir()] == ["keep.txt"]
        assert not (tmp_path / "p.creating").exists()


class TestTheAgents:
    def test_there_is_one_reckless_one_hasty_and_one_careful_agent(self):
        assert [a.name for a in AGENTS] == ["reckless", "hasty", "careful"]
        kinds = [step.kind for step in agent_named("careful").steps]
        assert kinds.index(StepKind.CHECKPOINT) < kinds.index(StepKind.RESTORE)
        assert agent_named("reckless").steps[0].kind is StepKind.BASH

    def test_an_unknown_agent_is_named_in_the_error(self):
        with pytest.raises(KeyError, match="no demo agent named 'lazy'"):
            agent_named("lazy")


class TestTheMergeRule:
    def test_it_denies_the_merge_of_a_scope_with_a_blocked_call(self):
        rule = blocked_scope_may_not_merge(
            lambda owner: ["blocked"] if owner == "bad" else []
        )
        event = Event("bad")
        assert rule.match(event)
        verdict = rule.action(event)
        assert verdict is not None
        assert verdict.type is InterventionType.DENY
        assert verdict.scope_id == "scope:bad"
        assert rule.action(Event("good")) is None

    def test_it_ignores_recorded_proposals_and_other_events(self):
        rule = blocked_scope_may_not_merge(lambda owner: ["blocked"])
        assert not rule.match(Event("bad", mode="capture"))
        assert not rule.match(Event("bad", schema_ref="yaah.tool.bash.v1"))


class TestTheLayout:
    def test_each_attempt_gets_its_own_worktree_beside_the_project(self):
        layout = DemoLayout(Path("/d"))
        assert layout.worktree_for("demo:main:attempt-1") == Path(
            "/d/worktrees/attempt-1"
        )
        assert layout.worktree_for("demo:main:round-2-attempt-0") == Path(
            "/d/worktrees/round-2-attempt-0"
        )
        assert layout.project == Path("/d/project")
        assert layout.trace == Path("/d/trace.sqlite")
