"""The tools against a real repository, a real trace and Landlock.

Every call is recorded (a declaration before, a capture after, on the
environment's path), the supervisor's gate decides on each, and a call that
cannot act changes nothing in the worktree.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import cast

import pytest
from returns.result import Success

from goatherd.application import Supervisor
from goatherd.domain import (
    CAPTURE,
    DECLARATION,
    Intervention,
    InterventionType,
    LogEntry,
    ParentMovedError,
    SupervisionRule,
    SupervisorIntervened,
    decode_fact,
    scope_id_for_owner,
)
from goatherd.infrastructure import open_runtime
from goatherd.integrations.mcp import (
    DESTRUCTIVE_COMMAND_RULE,
    EnvironmentUnavailableError,
    ToolInputError,
    WorkspaceTools,
)
from goatherd.integrations.mcp.recording import (
    SERVER_STARTED_SCHEMA,
    CallRecorder,
    SessionInfo,
    is_call,
    is_result,
)
from tests.mcp.conftest import ToolsFactory, git, make_project, needs_landlock
from tests.mcp.human import goatherd, manager_for

pytestmark = [needs_landlock, pytest.mark.integration]


def _open(tools: WorkspaceTools, name: str = "work") -> str:
    reply = tools.open_environment(name)
    assert not reply.is_error, reply.text
    return str(reply.data["environment_id"])


def _owner(tools: WorkspaceTools, env: str) -> str:
    return f"{tools.environments.root_owner}:{env}"


def _calls_and_results(
    tools: WorkspaceTools, owner: str
) -> tuple[list[LogEntry], list[LogEntry]]:
    entries = tools.store.read_path(owner)
    return [e for e in entries if is_call(e)], [e for e in entries if is_result(e)]


def _worktree(tools: WorkspaceTools, env: str) -> Path:
    return tools.environments.lookup(env).worktree


def _status(worktree: Path) -> str:
    return git(worktree, "status", "--porcelain", "--untracked-files=all")


def test_an_environment_holds_the_repository_as_it_stands(
    make_tools: ToolsFactory, project: Path
) -> None:
    (project / "calc.py").write_text("def add(a, b):\n    return a - b  # wip\n")
    tools = make_tools()
    env = _open(tools, "Fix the add bug!")
    assert env.startswith("fix-the-add-bug-")
    worktree = _worktree(tools, env)
    assert worktree.parent == project.parent / "worktrees"
    assert (worktree / "calc.py").read_text().endswith("# wip\n")
    assert (worktree / "test_calc.py").exists()
    assert Path(f"{worktree}.tmp").is_dir()


def test_every_call_is_a_declaration_then_a_capture_on_the_environment_path(
    make_tools: ToolsFactory,
) -> None:
    tools = make_tools()
    env = _open(tools)
    replies = [
        tools.run(env, "python3 -m unittest -q"),
        tools.read_file(env, "calc.py"),
        tools.edit_file(env, "calc.py", "a - b", "a + b"),
        tools.write_file(env, "NOTES.md", "fixed add\n"),
        tools.list_files(env, "", recursive=True),
        tools.run(env, "python3 -m unittest -q"),
        tools.diff(env),
        tools.propose(env, "add adds"),
    ]
    assert [r.is_error for r in replies] == [False] * len(replies)
    assert replies[0].data["exit_code"] == 1
    assert replies[5].data["exit_code"] == 0
    assert "+    return a + b" in str(replies[6].data["diff"])
    calls, results = _calls_and_results(tools, _owner(tools, env))
    # The open's declaration is on the root path; its capture on the environment's.
    assert len(calls) == len(replies)
    assert len(results) == len(replies) + 1
    answered = {p for r in results for p in r.record.envelope.caused_by_record_ids}
    assert {c.record.record_id for c in calls} <= answered
    run_call = calls[0].record
    assert (run_call.envelope.mode, run_call.fact_kind) == (DECLARATION, "bash")
    assert run_call.payload["cmd"] == "python3 -m unittest -q"
    assert run_call.payload["session"] == tools.session
    last_run = results[6].record
    assert last_run.envelope.mode == CAPTURE
    assert (last_run.payload["success"], last_run.payload["exit_code"]) == (True, 0)


def test_read_file_numbers_the_lines_of_a_range_when_asked(
    make_tools: ToolsFactory,
) -> None:
    tools = make_tools()
    env = _open(tools)
    tools.write_file(env, "long.txt", "".join(f"line {n}\n" for n in range(1, 13)))
    plain = tools.read_file(env, "long.txt", start_line=9, max_lines=2)
    assert plain.text.startswith("line 9\nline 10\n")
    numbered = tools.read_file(
        env, "long.txt", start_line=9, max_lines=2, line_numbers=True
    )
    assert numbered.text.startswith(" 9\tline 9\n10\tline 10\n")
    assert "start_line=11" in numbered.text
    assert numbered.data["content"] == "line 9\nline 10\n"


def test_propose_on_an_unchanged_worktree_returns_the_standing_proposal(
    make_tools: ToolsFactory,
) -> None:
    tools = make_tools()
    env = _open(tools)
    tools.edit_file(env, "calc.py", "a - b", "a + b")
    first = tools.propose(env, "add adds")
    again = tools.propose(env, "add adds, really")
    assert not again.is_error
    assert again.data["output_id"] == first.data["output_id"]
    assert again.data["unchanged"] is True
    assert "nothing changed since" in again.text
    scope = tools.environments.owner_of(env)
    manager = tools.environments.manager
    assert len(manager.outputs_for_scope("scope:" + scope)) == 1
    tools.write_file(env, "NOTES.md", "more\n")
    third = tools.propose(env)
    assert third.data["output_id"] != first.data["output_id"]
    assert third.data["unchanged"] is False
    assert len(manager.outputs_for_scope("scope:" + scope)) == 2


def test_delete_and_move_stay_inside_the_worktree_and_are_recorded(
    make_tools: ToolsFactory, tmp_path: Path
) -> None:
    tools = make_tools()
    env = _open(tools)
    worktree = tmp_path / "worktrees" / env
    tools.write_file(env, "scratch/a.txt", "a\n")
    tools.write_file(env, "scratch/deep/b.txt", "b\n")
    moved = tools.move_path(env, "calc.py", "src/calc.py")
    assert not moved.is_error, moved.text
    assert (worktree / "src" / "calc.py").is_file()
    assert not (worktree / "calc.py").exists()
    refused = tools.delete_path(env, "scratch")
    assert refused.is_error
    assert "pass recursive" in refused.text
    removed = tools.delete_path(env, "scratch", recursive=True)
    assert not removed.is_error
    assert removed.data["kind"] == "directory"
    assert not (worktree / "scratch").exists()
    outside = tmp_path / "outside.txt"
    outside.write_text("keep\n")
    (worktree / "link").symlink_to(outside)
    assert tools.delete_path(env, "link").data["kind"] == "symlink"
    assert outside.read_text() == "keep\n"
    for bad in (
        tools.delete_path(env, "../outside.txt"),
        tools.delete_path(env, ".git"),
        tools.move_path(env, "src/calc.py", "../escaped.py"),
        tools.move_path(env, "src", "src/inner"),
        tools.move_path(env, "missing.py", "x.py"),
        tools.delete_path(env, "missing.py"),
    ):
        assert bad.is_error, bad.text
        assert "\n" not in bad.text
    tools.write_file(env, "taken.py", "x\n")
    assert "exists" in tools.move_path(env, "src/calc.py", "taken.py").text
    assert outside.read_text() == "keep\n"
    assert not (tmp_path / "worktrees" / "escaped.py").exists()
    calls, _ = _calls_and_results(tools, _owner(tools, env))
    kinds = [c.record.fact_kind for c in calls]
    assert "mcp:delete_path" in kinds
    assert "mcp:move_path" in kinds
    diff = str(tools.diff(env).data["diff"])
    assert "src/calc.py" in diff


def test_a_destructive_command_is_denied_recorded_and_never_runs(
    make_tools: ToolsFactory,
) -> None:
    tools = make_tools()
    env = _open(tools)
    reply = tools.run(env, "cd . && rm -rf test_calc.py calc.py")
    assert reply.is_error
    assert DESTRUCTIVE_COMMAND_RULE in reply.text
    assert (_worktree(tools, env) / "calc.py").exists()
    owner = _owner(tools, env)
    calls, results = _calls_and_results(tools, owner)
    denied = results[-1].record.payload
    assert denied["success"] is False
    assert cast("dict[str, object]", denied["denied"])["rule"] == (
        DESTRUCTIVE_COMMAND_RULE
    )
    decisions = [
        decode_fact(e.record).event
        for e in tools.store.read_path(owner)
        if e.record.envelope.schema_ref == SupervisorIntervened.SCHEMA
    ]
    assert len(decisions) == 1
    decision = decisions[0]
    assert isinstance(decision, SupervisorIntervened)
    assert (decision.rule, decision.type, decision.source) == (
        DESTRUCTIVE_COMMAND_RULE,
        "deny",
        "gate",
    )
    assert decision.trigger_record_id == calls[-1].record.record_id


def test_an_unknown_environment_records_nothing(make_tools: ToolsFactory) -> None:
    tools = make_tools()
    store = tools.store
    before = store.max_position()
    for bad in ("env-00000000", "scope:other:env-1", "../../etc", "x" * 5000, 42):
        with pytest.raises(EnvironmentUnavailableError):
            tools.run(bad, "ls")  # type: ignore[arg-type]
    assert store.max_position() == before


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("read_file", {"path": "../project/calc.py"}),
        ("read_file", {"path": "/etc/passwd"}),
        ("write_file", {"path": "../escape.txt", "content": "x"}),
        ("write_file", {"path": ".git/config", "content": "x"}),
        ("edit_file", {"path": "calc.py", "old_text": "nope", "new_text": "x"}),
        ("list_files", {"path": "../.."}),
        ("run", {"command": "ls", "cwd": "../.."}),
        ("restore", {"checkpoint_id": "cp:nope:1"}),
        ("restore", {"checkpoint_id": "cp:\nforged line"}),
        ("write_file", {"path": "calc.py/x\ny.txt", "content": "x"}),
        ("read_file", {"path": "two\nlines.txt"}),
    ],
)
def test_a_refused_call_is_recorded_and_changes_nothing(
    make_tools: ToolsFactory, project: Path, tool: str, args: dict[str, object]
) -> None:
    tools = make_tools()
    env = _open(tools)
    worktree = _worktree(tools, env)
    status = _status(worktree)
    files = sorted(p.name for p in worktree.parent.iterdir())
    reply = getattr(tools, tool)(env, **args)
    assert reply.is_error
    assert "\n" not in reply.text
    assert _status(worktree) == status
    assert sorted(p.name for p in worktree.parent.iterdir()) == files
    assert git(project, "status", "--porcelain") == ""
    _, results = _calls_and_results(tools, _owner(tools, env))
    assert results[-1].record.payload["success"] is False
    assert results[-1].record.payload["error"] == reply.text


def test_a_file_name_that_is_not_utf8_is_shown_escaped_and_not_proposed(
    make_tools: ToolsFactory,
) -> None:
    tools = make_tools()
    env = _open(tools)
    made = tools.run(env, "touch \"$(printf 'bad\\377name')\"")
    assert made.data["exit_code"] == 0, made.text
    listed = tools.list_files(env)
    assert "bad\\xffname (0 bytes)" in listed.text.splitlines()
    shown = tools.diff(env)
    assert not shown.is_error, shown.text
    assert shown.data["files"] == ["bad\\xffname"]
    proposed = tools.propose(env)
    assert proposed.is_error
    assert proposed.text == (
        "the file name bad\\xffname is not valid UTF-8, so it cannot be proposed:"
        " rename or remove it first"
    )
    assert not tools.environments.manager.outputs_for_scope(
        f"scope:{_owner(tools, env)}"
    )
    calls, results = _calls_and_results(tools, _owner(tools, env))
    assert len(calls) == 4
    assert len(results) == 5  # and the open's capture
    assert tools.run(env, "rm bad*").data["exit_code"] == 0
    assert not tools.propose(env).is_error


def test_a_deleted_dot_git_breaks_only_its_environment(
    make_tools: ToolsFactory, tmp_path: Path
) -> None:
    around = make_project(tmp_path / "home")  # the worktrees lie in another repo
    tools = make_tools(worktrees=around / "state" / "worktrees")
    env = _open(tools)
    checkpoint = str(tools.checkpoint(env).data["checkpoint_id"])
    assert tools.run(env, "rm .git").data["exit_code"] == 0
    for reply in (
        tools.diff(env),
        tools.checkpoint(env),
        tools.restore(env, checkpoint),
        tools.propose(env),
    ):
        assert reply.is_error
        assert "\n" not in reply.text, reply.text
    assert git(around, "status", "--porcelain") == "?? state/\n"
    assert git(around, "log", "--format=%s") == "start\n"
    calls, results = _calls_and_results(tools, _owner(tools, env))
    assert len(results) == len(calls) + 1  # and the open's capture


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda t, e: t.run(e, ""), "empty"),
        (lambda t, e: t.run(e, "ls\0x"), "NUL"),
        (lambda t, e: t.run(e, "ls", timeout_seconds=0), "timeout_seconds"),
        (lambda t, e: t.run(e, "ls", timeout_seconds=float("nan")), "timeout_seconds"),
        (lambda t, e: t.run(e, "ls", timeout_seconds=True), "timeout_seconds"),
        (lambda t, e: t.run(e, 5), "command must be a string"),
        (lambda t, e: t.read_file(e, "calc.py", start_line=0), "start_line"),
        (lambda t, e: t.read_file(e, "calc.py", max_lines="9"), "max_lines"),
        (lambda t, e: t.write_file(e, "a.txt", "\ud800"), "lone surrogate"),
        (lambda t, e: t.write_file(e, "a.txt", "x" * (5 << 20)), "at most"),
        (
            lambda t, e: t.edit_file(e, "calc.py", "a", "b", replace_all="yes"),
            "true or false",
        ),
        (lambda t, e: t.list_files(e, "", recursive=1), "true or false"),
        (lambda t, e: t.diff(e, max_lines=-1), "max_lines"),
        (
            lambda t, e: t.checkpoint(e, conversation=b"x"),
            "conversation must be a string",
        ),
    ],
)
def test_bad_arguments_are_refused_before_anything_is_recorded(
    make_tools: ToolsFactory,
    call: Callable[[WorkspaceTools, str], object],
    message: str,
) -> None:
    tools = make_tools()
    env = _open(tools)
    store = tools.store
    before = store.max_position()
    with pytest.raises(ToolInputError, match=message):
        call(tools, env)
    assert store.max_position() == before


def test_huge_output_is_bounded_in_the_reply_and_in_the_trace(
    make_tools: ToolsFactory,
) -> None:
    tools = make_tools(output_limit=4096)
    env = _open(tools)
    reply = tools.run(env, "head -c 50000000 /dev/zero | tr '\\0' x; echo END >&2")
    assert not reply.is_error
    assert reply.data["stdout_dropped_bytes"] == 50_000_000 - 4096
    assert len(str(reply.data["stdout"])) < 4096 + 100
    assert reply.data["stderr"] == "END\n"
    _, results = _calls_and_results(tools, _owner(tools, env))
    assert len(json.dumps(results[-1].record.payload)) < 20_000


def test_a_command_that_outruns_its_timeout_is_killed_and_recorded(
    make_tools: ToolsFactory,
) -> None:
    tools = make_tools()
    env = _open(tools)
    reply = tools.run(env, "sleep 30 & sleep 30", timeout_seconds=0.5)
    assert reply.is_error
    assert "timeout" in reply.text
    _, results = _calls_and_results(tools, _owner(tools, env))
    assert results[-1].record.payload["timed_out"] is True


def test_a_timed_out_command_returns_what_it_printed_before_the_kill(
    make_tools: ToolsFactory,
) -> None:
    tools = make_tools()
    env = _open(tools)
    reply = tools.run(
        env, "echo started; echo warming up >&2; sleep 30", timeout_seconds=1.5
    )
    assert reply.is_error
    assert reply.data["timed_out"] is True
    assert reply.data["stdout"] == "started\n"
    assert reply.data["stderr"] == "warming up\n"
    assert "--- stdout before the kill ---\nstarted" in reply.text
    _, results = _calls_and_results(tools, _owner(tools, env))
    assert results[-1].record.payload["stdout"] == "started\n"


def test_commands_start_from_a_minimal_environment_with_a_writable_home(
    make_tools: ToolsFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-not-for-agents")
    monkeypatch.setenv("PROJECT_FLAG", "passed on purpose")
    tools = make_tools(pass_env=("PROJECT_FLAG",))
    env = _open(tools)
    reply = tools.run(
        env,
        'echo "key=${OPENAI_API_KEY:-none}"; echo "flag=$PROJECT_FLAG";'
        ' echo "home=$HOME"; touch "$HOME/.probe" && echo home-writable;'
        ' mkdir -p "$XDG_CACHE_HOME/pip" && echo cache-writable; echo "path=$PATH"',
    )
    assert not reply.is_error, reply.text
    out = str(reply.data["stdout"])
    assert "key=none" in out
    assert "flag=passed on purpose" in out
    assert "home-writable" in out
    assert "cache-writable" in out
    home = next(li for li in out.splitlines() if li.startswith("home="))[5:]
    assert home.endswith(".tmp/home")
    assert home != os.environ.get("HOME")
    assert "path=" + os.environ["PATH"] in out


def test_commands_write_only_their_worktree_and_tmp(
    make_tools: ToolsFactory, project: Path, tmp_path: Path
) -> None:
    tools = make_tools()
    env = _open(tools)
    worktree = _worktree(tools, env)
    target = project / "calc.py"
    assert tools.run(env, f"echo pwned > {target}").data["exit_code"] != 0
    assert tools.run(env, "echo ok > $TMPDIR/t").data["exit_code"] == 0
    assert tools.run(env, "echo hi > here").data["exit_code"] == 0
    assert "pwned" not in target.read_text()
    assert (Path(f"{worktree}.tmp") / "t").read_text() == "ok\n"
    assert (worktree / "here").read_text() == "hi\n"


def test_checkpoint_and_restore_roll_back_once_with_the_conversation(
    make_tools: ToolsFactory,
) -> None:
    tools = make_tools()
    env = _open(tools)
    other = _open(tools, "other")
    worktree = _worktree(tools, env)
    tools.write_file(env, "calc.py", "good\n")
    cp = tools.checkpoint(env, conversation='[{"role": "user"}]', label="before")
    checkpoint_id = str(cp.data["checkpoint_id"])
    tools.write_file(env, "calc.py", "broken\n")
    tools.write_file(env, "junk.txt", "junk\n")
    assert tools.restore(other, checkpoint_id).is_error
    restored = tools.restore(env, checkpoint_id)
    assert not restored.is_error, restored.text
    assert restored.data["conversation"] == '[{"role": "user"}]'
    assert (worktree / "calc.py").read_text() == "good\n"
    assert not (worktree / "junk.txt").exists()
    again = tools.restore(env, checkpoint_id)
    assert again.is_error


def test_guidance_and_halts_from_another_process_reach_the_agent(
    make_tools: ToolsFactory, sqlite_trace: str
) -> None:
    tools = make_tools()
    env = _open(tools)
    scope_id = f"scope:{_owner(tools, env)}"
    with open_runtime(sqlite_trace, bus=False) as other:
        supervisor = Supervisor(other.new_manager(), None, recorder=other.store)
        assert isinstance(supervisor.inject(scope_id, "run the tests first"), Success)
    reply = tools.list_files(env)
    assert reply.guidance == ("run the tests first",)
    assert tools.list_files(env).guidance == ()
    with open_runtime(sqlite_trace, bus=False) as other:
        supervisor = Supervisor(other.new_manager(), None, recorder=other.store)
        supervisor.halt(scope_id)
    with pytest.raises(EnvironmentUnavailableError, match="halted by the supervisor"):
        tools.list_files(env)
    listed = cast(
        "list[dict[str, object]]", tools.list_environments().data["environments"]
    )
    assert [e["state"] for e in listed] == ["halted"]


def test_the_built_in_guides_speak_up(make_tools: ToolsFactory) -> None:
    tools = make_tools()
    env = _open(tools)
    guidance = [tools.read_file(env, "calc.py").guidance for _ in range(5)]
    assert guidance[:4] == [()] * 4
    assert any("repeated 5 times" in g for g in guidance[4])
    failing = [tools.run(env, f"exit {i + 1}").guidance for i in range(5)]
    assert any("error rate" in g for g in failing[-1])


def test_a_restarted_server_closes_what_a_dead_one_left_open(
    make_tools: ToolsFactory, sqlite_trace: str
) -> None:
    first = make_tools()
    env = _open(first)
    owner = _owner(first, env)
    store = first.store
    dead = SessionInfo("deadbeef", SessionInfo.here().host, 2**22 + 7, 1)
    recorder = CallRecorder(store, dead)
    recorder.started(first.environments.root_owner, {})
    recorder.declare(owner, "run", {"cmd": "make", "cwd": "", "timeout_seconds": 5})
    alive = CallRecorder(store, SessionInfo.here())
    alive.started(first.environments.root_owner, {})
    alive.declare(owner, "run", {"cmd": "still running", "cwd": ""})

    second = make_tools()
    reply = second.open_environment(environment_id=env)
    assert not reply.is_error
    assert reply.data["resumed"] is True
    calls, results = _calls_and_results(second, owner)
    closed = [r.record.payload for r in results if r.record.payload.get("interrupted")]
    assert len(closed) == 1
    open_calls = {c.record.record_id for c in calls} - {
        p for r in results for p in r.record.envelope.caused_by_record_ids
    }
    assert len(open_calls) == 1, "the live session's call stays open"
    assert second.run(env, "true").data["exit_code"] == 0
    sessions = [
        e.record.payload["session"]
        for e in store.read_path(first.environments.root_owner)
        if e.record.envelope.schema_ref == SERVER_STARTED_SCHEMA
    ]
    assert first.session in sessions
    assert second.session in sessions


def test_two_servers_share_the_trace_and_settles_fast_forward(
    make_tools: ToolsFactory, project: Path, trace_url: str
) -> None:
    alice, bob = make_tools(trace_url), make_tools(trace_url)
    env_a, env_b = _open(alice, "alice"), _open(bob, "bob")
    listed = cast(
        "list[dict[str, object]]", bob.list_environments().data["environments"]
    )
    assert {e["environment_id"] for e in listed} == {env_a, env_b}
    alice.edit_file(env_a, "calc.py", "a - b", "a + b")
    bob.write_file(env_b, "NOTES.md", "bob was here\n")
    out_a = str(alice.propose(env_a).data["output_id"])
    out_b = str(bob.propose(env_b).data["output_id"])
    with manager_for(trace_url, project) as manager:
        assert isinstance(manager.settle(out_a, "selected"), Success)
        moved = manager.settle(out_b, "selected")
        assert isinstance(moved.failure(), ParentMovedError)
        assert isinstance(manager.settle(out_b, "applied"), Success)
    assert "a + b" in (project / "calc.py").read_text()
    assert (project / "NOTES.md").read_text() == "bob was here\n"
    for tools, env in ((alice, env_a), (bob, env_b)):
        with pytest.raises(EnvironmentUnavailableError, match="settled"):
            tools.run(env, "true")
    assert not (project.parent / "worktrees" / env_a).exists()
    check = goatherd("verify", trace_url)
    assert check.returncode == 0, check.stdout + check.stderr


def test_a_hosts_own_rules_judge_opens_and_proposals(
    make_tools: ToolsFactory,
) -> None:
    def deny(label: str, reason: str) -> SupervisionRule:
        return SupervisionRule(
            f"no_{label}",
            lambda event: event.kind_label == f"mcp:{label}",
            lambda event: Intervention(
                InterventionType.DENY, scope_id_for_owner(event.trace_owner_id), reason
            ),
        )

    closed = make_tools(rules=(deny("open_environment", "the repository is frozen"),))
    reply = closed.open_environment("x")
    assert reply.is_error
    assert reply.text.endswith("(rule no_open_environment): the repository is frozen")
    assert closed.list_environments().data["environments"] == []

    strict = make_tools(rules=(deny("propose", "needs a review first"),))
    env = _open(strict)
    proposed = strict.propose(env)
    assert proposed.is_error
    assert "(rule no_propose)" in proposed.text
    assert not strict.environments.manager.outputs_for_scope(
        f"scope:{_owner(strict, env)}"
    )
