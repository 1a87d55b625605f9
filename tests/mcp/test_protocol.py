"""The server as an MCP client sees it: schemas, one-line errors, resources, HTTP.

Arguments that do not fit a tool's schema, an unknown tool, an unknown
environment and oversized values are refused with one line naming what was
wrong, before anything runs or is recorded.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import jsonschema  # type: ignore[import-untyped]  # a dependency of mcp
import pytest
from mcp import Client
from mcp_types import ReadResourceResult, TextResourceContents
from returns.result import Success

from goatherd.application import Supervisor
from goatherd.infrastructure import open_runtime
from goatherd.integrations.mcp import root_owner_for
from tests.mcp.agents import Agent, agent, server_parameters, text
from tests.mcp.conftest import git, needs_landlock

pytestmark = [needs_landlock, pytest.mark.integration]

BAD_CALLS: list[tuple[str, dict[str, Any], str]] = [
    ("run", {}, "missing argument 'command'"),
    ("run", {"command": 5}, "command"),
    ("run", {"command": "ls", "timeout_seconds": -1}, "timeout_seconds"),
    ("run", {"command": "ls", "timeout_seconds": "soon"}, "timeout_seconds"),
    ("run", {"command": "x" * 70_000}, "command"),
    ("write_file", {"path": "a.txt"}, "missing argument 'content'"),
    ("write_file", {"content": "x"}, "missing argument 'path'"),
    ("write_file", {"path": "a.txt", "content": "x" * (5 << 20)}, "at most"),
    ("edit_file", {"path": "calc.py", "old_text": "a"}, "missing argument 'new_text'"),
    ("read_file", {"path": ["calc.py"]}, "path"),
    ("read_file", {"path": "calc.py", "start_line": "one"}, "start_line"),
    ("list_files", {"recursive": "maybe"}, "recursive"),
    ("restore", {}, "missing argument 'checkpoint_id'"),
    ("open_environment", {"name": "n" * 300}, "name"),
    ("no_such_tool", {}, "Unknown tool"),
]


def _text_of(result: ReadResourceResult) -> str:
    content = result.contents[0]
    assert isinstance(content, TextResourceContents)
    return content.text


def _one_line(message: str) -> None:
    assert "\n" not in message.strip(), message
    assert "pydantic" not in message
    assert len(message) < 400


def _position(db: str) -> int:
    with open_runtime(db, bus=False) as runtime:
        return runtime.store.max_position()


def _tool_schemas(project: Path, tmp_path: Path) -> dict[str, Any]:
    """Every tool's input schema, as a real client lists them."""

    async def main() -> dict[str, Any]:
        params = server_parameters(project, str(tmp_path / "t.sqlite"), tmp_path / "w")
        async with agent(params) as me:
            listed = await me.client.list_tools()
            return {tool.name: tool.input_schema for tool in listed.tools}

    return anyio.run(main)


def test_tools_publish_schemas_with_their_required_fields(
    project: Path, tmp_path: Path
) -> None:
    schemas = _tool_schemas(project, tmp_path)
    assert set(schemas) == {
        "open_environment",
        "list_environments",
        "run",
        "read_file",
        "write_file",
        "edit_file",
        "list_files",
        "search",
        "tree",
        "apply_patch",
        "delete_path",
        "move_path",
        "checkpoint",
        "restore",
        "diff",
        "propose",
    }
    assert schemas["run"]["required"] == ["environment_id", "command"]
    assert set(schemas["edit_file"]["required"]) == {
        "environment_id",
        "path",
        "old_text",
        "new_text",
    }


PATCH = (
    "--- a/calc.py\n+++ b/calc.py\n@@ -1,2 +1,2 @@\n def add(a, b):\n"
    "-    return a - b\n+    return a + b\n"
)


def test_every_tool_declares_an_output_schema_its_results_match(
    project: Path, tmp_path: Path
) -> None:
    """Each tool is called once through a real session; success is validated."""

    async def main() -> tuple[dict[str, Any], list[tuple[str, Any, bool]]]:
        params = server_parameters(project, str(tmp_path / "t.sqlite"), tmp_path / "w")
        async with agent(params) as me:
            listed = await me.client.list_tools()
            schemas = {tool.name: tool.output_schema for tool in listed.tools}
            await me.open("schemas")
            checkpoint = await me.ok("checkpoint", label="before")
            steps: list[tuple[str, dict[str, Any]]] = [
                ("list_environments", {}),
                ("tree", {"depth": 2}),
                ("search", {"pattern": "def add"}),
                ("read_file", {"path": "calc.py", "line_numbers": True}),
                ("apply_patch", {"patch": PATCH}),
                ("write_file", {"path": "scratch/a.txt", "content": "a\n"}),
                (
                    "edit_file",
                    {"path": "scratch/a.txt", "old_text": "a", "new_text": "b"},
                ),
                ("list_files", {"recursive": True}),
                ("move_path", {"source": "scratch/a.txt", "destination": "b.txt"}),
                ("delete_path", {"path": "b.txt"}),
                ("run", {"command": "python3 -m unittest -q"}),
                ("run", {"command": "rm -r scratch"}),
                ("diff", {}),
                ("propose", {"summary": "fix add"}),
                ("restore", {"checkpoint_id": checkpoint["checkpoint_id"]}),
                ("open_environment", {"environment_id": me.environment}),
            ]
            seen = [(t, r.structured_content, r.is_error) for t, _, r in me.calls]
            for tool, args in steps:
                result = await me.call(tool, **args)
                seen.append((tool, result.structured_content, result.is_error))
            return schemas, seen

    schemas, seen = anyio.run(main)
    assert [name for name, schema in schemas.items() if not schema] == []
    assert {tool for tool, _, _ in seen} == set(schemas)
    for tool, content, is_error in seen:
        assert not is_error, (tool, content)
        jsonschema.validate(content, schemas[tool])
    ran = [content for tool, content, _ in seen if tool == "run"]
    assert "checkpoint_id" in ran[-1]


def _bounded(name: str, field: str, spec: dict[str, Any]) -> list[str]:
    """Return what is unbounded or undescribed about one argument's schema."""
    options = spec.get("anyOf", [spec])
    problems = [] if spec.get("description") else [f"{name}.{field}: no description"]
    for option in options:
        kind = option.get("type")
        if kind == "string" and "maxLength" not in option:
            problems.append(f"{name}.{field}: no maxLength")
        if kind in ("integer", "number"):
            if "maximum" not in option and "exclusiveMaximum" not in option:
                problems.append(f"{name}.{field}: no maximum")
            if "minimum" not in option and "exclusiveMinimum" not in option:
                problems.append(f"{name}.{field}: no minimum")
    return problems


def test_every_tool_argument_is_bounded_and_described(
    project: Path, tmp_path: Path
) -> None:
    schemas = _tool_schemas(project, tmp_path)
    problems = [
        problem
        for name, schema in schemas.items()
        for field, spec in schema.get("properties", {}).items()
        for problem in _bounded(name, field, spec)
    ]
    assert problems == []
    timeout = schemas["run"]["properties"]["timeout_seconds"]["anyOf"][0]
    assert timeout["maximum"] == 3600


def test_bad_arguments_are_one_line_errors_that_change_nothing(
    project: Path, tmp_path: Path
) -> None:
    db = str(tmp_path / "t.sqlite")
    seen: list[tuple[str, str]] = []
    positions: list[int] = []

    async def main() -> None:
        async with agent(server_parameters(project, db, tmp_path / "w")) as me:
            env = await me.open("probe")
            worktree = tmp_path / "w" / env
            status = git(worktree, "status", "--porcelain", "--untracked-files=all")
            positions.append(_position(db))
            for tool, args, expected in BAD_CALLS:
                result = await me.call(tool, **args)
                assert result.is_error, (tool, args)
                seen.append((expected, text(result)))
            for env_id in ("env-00000000", "scope:elsewhere:x", "../../x"):
                result = await me.client.call_tool(
                    "run", {"environment_id": env_id, "command": "ls"}
                )
                assert result.is_error
                seen.append(("environment", text(result)))
            positions.append(_position(db))
            now = git(worktree, "status", "--porcelain", "--untracked-files=all")
            assert now == status

    anyio.run(main)
    for expected, message in seen:
        assert expected in message, message
        _one_line(message)
    assert positions[0] == positions[1], "a refused call recorded something"


def test_resources_show_records_and_the_diff(project: Path, tmp_path: Path) -> None:
    async def main() -> tuple[str, str, str, list[str]]:
        params = server_parameters(project, str(tmp_path / "t.sqlite"), tmp_path / "w")
        async with agent(params) as me:
            env = await me.open("res")
            await me.ok("edit_file", path="calc.py", old_text="a - b", new_text="a + b")
            templates = await me.client.list_resource_templates()
            records = await me.client.read_resource(
                f"goatherd://environments/{env}/records"
            )
            diff = await me.client.read_resource(f"goatherd://environments/{env}/diff")
            listing = await me.client.read_resource("goatherd://environments")
            try:
                await me.client.read_resource("goatherd://environments/env-0/diff")
            except Exception as error:  # the SDK raises the server's error
                missing = str(error)
            else:
                missing = ""
            return (
                _text_of(records),
                _text_of(diff),
                _text_of(listing) + "\n" + missing,
                [t.uri_template for t in templates.resource_templates],
            )

    records, diff, listing, templates = anyio.run(main)
    assert "goatherd://environments/{environment_id}/records" in templates
    assert '"schema": "mcp.tool.edit_file.result.v1"' in records
    assert "+    return a + b" in diff
    assert '"state": "active"' in listing
    assert "no environment env-0" in listing


def test_guidance_from_another_process_arrives_with_the_next_result(
    project: Path, tmp_path: Path
) -> None:
    db = str(tmp_path / "t.sqlite")

    async def main() -> str:
        async with agent(server_parameters(project, db, tmp_path / "w")) as me:
            env = await me.open("guided")
            scope_id = f"scope:{root_owner_for(project)}:{env}"
            with open_runtime(db, bus=False) as other:
                supervisor = Supervisor(other.new_manager(), None, recorder=other.store)
                assert isinstance(supervisor.inject(scope_id, "write a test"), Success)
            result = await me.call("list_files")
            assert result.structured_content is not None
            assert result.structured_content["guidance"] == ["write a test"]
            return text(result)

    assert "Supervisor guidance:\n- write a test" in anyio.run(main)


def _start_http(project: Path, tmp_path: Path, address: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "goatherd",
            "mcp",
            "--repo",
            str(project),
            "--db",
            str(tmp_path / "t.sqlite"),
            "--worktrees",
            str(tmp_path / "w"),
            "--http",
            address,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ),
    )


def test_streamable_http_on_loopback(project: Path, tmp_path: Path) -> None:
    server = _start_http(project, tmp_path, "127.0.0.1:0")
    try:
        url = ""
        deadline = time.monotonic() + 60
        assert server.stderr is not None
        while not url and time.monotonic() < deadline:
            line = server.stderr.readline()
            found = re.search(r"listening on (http://\S+)", line)
            url = found.group(1) if found else ""
            assert line or server.poll() is None, "the server ended"

        async def main() -> int:
            async with Client(url) as client:
                me = Agent(client)
                await me.open("over-http")
                ran = await me.ok("run", command="python3 -m unittest -q")
                return int(ran["exit_code"])

        assert anyio.run(main) == 1
    finally:
        server.terminate()
        server.communicate(timeout=30)


def test_http_refuses_an_address_off_loopback(project: Path, tmp_path: Path) -> None:
    server = _start_http(project, tmp_path, "0.0.0.0:0")
    _, err = server.communicate(timeout=60)
    assert server.returncode == 1
    assert err.strip().endswith("--http serves on loopback only, not 0.0.0.0")
