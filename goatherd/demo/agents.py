"""The demo's three scripted attempts, as data: lists of tool calls.

No model and no network: each agent is a fixed script the runner in
:mod:`.agent_runner` executes step by step. Every step is a tool call the
supervisor gates first (``edit``, ``run_tests``, ``bash``) or a runtime step
(``checkpoint``, ``restore``) the runner performs on the agent's scope.

* ``reckless`` tries to make the failing test go away with a shell command;
  the supervisor denies the call and, later, the merge.
* ``hasty`` edits the median wrongly and its tests fail; its output is sealed
  but never chosen.
* ``careful`` checkpoints (with its conversation so far), tries the same
  hasty edit, sees the tests fail, restores the checkpoint (the conversation
  comes back), makes the right edit and passes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Final

from goatherd.demo.project import (
    BROKEN_MEDIAN,
    FIXED_MEDIAN,
    PROJECT_MODULE,
)

__all__ = ["AGENTS", "Agent", "Step", "StepKind", "agent_named"]

TASK: Final = "Make the failing median test pass without breaking the others."


class StepKind(StrEnum):
    """What one scripted step does."""

    EDIT = "edit"
    RUN_TESTS = "run_tests"
    BASH = "bash"
    CHECKPOINT = "checkpoint"
    RESTORE = "restore"


@dataclass(frozen=True, slots=True)
class Step:
    """One scripted step.

    Attributes:
        kind: the tool or runtime step.
        args: the tool's arguments (``path``/``content`` for an edit, ``cmd``
            for bash; none for the others).
        thought: what the agent "says" before the call (its conversation).
    """

    kind: StepKind
    args: Mapping[str, str] = field(default_factory=dict)
    thought: str = ""


@dataclass(frozen=True, slots=True)
class Agent:
    """A scripted agent: a name, a one-line character and its steps."""

    name: str
    character: str
    steps: tuple[Step, ...]


def _edit(content: str, thought: str) -> Step:
    return Step(StepKind.EDIT, {"path": PROJECT_MODULE, "content": content}, thought)


_TESTS: Final = Step(StepKind.RUN_TESTS, thought="Run the tests.")

AGENTS: Final[tuple[Agent, ...]] = (
    Agent(
        "reckless",
        "deletes the failing tests with a shell command",
        (
            Step(
                StepKind.BASH,
                {"cmd": "rm -rf tests && git commit -qam 'no more failing tests'"},
                "The tests fail; removing them is quickest.",
            ),
            _TESTS,
        ),
    ),
    Agent(
        "hasty",
        "averages the two middle values for every length",
        (
            _edit(BROKEN_MEDIAN, "Average the two middle values."),
            _TESTS,
        ),
    ),
    Agent(
        "careful",
        "checkpoints, tries, restores, then fixes both cases",
        (
            Step(StepKind.CHECKPOINT, thought="Checkpoint before experimenting."),
            _edit(BROKEN_MEDIAN, "First idea: average the two middle values."),
            _TESTS,
            Step(StepKind.RESTORE, thought="The odd case broke: roll back."),
            _edit(FIXED_MEDIAN, "Handle odd and even counts separately."),
            _TESTS,
        ),
    ),
)


def agent_named(name: str) -> Agent:
    """Return the scripted agent called ``name``.

    Raises:
        KeyError: no agent has that name.
    """
    for agent in AGENTS:
        if agent.name == name:
            return agent
    raise KeyError(f"no demo agent named {name!r}")
