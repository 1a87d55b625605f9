"""Two agents, two ``goatherd mcp`` processes, one repository, one trace.

Each agent is the SDK's own client driving its own server over stdio, as an
MCP coding agent does. They work at the same time: open environments, edit,
run the tests; one tries ``rm -rf`` and is denied; one checkpoints, breaks
things and restores; both propose. A human then lists the environments and
reads both proposals' diffs from the command line, selects one, is refused
selecting its sibling onto the moved repository, and discards it; the test
checks the repository, the trace (``goatherd verify``; every tool call a
declaration with exactly one capture) and that the worktrees are gone.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import anyio
import pytest

from goatherd.domain import SupervisorIntervened, decode_fact
from goatherd.infrastructure import open_runtime
from goatherd.integrations.mcp import DESTRUCTIVE_COMMAND_RULE, root_owner_for
from goatherd.integrations.mcp.recording import is_call, is_result
from tests.mcp.agents import Agent, agent, server_parameters, text
from tests.mcp.conftest import git, needs_landlock
from tests.mcp.human import diff, goatherd, scopes, settle

pytestmark = [needs_landlock, pytest.mark.integration]
TESTS = "python3 -m unittest -q"


async def _alice(me: Agent) -> str:
    await me.open("alice")
    failing = await me.ok("run", command=TESTS)
    assert failing["exit_code"] == 1
    checkpoint = await me.ok(
        "checkpoint", conversation='[{"role": "user", "content": "fix add"}]'
    )
    await me.ok("write_file", path="calc.py", content="def add(a, b):\n    oops\n")
    await me.ok("write_file", path="scratch.txt", content="half-done\n")
    broken = await me.ok("run", command=TESTS)
    assert broken["exit_code"] != 0
    restored = await me.ok("restore", checkpoint_id=checkpoint["checkpoint_id"])
    assert restored["conversation"].startswith('[{"role": "user"')
    listing = await me.ok("list_files")
    assert "scratch.txt" not in {e["path"] for e in listing["entries"]}
    await me.ok("edit_file", path="calc.py", old_text="a - b", new_text="a + b")
    passing = await me.ok("run", command=TESTS)
    assert passing["exit_code"] == 0
    diff = await me.ok("diff")
    assert "+    return a + b" in diff["diff"]
    proposed = await me.ok("propose", summary="add adds")
    return str(proposed["output_id"])


async def _bob(me: Agent) -> str:
    await me.open("bob")
    denied = await me.call("run", command="rm -rf . && git checkout .")
    assert denied.is_error
    assert DESTRUCTIVE_COMMAND_RULE in text(denied)
    await me.ok("read_file", path="calc.py")
    await me.ok(
        "edit_file", path="calc.py", old_text="return a - b", new_text="return b + a"
    )
    await me.ok("write_file", path="NOTES.md", content="add is commutative\n")
    passing = await me.ok("run", command=TESTS)
    assert passing["exit_code"] == 0
    proposed = await me.ok("propose", summary="b + a")
    return str(proposed["output_id"])


@dataclass
class _Session:
    alice: Agent | None = None
    bob: Agent | None = None
    alice_output: str = ""
    bob_output: str = ""
    listed: list[dict[str, object]] = field(default_factory=list)


def _session(project: Path, db: str, worktrees: Path) -> _Session:
    outcome = _Session()

    async def main() -> None:
        parameters = server_parameters(project, db, worktrees)
        async with agent(parameters) as alice, agent(parameters) as bob:

            async def run_alice() -> None:
                outcome.alice_output = await _alice(alice)

            async def run_bob() -> None:
                outcome.bob_output = await _bob(bob)

            async with anyio.create_task_group() as group:
                group.start_soon(run_alice)
                group.start_soon(run_bob)
            outcome.alice, outcome.bob = alice, bob
            listed = await alice.ok("list_environments")
            outcome.listed = listed["environments"]

    anyio.run(main)
    return outcome


def test_two_agents_work_propose_and_a_human_settles(
    project: Path, tmp_path: Path, trace_url: str
) -> None:
    db = trace_url
    worktrees = tmp_path / "worktrees"
    outcome = _session(project, db, worktrees)
    alice, bob = outcome.alice, outcome.bob
    assert alice is not None
    assert bob is not None
    listed = {e["environment_id"] for e in outcome.listed}
    assert listed == {alice.environment, bob.environment}

    # The human lists the environments and reads the proposals...
    _human_sees_the_proposals(db, project, outcome)
    # ...selects one (a fast-forward), cannot select its sibling onto the
    # moved repository, and discards it: its worktree goes.
    assert settle(db, outcome.alice_output, "select") == ""
    refused = settle(db, outcome.bob_output, "select")
    assert "moved" in refused, refused
    assert settle(db, outcome.bob_output, "discard") == ""
    assert (project / "calc.py").read_text() == "def add(a, b):\n    return a + b\n"
    assert not (project / "NOTES.md").exists()
    assert not (project / "scratch.txt").exists()
    assert not (worktrees / bob.environment).exists()
    assert not (worktrees / alice.environment).exists()
    worktree_list = git(project, "worktree", "list", "--porcelain")
    assert str(worktrees) not in worktree_list
    again = settle(db, outcome.bob_output, "select")
    assert again, "an output settles exactly once"

    verified = goatherd("verify", db)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    _every_call_recorded(db, project, alice, bob)


def _human_sees_the_proposals(db: str, project: Path, outcome: _Session) -> None:
    assert outcome.alice is not None
    assert outcome.bob is not None
    listed = scopes(db)
    root = f"scope:{root_owner_for(project)}"
    tree = {scope["id"]: scope for scope in listed["scopes"]}
    alice_scope = f"{root}:{outcome.alice.environment}"
    bob_scope = f"{root}:{outcome.bob.environment}"
    assert sorted(tree[root]["children"]) == sorted([alice_scope, bob_scope])
    for scope, output in (
        (alice_scope, outcome.alice_output),
        (bob_scope, outcome.bob_output),
    ):
        assert [(o["id"], o["state"]) for o in tree[scope]["outputs"]] == [
            (output, "unconsumed")
        ]
    assert [c["scope_id"] for c in listed["checkpoints"]] == [alice_scope]
    assert "+    return a + b" in diff(db, outcome.alice_output)
    bobs = diff(db, outcome.bob_output)
    assert "+add is commutative" in bobs
    assert "+    return b + a" in bobs


def _every_call_recorded(db: str, project: Path, *agents: Agent) -> None:
    root = root_owner_for(project)
    with open_runtime(db, bus=False) as runtime:
        store = runtime.store
        for who in agents:
            owner = f"{root}:{who.environment}"
            entries = store.read_path(owner)
            calls = [e for e in entries if is_call(e)]
            results = [e for e in entries if is_result(e)]
            # The open's declaration and the listing sit on the root path.
            made = [tool for tool, _, _ in who.calls[1:] if tool != "list_environments"]
            assert len(calls) == len(made)
            answered = [
                p for r in results for p in r.record.envelope.caused_by_record_ids
            ]
            declared = [c.record.record_id for c in calls]
            assert sorted(answered) == sorted(
                [*declared, *[p for p in answered if p not in declared]]
            )
            assert all(answered.count(d) == 1 for d in declared)
            recorded = [
                c.record.envelope.schema_ref.removeprefix("mcp.tool.").removesuffix(
                    ".v1"
                )
                for c in calls
            ]
            assert recorded == made
        paths = [root, *(f"{root}:{who.environment}" for who in agents)]
        everything = [e for path in paths for e in store.read_path(path)]
        answers = [
            p
            for e in everything
            if is_result(e)
            for p in e.record.envelope.caused_by_record_ids
        ]
        root_calls = [e.record.record_id for e in store.read_path(root) if is_call(e)]
        assert len(root_calls) == 3  # two opens and a listing
        assert all(answers.count(call) == 1 for call in root_calls)
        bob_owner = f"{root}:{agents[1].environment}"
        decisions = [
            decode_fact(e.record).event
            for e in store.read_path(bob_owner)
            if e.record.envelope.schema_ref == SupervisorIntervened.SCHEMA
        ]
        assert [
            (d.rule, d.type) for d in decisions if isinstance(d, SupervisorIntervened)
        ] == [(DESTRUCTIVE_COMMAND_RULE, "deny")]
        assert len(decisions) == 1
