"""docs/mcp.md's full session runs as written against a real ``goatherd mcp``.

The section's ``json`` blocks are the ``tools/call`` params an agent sends,
each optionally followed by a ``text`` block: lines its reply must hold. The
example ids (``fix-add-1a2b3c``, ``cp:...``, ``out:...``) are replaced by the
ones the server hands out, in the order it hands them out. A reply whose
excerpt begins "the supervisor denied" must be a tool error, every other
must succeed. The ``sh`` block is then run from the repository as the
human would, and the fix lands in the repository.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.mcp.agents import agent, server_parameters, text
from tests.mcp.conftest import make_project, needs_landlock

pytestmark = [needs_landlock, pytest.mark.integration]

DOC = Path(__file__).resolve().parents[2] / "docs" / "mcp.md"
SECTION = re.compile(r"^## A full session\n(.*?)^## ", re.DOTALL | re.MULTILINE)
BLOCK = re.compile(r"^```(json|text|sh)\n(.*?)^```$", re.DOTALL | re.MULTILINE)
DOC_IDS = re.compile(r"(?:cp|out):mcp:repo:fix-add-1a2b3c:\d+|fix-add-1a2b3c")
ISSUED = ("environment_id", "checkpoint_id", "output_id")


@dataclass
class Step:
    """One call of the session and the lines its reply must hold."""

    params: dict[str, Any]
    excerpt: list[str]


def _session() -> tuple[list[Step], list[str]]:
    found = SECTION.search(DOC.read_text(encoding="utf-8"))
    assert found, "docs/mcp.md has a 'A full session' section"
    steps: list[Step] = []
    shell: list[str] = []
    for kind, body in BLOCK.findall(found.group(1)):
        if kind == "json":
            steps.append(Step(json.loads(body), []))
        elif kind == "text":
            assert steps, "a reply excerpt follows a call"
            assert not steps[-1].excerpt, "one reply excerpt per call"
            steps[-1].excerpt = [line.strip() for line in body.splitlines()]
        else:
            shell = [line for line in body.splitlines() if line.strip()]
    return steps, shell


class Ids:
    """Example ids of the document mapped to those the server issued."""

    def __init__(self) -> None:
        self.real: dict[str, str] = {}

    def learn(self, excerpt: list[str], content: dict[str, Any]) -> None:
        shown = [m for line in excerpt for m in DOC_IDS.findall(line)]
        for key in ISSUED:
            value = content.get(key)
            if not isinstance(value, str):
                continue
            prefix = {"checkpoint_id": "cp:", "output_id": "out:"}.get(key, "")
            for doc_id in shown:
                kind = doc_id.split(":", 1)[0] + ":" if ":" in doc_id else ""
                if kind == prefix and doc_id not in self.real:
                    self.real[doc_id] = value
                    break

    def apply(self, value: Any) -> Any:
        if isinstance(value, str):
            return DOC_IDS.sub(lambda m: self.real.get(m.group(0), m.group(0)), value)
        if isinstance(value, dict):
            return {key: self.apply(item) for key, item in value.items()}
        return value


def test_the_documented_session_runs(tmp_path: Path) -> None:
    steps, shell = _session()
    assert [s.params["name"] for s in steps][:4] == [
        "open_environment",
        "tree",
        "search",
        "read_file",
    ]
    project = make_project(tmp_path / "repo")
    (project / ".git" / "goatherd").mkdir()
    db = str(project / ".git" / "goatherd" / "trace.sqlite")
    ids = Ids()

    async def main() -> None:
        async with agent(server_parameters(project, db, tmp_path / "w")) as me:
            for step in steps:
                params = ids.apply(step.params)
                result = await me.client.call_tool(params["name"], params["arguments"])
                content = dict(result.structured_content or {})
                ids.learn(step.excerpt, content)
                reply = text(result)
                denied = bool(step.excerpt) and step.excerpt[0].startswith(
                    "the supervisor denied"
                )
                assert result.is_error == denied, (params, reply)
                for line in step.excerpt:
                    assert ids.apply(line) in reply, (params, line, reply)

    anyio.run(main)
    assert {"fix-add-1a2b3c"} <= set(ids.real)
    assert any(doc_id.startswith("out:") for doc_id in ids.real)
    env = dict(os.environ)
    for line in shell:
        argv = shlex.split(ids.apply(line))
        if argv[0] == "export":
            key, _, value = argv[1].partition("=")
            env[key] = value
            continue
        assert argv[0] == "goatherd"
        done = subprocess.run(
            [sys.executable, "-m", "goatherd", *argv[1:]],
            cwd=project,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert done.returncode == 0, (argv, done.stderr)
        if argv[1] == "diff":
            assert "+    return a + b" in done.stdout
        if "--commit" in argv:
            head = subprocess.run(
                ["git", "log", "-1", "--format=%(trailers)"],
                cwd=project,
                capture_output=True,
                text=True,
                check=True,
            ).stdout
            assert f"Goatherd-Output: {argv[1 + argv.index('settle')]}" in head
        if argv[1] == "show":
            assert "the trace records this commit" in done.stdout
    assert "return a + b" in (project / "calc.py").read_text()
    assert not (project / "scratch").exists()
