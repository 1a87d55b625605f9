"""A server killed at every write boundary; a restart recovers from the trace.

``--crash-after N`` SIGKILLs the server right after its N-th committed path
entry. For every N the session reaches, a fresh server then serves the same
trace: the environment is listed and resumed (or, if the kill came before
its fork, no trace of it is left but a closed call), the agent's session is
done again to its end, the human settles the proposal, and the trace
verifies with every call answered exactly once.

Every server is ``goatherd mcp`` run as a fork of one pre-imported Python
(``tests/zygote.py``): a real process, killed for real, without paying the
SDK's import for each of the eighty or so starts.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from returns.result import Success

from goatherd.infrastructure import open_runtime
from goatherd.integrations.mcp import root_owner_for
from goatherd.integrations.mcp.recording import is_call, is_result
from tests.mcp.agents import Agent, agent, server_parameters
from tests.mcp.conftest import git, make_project, needs_landlock
from tests.mcp.human import goatherd, manager_for, settle
from tests.zygote import Zygote, zygote

pytestmark = [needs_landlock, pytest.mark.integration]


async def _work(me: Agent) -> str:
    """The agent's session after its environment is open; returns the output."""
    await me.ok("write_file", path="calc.py", content="def add(a, b):\n    1/0\n")
    checkpoint = await me.ok("checkpoint", conversation="before the fix")
    await me.ok("edit_file", path="calc.py", old_text="1/0", new_text="return a * b")
    restored = await me.ok("restore", checkpoint_id=checkpoint["checkpoint_id"])
    assert restored["conversation"] == "before the fix"
    await me.ok("edit_file", path="calc.py", old_text="1/0", new_text="return a + b")
    ran = await me.ok("run", command="python3 -m unittest -q")
    assert ran["exit_code"] == 0
    proposed = await me.ok("propose", summary="fixed")
    return str(proposed["output_id"])


def _crashing_run(
    project: Path, db: str, worktrees: Path, after: int, zygote: Zygote
) -> bool:
    """Run the session on a server that dies after ``after`` entries."""
    params = server_parameters(
        project, db, worktrees, "--crash-after", str(after), zygote=zygote
    )

    async def main() -> None:
        async with agent(params) as me:
            await me.open("crashy")
            await _work(me)

    try:
        anyio.run(main)
    except Exception:  # the connection broke: the server was killed
        return True
    return False


def _restarted_run(project: Path, db: str, worktrees: Path, zygote: Zygote) -> str:
    async def main() -> str:
        params = server_parameters(project, db, worktrees, zygote=zygote)
        async with agent(params) as me:
            listed = await me.ok("list_environments")
            active = [e for e in listed["environments"] if e["state"] == "active"]
            assert len(active) <= 1
            if active:
                resumed = await me.ok(
                    "open_environment", environment_id=active[0]["environment_id"]
                )
                me.environment = str(resumed["environment_id"])
            else:
                await me.open("fresh")
            return await _work(me)

    return anyio.run(main)


def _entries(db: str, project: Path) -> int:
    """Count the path entries of the repository's root and environments."""
    root = root_owner_for(project)
    with open_runtime(db, bus=False) as runtime:
        store = runtime.store
        owners = {root} | {
            e.record.trace_owner_id
            for e in store.read_log(-1, 10**6)
            if e.record.trace_owner_id.startswith(root + ":")
        }
        return sum(len(store.read_path(owner)) for owner in owners)


@pytest.fixture(scope="module")
def servers() -> Iterator[Zygote]:
    """Each round starts two servers: forks of one pre-imported Python."""
    with zygote(PRELOAD) as started:
        yield started


@pytest.fixture(scope="module")
def session_entries(tmp_path_factory: pytest.TempPathFactory, servers: Zygote) -> int:
    """How many path entries one uninterrupted session commits."""
    case = tmp_path_factory.mktemp("count")
    project = make_project(case / "project")
    db = str(case / "trace.sqlite")
    before = _entries(db, project) if Path(db).exists() else 0
    assert not _crashing_run(project, db, case / "w", 10**9, servers)
    return _entries(db, project) - before


def _check(project: Path, db: str, worktrees: Path) -> None:
    verified = goatherd("verify", db)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    root = root_owner_for(project)
    with open_runtime(db, bus=False) as runtime:
        store = runtime.store
        owners = {root} | {
            e.record.trace_owner_id
            for e in store.read_log(-1, 10**6)
            if e.record.trace_owner_id.startswith(root + ":")
        }
        entries = [e for owner in owners for e in store.read_path(owner)]
    answers = [
        p
        for e in entries
        if is_result(e)
        for p in e.record.envelope.caused_by_record_ids
    ]
    for call in (e for e in entries if is_call(e)):
        assert answers.count(call.record.record_id) == 1, call.record.payload
    listed = git(project, "worktree", "list", "--porcelain")
    for path in worktrees.iterdir() if worktrees.exists() else ():
        if path.is_dir() and not path.name.endswith(".tmp"):
            assert str(path) in listed, f"stray directory {path.name}"


CHUNKS = 4
PRELOAD = ["goatherd.cli", "goatherd.cli.mcp_cmd", "goatherd.integrations.mcp"]


@pytest.mark.slow
@pytest.mark.parametrize("chunk", range(CHUNKS))
def test_a_server_killed_at_every_write_boundary_recovers(
    tmp_path: Path, session_entries: int, servers: Zygote, chunk: int
) -> None:
    """Each chunk takes every CHUNKS-th boundary, in one repository and trace."""
    assert session_entries > 20
    project = make_project(tmp_path / "project")
    db = str(tmp_path / "trace.sqlite")
    worktrees = tmp_path / "worktrees"
    output = ""
    for after in range(1 + chunk, session_entries + 1, CHUNKS):
        if output:  # the previous round's proposal: turned down through the API
            # (the command line settles the last one; a process per round
            # would cost the suite a minute)
            with manager_for(db, project) as mgr:
                assert isinstance(mgr.settle(output, "discarded"), Success)
        crashed = _crashing_run(project, db, worktrees, after, servers)
        assert crashed, f"the server outlived {after} entries"
        output = _restarted_run(project, db, worktrees, servers)
    assert settle(db, output, "select") == ""
    assert (project / "calc.py").read_text() == "def add(a, b):\n    return a + b\n"
    _check(project, db, worktrees)
