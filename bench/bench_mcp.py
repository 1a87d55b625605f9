"""The cost of a recorded ``run`` through ``goatherd mcp`` (issue 17).

Target: a ``run`` called over MCP (the SDK's client, a ``goatherd mcp``
server over stdio) costs under 20 ms more than running the same command
directly, confined the same way (the same Landlock sandbox ``exec`` in the
benchmark's own process). The two are timed in alternating pairs in the same
run, and the overhead is the median of the pairs' differences, so machine
load moves both sides of a pair alike.

Also shown, for the parts of the overhead: the same ``run`` through the
tools in process (declaration, gate, exec, capture; no protocol), a tool
call that runs nothing (``read_file``: protocol plus two records), and the
command started without confinement (the cost of Landlock itself, which the
target leaves out).
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import anyio
from mcp import Client, StdioServerParameters

from goatherd.application import ExecRequest
from goatherd.infrastructure import open_runtime
from goatherd.infrastructure.sandbox import landlock_abi
from goatherd.integrations.mcp import McpSettings, WorkspaceTools

TARGET_MS = 20.0
PAIRS = 40
COMMAND = "true"


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=b", "-c", "user.email=b@b", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
    )


def _project(root: Path) -> Path:
    repo = root / "project"
    repo.mkdir()
    (repo / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "start")
    return repo


def _ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


def _timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def _direct(tools: WorkspaceTools, env: str) -> Callable[[], object]:
    """The same confined exec the server makes, without MCP or records."""
    found = tools.environments.lookup(env)
    scope = tools.environments.manager.get(found.scope_id)
    assert scope is not None
    sandbox = scope.sandbox
    assert sandbox is not None
    request = ExecRequest(
        "/bin/sh",
        ("-c", COMMAND),
        env={"TMPDIR": str(found.tmp), "PYTHONDONTWRITEBYTECODE": "1"},
        timeout=60,
        output_limit=32 * 1024,
    )

    def run() -> object:
        result = sandbox.exec(request)
        assert result.exit_code == 0
        return result

    return run


async def _over_mcp(repo: Path, db: str, worktrees: Path, direct_db: str) -> None:
    params = StdioServerParameters(
        command=sys.executable,
        args=[
            "-m",
            "goatherd",
            "mcp",
            "--repo",
            str(repo),
            "--db",
            db,
            "--worktrees",
            str(worktrees),
        ],
        env=dict(os.environ),
    )
    with open_runtime(direct_db, bus=False) as runtime:
        local = WorkspaceTools(
            runtime, McpSettings(repo, direct_db, worktrees.parent / "local")
        )
        local_env = str(local.open_environment("bench").data["environment_id"])
        direct = _direct(local, local_env)
        async with Client(params) as client:
            opened = await client.call_tool("open_environment", {"name": "bench"})
            env = opened.structured_content["environment_id"]

            async def mcp_run() -> None:
                result = await client.call_tool(
                    "run", {"environment_id": env, "command": COMMAND}
                )
                assert not result.is_error
                assert result.structured_content["exit_code"] == 0

            async def mcp_read() -> None:
                result = await client.call_tool(
                    "read_file", {"environment_id": env, "path": "calc.py"}
                )
                assert not result.is_error

            for _ in range(3):  # warm up every path
                direct()
                await mcp_run()
                local.run(local_env, COMMAND)
            pairs, in_process, reads, plain, directs, mcps = [], [], [], [], [], []
            for _ in range(PAIRS):
                d = _timed(direct)
                start = time.perf_counter()
                await mcp_run()
                m = time.perf_counter() - start
                directs.append(d)
                mcps.append(m)
                pairs.append(m - d)
                in_process.append(_timed(lambda: local.run(local_env, COMMAND)) - d)
                start = time.perf_counter()
                await mcp_read()
                reads.append(time.perf_counter() - start)
                plain.append(_timed(lambda: subprocess.run(["/bin/sh", "-c", COMMAND])))
    overhead = _ms(pairs)
    print(f"confined exec directly:           {_ms(directs):7.1f} ms per call")
    print(f"recorded run over MCP (stdio):    {_ms(mcps):7.1f} ms per call")
    print(f"  overhead (median of {PAIRS} pairs): {overhead:7.1f} ms")
    print(f"  of which in process (records + gate): {_ms(in_process):5.1f} ms")
    print(f"read_file over MCP (no exec):     {_ms(reads):7.1f} ms per call")
    print(f"the command unconfined:           {_ms(plain):7.1f} ms per call")
    verdict = "PASS" if overhead < TARGET_MS else "MISS"
    print(f"{verdict}: recorded run overhead {overhead:.1f} ms < {TARGET_MS:g} ms")


def run() -> None:
    if landlock_abi() < 1:
        print("SKIP: this kernel has no Landlock")
        return
    root = Path(tempfile.mkdtemp(prefix="bench-mcp-"))
    try:
        repo = _project(root)
        anyio.run(
            _over_mcp,
            repo,
            str(root / "trace.sqlite"),
            root / "worktrees",
            str(root / "local.sqlite"),
        )
    finally:
        subprocess.run(["git", "worktree", "prune"], cwd=root / "project", check=False)
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    run()
