"""``goatherd mcp`` on the command line: no SDK until it runs, one-line errors."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.mcp.human import goatherd


def test_the_command_line_imports_no_mcp_sdk_until_mcp_runs() -> None:
    code = (
        "import sys, goatherd.cli\n"
        "goatherd.cli.build_parser()\n"
        "loaded = sorted(m for m in sys.modules if m == 'mcp' or m.startswith("
        "('mcp.', 'goatherd.integrations.mcp')))\n"
        "print(loaded)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "[]"


def test_help_describes_the_command() -> None:
    done = goatherd("mcp", "--help")
    assert done.returncode == 0
    for option in ("--repo", "--db", "--worktrees", "--http", "--network"):
        assert option in done.stdout
    assert "--crash-after" not in done.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--repo", "/no/such/dir"], "--repo /no/such/dir: no such directory"),
        (["--repo", "/"], "is not a git repository"),
        (["--timeout", "0"], "--timeout must be above 0"),
        (["--http", "127.0.0.1:notaport"], "the port is not a number"),
        (["--http", "10.1.2.3:0"], "loopback only"),
    ],
)
def test_bad_options_fail_in_one_line(
    args: list[str], message: str, tmp_path: Path
) -> None:
    done = goatherd("mcp", "--db", str(tmp_path / "t.sqlite"), *args)
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert message in lines[0]
    assert not (tmp_path / "t.sqlite").exists()
